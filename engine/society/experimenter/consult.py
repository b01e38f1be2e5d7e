"""Running an ask or intervene step: the helper in the driver, its outputs staged in the step's transaction.

The helper's answer lands as one ``society_queries`` row and as ``artifacts/<kind>-<step>.json``
(plans, executed steps, answer or error); its LLM calls land in ``llm_calls`` and ``transcripts``. Everything is staged
under the transaction and appears when the society commits it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.llm.budget import Allowance, BudgetGate, Usage
from engine.llm.dispatcher import caller_model
from engine.llm.meter import CallRecord, Meter
from engine.society.datasets import SOCIETY_QUERIES
from engine.society.experimenter.helper import AgentSocietyHelper, HelperResult
from engine.society.transcripts import call_rows, write_call_shards
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import artifact_key, run_store
from engine.storage.shards import shard_name
from engine.storage.staging import staged_key

if TYPE_CHECKING:
    from engine.agent.service_proxy import ServiceProxy
    from engine.society.fork.as_of import AsOfAgents
    from engine.society.shells.base import EnvHost
    from engine.society.transcripts import TranscriptLedger

__all__ = ["ConsultedSociety", "consult_scope", "run_helper"]


class ConsultedSociety(Protocol):
    """What an ask or intervene step needs of the society (:class:`~engine.society.society.AgentSociety` is one)."""

    run_id: str
    transcripts: TranscriptLedger

    @property
    def run_dir(self) -> Path | str: ...
    @property
    def current_time(self) -> datetime: ...
    @property
    def step_count(self) -> int: ...
    @property
    def completed_steps(self) -> int: ...
    @property
    def agent_ids(self) -> list[int]: ...
    @property
    def agent_specs(self) -> list[dict[str, Any]]: ...
    @property
    def proxy(self) -> ServiceProxy: ...
    @property
    def env(self) -> EnvHost: ...

    async def ask_agents(self, agent_ids: list[int], question: str, *, records: list[CallRecord] | None = None,
                         budget: BudgetGate | None = None, as_of: AsOfAgents | None = None) -> dict[int, str]: ...


class _Interviews:
    """What the helper sees of the society: its specs and clock, and interviews whose agents' LLM
    calls are recorded and charged to the run's budget like the helper's own."""

    def __init__(self, society: ConsultedSociety, budget: BudgetGate | None, as_of: AsOfAgents | None = None) -> None:
        self._society = society
        self._budget = budget
        self._as_of = as_of
        self.records: list[CallRecord] = []

    @property
    def current_time(self) -> datetime:
        return self._as_of.at.t if self._as_of is not None else self._society.current_time

    @property
    def agent_ids(self) -> list[int]:
        return self._society.agent_ids

    @property
    def agent_specs(self) -> list[dict[str, Any]]:
        return self._society.agent_specs

    async def ask_agents(self, agent_ids: list[int], question: str) -> dict[int, str]:
        return await self._society.ask_agents(agent_ids, question, records=self.records, budget=self._budget,
                                              as_of=self._as_of)


def consult_scope(kind: str, society: ConsultedSociety, step_index: int | None) -> str:
    """The call-id scope of an ask or intervene step (``ask-003``): its router calls share it."""
    return f"{kind}-{society.completed_steps if step_index is None else step_index:03d}"


async def run_helper(
    society: ConsultedSociety, kind: str, text: str, *, txn: int, step_index: int | None, allowance: Allowance | None,
    as_of: AsOfAgents | None = None, env: EnvHost | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None,
) -> tuple[HelperResult, list[str], Usage]:
    """Run the plan-and-execute helper for one ``ask`` or ``intervene``; it opens the transaction's
    transcript account (``society.transcripts``), its calls being the first to write.

    Args:
        allowance: what the helper and its interviews may spend (None: unlimited).
        as_of: an as-of ask's copies of the agents at a kept tick: the agents it interviews answer
            from them, at that tick's simulated time.
        env: the env the helper reads and changes (default the run's; an as-of ask's: as the tick left it).
        calls: an intervention's env tool calls (tool, arguments), made as written instead of planned by the LLM.

    Returns:
        The helper's result, the staged paths to commit, and the provider usage it spent.
    """
    index = society.completed_steps if step_index is None else step_index
    meter = Meter()
    gate = BudgetGate(allowance) if allowance is not None else None
    view = _Interviews(society, gate, as_of)
    llm = caller_model(society.proxy.client("default"), meter, caller="helper", role="default", budget=gate)
    proxy = (env or society.env).proxy
    assert proxy is not None  # the env actor is up once the society is initialised
    helper = AgentSocietyHelper(proxy, view, llm=llm)
    if calls is not None:
        result = await helper.apply(text, calls)
    else:
        result = await (helper.ask(text) if kind == "ask" else helper.intervene(text))
    meter.records.extend(view.records)

    run_dir = society.run_dir
    part = shard_name(society.step_count, f"{kind}-{index:03d}")
    writer = ReplayWriter(run_dir, txn=txn)
    row = {"run": society.run_id, "step_index": index, "step": society.step_count,
           "as_of_step": as_of.at.step if as_of is not None else None, **result.to_row()}
    rows = call_rows(meter.records, run=society.run_id, step=society.step_count, scope=consult_scope(kind, society, step_index))
    (text_allowance,) = society.transcripts.open(1)
    call_keys, transcripts = write_call_shards(writer, part, rows, text_allowance)
    society.transcripts.add(transcripts)
    written = [writer.write_shard(SOCIETY_QUERIES, part, [row]), *call_keys]
    artifact = staged_key(artifact_key(f"{kind}-{index:03d}.json"), txn)
    run_store(run_dir).set(artifact, result.to_json().encode("utf-8"))
    return result, [k for k in [*written, artifact] if k is not None], Usage.of_calls(rows)
