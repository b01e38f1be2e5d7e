"""questionnaire_agent_batch: the Dask task that puts one questionnaire to one batch of agents.

Like ``step_agent_batch`` it is an ``async def`` (it runs on the worker's event loop), rebuilds each
agent from its workspace and isolates a failing agent (its answers say why). Unlike a tick it never
writes a workspace back: interviewing must not change the subject. Its rows (answers, LLM calls,
spans) are staged in the caller's transaction; :func:`distribute_questionnaire` fans the batches out,
writes the whole response as an artifact and hands back every staged path for the driver to commit.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.agent.base import AgentBase
from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import AgentWorkspace
from engine.errors import BudgetExhaustedError, PolisError, RunError, WorkspaceError
from engine.failpoints import failpoint
from engine.llm.budget import Allowance, BudgetGate, Usage
from engine.llm.dispatcher import flush_response_caches, refresh_response_caches
from engine.llm.meter import serving_agent, serving_run
from engine.society.datasets import LLM_CALLS, QUESTIONNAIRE_ANSWERS, TRANSCRIPTS
from engine.society.lease import check_session
from engine.society.questionnaire.ask import Persona, answer_questionnaire
from engine.society.questionnaire.items import Questionnaire, QuestionnaireAnswer, QuestionnaireResponse, failed_answers
from engine.society.run.dashboard import QUESTIONNAIRE, task_key
from engine.society.run.live_calls import LiveCalls, publishing
from engine.society.tick_core import plan_batches, split_allowance
from engine.society.transcripts import TranscriptLedger, TranscriptTally, call_rows, write_call_shards
from engine.society.workspaces.manifest import AgentSource
from engine.storage.catalog import Catalog
from engine.storage.run_layout import REPLAY_DIR, artifact_key, run_store
from engine.storage.shards import shard_name
from engine.storage.staging import staged_key
from engine.trace import TraceRecorder

if TYPE_CHECKING:
    from engine.society.shells.base import Shell

__all__ = [
    "QuestionnaireBatchResult",
    "QuestionnaireJob",
    "answer_rows",
    "questionnaire_artifact",
    "distribute_questionnaire",
    "questionnaire_agent_batch",
]

_ISOLATED = (PolisError, OSError, ValueError, KeyError, TypeError, AttributeError, LookupError)


@dataclass(frozen=True)
class QuestionnaireJob:
    """One batch of agents answering one questionnaire."""

    questionnaire: Questionnaire
    agent_ids: tuple[int, ...]
    batch: int
    txn: int  #: the transaction the batch's shards are staged in
    step_count: int  #: ticks done when the questionnaire is asked
    step_index: int  #: the spec step (0-based) that asks it
    t: datetime  #: simulated time
    proxy: ServiceProxy
    allowance: Allowance | None = None  #: this batch's share of the remaining budget
    session: str | None = None  #: the driver's lease session; a task of an older session writes nothing
    text_allowance: int | None = None  #: transcript text bytes this batch may keep; None: no transcripts
    agents: AgentSource | None = None  #: where the workspaces are read (None: the run's ``agents/``)
    as_of_step: int | None = None  #: the kept tick those workspaces show (None: the run as it is)
    #: the driver's live-count scope this batch publishes its calls and answers under
    #: (:mod:`engine.society.run.live_calls`); None: nobody listens
    live_scope: str | None = None


@dataclass(frozen=True)
class QuestionnaireBatchResult:
    """The batch's answers (small) and where its staged shards are."""

    batch: int
    answers: list[QuestionnaireAnswer]
    staged: list[str]  #: staged keys to commit with the transaction
    llm_calls: int
    input_tokens: int
    output_tokens: int
    usage: Usage  #: provider usage (what budgets count)
    budget_stopped: int  #: agents not asked because the budget ran out (their answers are not written)
    duration_s: float
    worker_pid: int
    transcripts: TranscriptTally = TranscriptTally()  #: what the batch wrote to ``transcripts``


def _shard(job: QuestionnaireJob) -> str:
    return shard_name(job.step_count, f"q{job.step_index:03d}-{job.batch:04d}")


def _persona(agent: AgentBase, t: datetime) -> Persona:
    recent = agent.state.get("recent") or []
    return Persona(name=agent.name, profile=dict(agent.profile), recent=[str(r) for r in recent],
                   long_memory=agent.thread.summary(), time=t)


async def _answer_one(
    agent_id: int, job: QuestionnaireJob, proxy: ServiceProxy, recorder: TraceRecorder, gate: BudgetGate | None,
    open_workspace: Callable[[int], AgentWorkspace | None],
) -> tuple[list[QuestionnaireAnswer] | None, AgentBase | None]:
    """One agent's answers (None: the budget stopped it); a broken agent fails all its questions, saying why.

    ``proxy`` is the task's (:meth:`ServiceProxy.for_task`); ``recorder`` is its trace recorder.
    """
    run_dir = job.proxy.run_dir
    assert run_dir is not None
    serving_agent.set(agent_id)  # gather runs each agent as its own task: the setting stays with it
    serving_run.set((str(run_dir), job.proxy.run_id))
    q = job.questionnaire
    agent: AgentBase | None = None
    answers: list[QuestionnaireAnswer] | None = None
    with recorder.span("agent.questionnaire", agent_id=agent_id, questionnaire_id=q.questionnaire_id) as span:
        try:
            ws = open_workspace(agent_id)
            if ws is None:
                raise WorkspaceError(f"the workspace of agent {agent_id} does not exist")
            cls: type[AgentBase] = resolve_agent(ws.read_json("config.json")["type"])
            agent = await cls.from_workspace(ws, proxy, budget=gate)
            llm = agent._dispatcher  # the agent's metered model: its calls land in agent.meter.records
            assert llm is not None
            answers = await answer_questionnaire(
                llm, _persona(agent, job.t), q, agent_id=agent_id,
                max_attempts=agent.settings.max_parse_attempts,
            )
        except BudgetExhaustedError:
            # Not a failed answer: the questionnaire stops and is asked again once there is budget.
            span.set(status="budget_exhausted")
        except _ISOLATED as error:
            text = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"[:2000]
            answers = failed_answers(q, agent_id, text, attempts=agent.meter.calls if agent else 0)
        if answers is not None:
            span.set(ok=sum(a.parse_success for a in answers), failed=sum(not a.parse_success for a in answers))
    # No to_workspace: a questionnaire leaves the workspace exactly as it found it.
    return answers, agent


def _answered(result: tuple[list[QuestionnaireAnswer] | None, AgentBase | None]) -> int:
    """How many answers one agent gave (its failed ones included: they are rows too)."""
    return len(result[0] or ())


def answer_rows(job: QuestionnaireJob, answers: list[QuestionnaireAnswer]) -> list[dict[str, Any]]:
    """The ``questionnaire_answers`` rows of ``answers`` (one per agent and question)."""
    types = {item.id: item.response_type for item in job.questionnaire.questions}
    rows = []
    for a in answers:
        kind = types[a.question_id]
        ok = a.parse_success
        rows.append({
            "run": job.proxy.run_id, "questionnaire_id": job.questionnaire.questionnaire_id,
            "step_index": job.step_index, "step": job.step_count, "as_of_step": job.as_of_step, "t": job.t,
            "agent_id": a.agent_id,
            "question_id": a.question_id, "response_type": kind, "raw_text": a.raw_text,
            "value_json": a.value if ok else None,
            "value_int": a.value if ok and kind == "integer" else None,
            "value_float": a.value if ok and kind == "float" else None,
            "value_text": a.value if ok and kind in ("text", "choice") else None,
            "reason": a.reason, "parse_success": ok, "error": a.error, "attempts": a.attempts,
        })
    return rows


async def questionnaire_agent_batch(job: QuestionnaireJob) -> QuestionnaireBatchResult:
    """Answer ``job.questionnaire`` for every agent of the batch concurrently and stage the shards."""
    started = time.perf_counter()
    run_dir = job.proxy.run_dir
    assert run_dir is not None, "a questionnaire batch needs a run directory"
    proxy = job.proxy.for_task()  # a trace recorder of this task's own: its spans are this batch's shard
    assert proxy.trace is not None and proxy.replay is not None
    recorder = proxy.trace.recorder
    gate = BudgetGate(job.allowance) if job.allowance is not None else None
    refresh_response_caches()
    assert job.proxy.run_dir is not None
    open_workspace = (job.agents or AgentSource.of_run(job.proxy.run_dir)).opener()
    with publishing(job.live_scope, run=job.proxy.run_id, batch=job.batch) as live:
        results = await asyncio.gather(*(live.counted(_answer_one(a, job, proxy, recorder, gate, open_workspace), _answered)
                                         for a in job.agent_ids))
    answers = [answer for agent_answers, _ in results if agent_answers is not None for answer in agent_answers]
    meters = [agent.meter for _, agent in results if agent is not None]
    records = [r for m in meters for r in m.records]
    calls = call_rows(records, run=job.proxy.run_id, step=job.step_count, scope=f"q{job.step_index:03d}")
    part = _shard(job)
    await asyncio.to_thread(flush_response_caches)  # the answers this batch used are on disk before the commit
    check_session(run_dir, job.session)
    writer = proxy.replay.in_txn(job.txn)
    call_keys, transcripts = write_call_shards(writer, part, calls, job.text_allowance)
    written = [
        writer.write_shard(QUESTIONNAIRE_ANSWERS, part, answer_rows(job, answers)),
        *call_keys,
        proxy.trace.write(part, txn=job.txn),
    ]
    failpoint("questionnaire", step_index=job.step_index)
    return QuestionnaireBatchResult(
        batch=job.batch,
        answers=answers,
        staged=[k for k in written if k is not None],
        llm_calls=sum(m.calls for m in meters),
        input_tokens=sum(m.input_tokens for m in meters),
        output_tokens=sum(m.output_tokens for m in meters),
        usage=Usage.of_calls(calls),
        budget_stopped=sum(1 for agent_answers, _ in results if agent_answers is None),
        duration_s=time.perf_counter() - started,
        worker_pid=os.getpid(),
        transcripts=transcripts,
    )


def questionnaire_artifact(step_index: int, questionnaire_id: str) -> str:
    """The run's key where the whole response of a questionnaire step lands once committed."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", questionnaire_id).lstrip(".") or "_"
    return artifact_key(f"questionnaire-{step_index:03d}-{safe}.json")


async def distribute_questionnaire(
    shell: Shell,
    questionnaire: Questionnaire,
    agent_ids: list[int],
    *,
    proxy: ServiceProxy,
    txn: int,
    step_count: int,
    step_index: int,
    t: datetime,
    batch_size: int,
    max_workers: int | None,
    budget: Allowance | None = None,
    on_batch: Callable[[QuestionnaireBatchResult], None] | None = None,
    session: str | None = None,
    transcripts: TranscriptLedger | None = None,
    agents: AgentSource | None = None,
    as_of_step: int | None = None,
    live: LiveCalls | None = None,
) -> tuple[QuestionnaireResponse, list[str]]:
    """Put ``questionnaire`` to ``agent_ids`` in batch futures (:func:`~engine.society.tick_core.plan_batches`), at most ``max_workers`` at once.

    Args:
        shell: where the batch jobs run (:mod:`engine.society.shells`).
        questionnaire: what to ask.
        agent_ids: who answers.
        proxy: the run's service handles (its ``run_dir`` receives the shards).
        txn: the transaction every output is staged in.
        step_count: ticks done so far (the shards' step).
        step_index: the spec step asking the questionnaire (0-based).
        t: the simulated time.
        batch_size: agents per batch future, at most.
        max_workers: batch futures in flight at once (None: all).
        budget: what remains of the run's budget, shared evenly by the batches (None: unlimited).
        on_batch: called after each batch completes (progress reporting).
        session: the driver's lease session (batches of an older session write nothing).
        transcripts: the run's transcript account: the questionnaire opens its transaction there,
            sharing what is left of the cap evenly over the batches, and adds what each wrote
            (None: no transcripts).
        agents: where the agents' workspaces are read (None: the run's ``agents/``): the run's packs, or,
            for an ``as_of_step`` questionnaire, copies of a kept tick (:mod:`engine.society.fork.as_of`).
        as_of_step: the tick those copies show, recorded in every answer row (None: the run as it is).
        live: where the batches' live counts of calls and answers are folded while they run (None: they publish none).

    Returns:
        The merged response (answers in agent order) and every staged key (shards and the
        ``artifacts/questionnaire-<step_index>-<id>.json`` response), for ``commit_staged``.

    Raises:
        RunError: the proxy has no run directory.
        BudgetExhaustedError: the budget ran out before every agent was asked; nothing of the
            questionnaire is meant to be committed (its staged files belong to ``txn`` and are
            swept by ``recover_staged``), so a resumed run asks it again.
    """
    run_dir = proxy.run_dir
    if run_dir is None:
        raise RunError("a questionnaire needs a run directory (ServiceProxy.run_dir)")
    catalog = Catalog(run_store(run_dir).child(REPLAY_DIR))
    for schema in (QUESTIONNAIRE_ANSWERS, LLM_CALLS, TRANSCRIPTS):
        catalog.register(schema)
    batches = plan_batches(list(agent_ids), batch_size, await shell.slots(max_workers))
    shares = split_allowance(budget, Usage(), len(batches)) if budget and batches else [None] * len(batches)
    texts = transcripts.open(len(batches)) if transcripts is not None else [None] * len(batches)

    def on_result(result: QuestionnaireBatchResult) -> None:
        if transcripts is not None:
            transcripts.add(result.transcripts)
        if live is not None:
            live.finished(result.batch)  # before on_batch reports: the result replaces the live estimate
        if on_batch is not None:
            on_batch(result)

    scope = live.open() if live is not None else None
    jobs = [
        QuestionnaireJob(questionnaire, ids, i, txn, step_count, step_index, t, proxy, shares[i], session, texts[i],
                         agents, as_of_step, scope)
        for i, ids in enumerate(batches)
    ]
    try:
        finished = await shell.fan_out(questionnaire_agent_batch, jobs, _key, limit=max_workers, on_result=on_result)
    finally:
        if live is not None:
            live.close()
    results = sorted(finished, key=lambda r: r.batch)
    stopped = sum(r.budget_stopped for r in results)
    if stopped:
        raise BudgetExhaustedError(
            f"budget exhausted during questionnaire {questionnaire.questionnaire_id!r}: {stopped} agents not asked"
        )
    usage = Usage()
    for result in results:
        usage.add(result.usage)
    response = QuestionnaireResponse(
        questionnaire_id=questionnaire.questionnaire_id,
        answers=[a for r in results for a in r.answers],
        llm_calls=sum(r.llm_calls for r in results),
        input_tokens=sum(r.input_tokens for r in results),
        output_tokens=sum(r.output_tokens for r in results),
        usage=usage,
    )
    artifact = staged_key(questionnaire_artifact(step_index, questionnaire.questionnaire_id), txn)
    run_store(run_dir).set_json(artifact, response.model_dump(mode="json"), indent=2)
    return response, [k for r in results for k in r.staged] + [artifact]


def _key(job: QuestionnaireJob) -> str:
    return task_key(QUESTIONNAIRE, job.proxy.run_id, job.txn, f"{job.batch:04d}")
