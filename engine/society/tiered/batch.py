"""step_tier_batch: one tick of one fixed batch of ``archetype`` or ``rule`` members (``step_agent_batch`` hands over).

Members are not agents with workspaces: a member is its id, its profile and a small state dict, which the batch
reads from the ``agent_state`` shard its previous tick wrote and writes again for this tick (staged with the tick,
like every shard). Each member observes the env and acts through direct tool calls (the env proxy coalesces them
into a few actor calls), and gets its own ``actions`` row with its tier.

- **rule**: the member's policy runs on its observation, state and seeded rng; a policy that raises is that
  member's ``error`` row, and its state stays as it was.
- **archetype**: each group makes one LLM call per tick from its members' aggregated observations
  (:mod:`engine.tiers.archetype`), and each member draws an option from the answer. A group whose call failed
  (after the retries and the structured-output attempts) gives each member an ``llm_error`` row with the error
  and the call id; nothing is drawn for them.

A tool call the env refuses is noted in the member's summary (as an LLM agent reads a refusal); an env that fails
serving a member's request makes that member's row an ``error``.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from engine.env.handle import EnvHandle
from engine.env.proxy import direct_requests
from engine.errors import (
    BudgetExhaustedError,
    EnvError,
    EnvUnavailableError,
    LLMCallError,
    RunError,
    StaleRunError,
    StorageError,
    StructuredOutputError,
    ToolCallError,
)
from engine.failpoints import failpoint
from engine.llm.budget import BudgetGate, Usage
from engine.llm.dispatcher import caller_model, dispatcher_stats, flush_response_caches, refresh_response_caches
from engine.llm.meter import Meter, serving_agent
from engine.llm.prefix import PromptPrint
from engine.llm.structured import complete_structured
from engine.society.batch_result import BatchResult
from engine.society.datasets import ACTIONS
from engine.society.lease import check_session
from engine.society.tiered.telemetry import digest_on_span, sizes_by_tier
from engine.society.transcripts import call_rows, write_call_shards
from engine.society.workspaces.common import BatchJob
from engine.storage.catalog import DatasetSchema
from engine.storage.run_layout import replay_key, run_store
from engine.storage.shards import shard_name
from engine.tiers.archetype import (
    ARCHETYPE_SYSTEM,
    archetype_messages,
    decision_model,
    draw_option,
    group_context,
    option_act,
    probabilities,
)
from engine.tiers.datasets import AGENT_STATE, ARCHETYPE_DECISIONS
from engine.tiers.plan import ArchetypeGroup, TierBatch, member_rng
from engine.tiers.policies import Act, Observation, Policy, resolve_policy
from engine.tiers.spec import ArchetypeSpec, RuleSpec

__all__ = ["STARTED_DIR", "read_group_prompts", "read_member_states", "started_prefix", "step_tier_batch"]

_ABORT = (EnvUnavailableError, StaleRunError)
#: Where tier batches leave a marker as they start (one folder per transaction, which its commit deletes).
STARTED_DIR = "tiers/started"


def started_prefix(txn: int) -> str:
    """The folder of transaction ``txn``'s start markers."""
    return f"{STARTED_DIR}/txn_{txn:06d}/"


async def _begin(job: BatchJob, batch: TierBatch) -> None:
    """Mark the batch started; on a second start (its worker died) drop what the lost attempt queued in the env first."""
    marker = f"{started_prefix(job.txn)}{batch.name}-{job.attempt[:12] or 'run'}"
    assert job.proxy.run_dir is not None
    if await asyncio.to_thread(run_store(job.proxy.run_dir).set_if_absent, marker, b""):
        return
    env = direct_requests(job.proxy.env)
    await asyncio.gather(*(env.discard_pending(agent_id) for agent_id in batch.agent_ids))


def _read_shard(run_dir: Any, batch: TierBatch, schema: DatasetSchema, step: int, columns: list[str]) -> list[dict[str, Any]]:
    try:
        data = run_store(run_dir).get(replay_key(schema.name, shard_name(step, batch.name)))
        return pq.read_table(io.BytesIO(data), columns=columns).to_pylist()
    except (StorageError, OSError) as error:
        raise RunError(f"{batch.name}: its {schema.name} of step {step} cannot be read: {error}") from error


def read_member_states(run_dir: Any, batch: TierBatch, step: int) -> dict[int, dict[str, Any]]:
    """The members' states as tick ``step`` committed them (step 0: none yet).

    Raises:
        RunError: tick ``step`` committed no state for the batch (its shard is missing or unreadable).
    """
    if step == 0:
        return {}
    return {int(r["agent_id"]): json.loads(r["state"]) for r in _read_shard(run_dir, batch, AGENT_STATE, step, ["agent_id", "state"])}


def read_group_prompts(run_dir: Any, batch: TierBatch, step: int) -> dict[str, PromptPrint]:
    """Each archetype group's last prompt print as tick ``step`` committed it (step 0, or a rule batch: none)."""
    if step == 0 or not batch.groups:
        return {}
    rows = _read_shard(run_dir, batch, ARCHETYPE_DECISIONS, step, ["group_id", "prompt_print"])
    return {r["group_id"]: tuple((h, int(n)) for h, n in json.loads(r["prompt_print"])) for r in rows if r["prompt_print"]}


@dataclass
class _Member:
    """One member's step as it goes."""

    agent_id: int
    profile: dict[str, Any]
    state: dict[str, Any]
    row: dict[str, Any]
    acts: list[Act] = field(default_factory=list)
    observation: str = ""


def _refusals(member: _Member, results: list[tuple[str, str | None]]) -> None:
    member.row["tools_called"] = [tool for tool, _ in results]
    refused = [f"{tool} refused: {why}" for tool, why in results if why is not None]
    if refused:
        member.row["summary"] = "; ".join([member.row["summary"] or "", *refused]).strip("; ")[:2000]


async def _act(env: EnvHandle, member: _Member) -> None:
    """Make the member's tool calls in order; a refusal is noted, an env failure makes the row an error."""
    results: list[tuple[str, str | None]] = []
    for act in member.acts:
        try:
            await env.call_tool(act.tool, {**act.arguments, "agent_id": member.agent_id})
            results.append((act.tool, None))
        except ToolCallError as error:
            results.append((act.tool, str(error)[:300]))
        except _ABORT:
            raise  # the actor is lost or the run taken over: the batch ends, not this member's step
        except EnvError as error:
            member.row.update(status="error", error=f"the env failed on {act.tool}: {error}"[:2000])
            await env.discard_pending(member.agent_id)  # a failed step leaves nothing queued, as an agent's does
            break
    member.row["env_calls"] += len(results)
    _refusals(member, results)


async def _observe(env: EnvHandle, members: list[_Member]) -> None:
    """Every member's observation, concurrently (coalesced into few actor calls); a failed one is that member's error."""
    seen = await asyncio.gather(*(env.observe(m.agent_id) for m in members), return_exceptions=True)
    for member, found in zip(members, seen, strict=True):
        if isinstance(found, _ABORT):
            raise found
        if isinstance(found, BaseException):
            if not isinstance(found, Exception):
                raise found
            member.row.update(status="error", error=f"observing failed: {type(found).__name__}: {found}"[:2000])
        else:
            member.observation = found


def _run_policy(batch: TierBatch, spec: RuleSpec, policy: Policy, member: _Member, step: int) -> None:
    state = json.loads(json.dumps(member.state))  # the policy's changes count only if it returns
    observation = Observation(member.agent_id, step, member.observation, member.profile, dict(spec.params))
    try:
        acts = list(policy(observation, state, member_rng(batch.seed, member.agent_id, step)))
        for act in acts:
            if not isinstance(act, Act):
                raise TypeError(f"a policy returns Act values, not {type(act).__name__}")
        json.dumps(state)
    except Exception as error:  # noqa: BLE001 - the policy is user code: its failure is this member's error row
        member.row.update(status="error", error=f"policy {spec.policy} raised {type(error).__name__}: {error}\n"
                                                f"{traceback.format_exc(limit=4)}"[:2000])
        return
    member.state, member.acts = state, acts
    member.row.update(status="finished", summary=f"{spec.policy}: " + (", ".join(a.tool for a in acts) or "no action"))


async def _decide(job: BatchJob, spec: ArchetypeSpec, group: ArchetypeGroup, members: list[_Member], gate: BudgetGate | None,
                  recorder: Any, last_prompt: PromptPrint | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One group's decision and its members' draws; returns its call rows and its ``archetype_decisions`` row."""
    meter = Meter(track_prompts=True, last_prompts={ARCHETYPE_SYSTEM.name: last_prompt} if last_prompt else {})
    serving_agent.set(None)
    model = caller_model(job.proxy.client("default"), meter, caller=f"archetype:{group.id}", role="default", trace=recorder,
                         budget=gate)
    batch = job.tiers
    assert batch is not None
    rng = member_rng(batch.seed, -1, job.step, f"group:{group.id}")
    context = group_context(spec, [m.observation for m in members if m.row["status"] is None], rng)
    messages = archetype_messages(spec, group, step=job.step, context=context)
    stopped = False
    failure: str | None = None
    decision = None
    try:
        decision = await complete_structured(model, messages, decision_model(spec), prompt=ARCHETYPE_SYSTEM)
    except BudgetExhaustedError:
        stopped = True
    except (StructuredOutputError, LLMCallError) as error:
        failure = f"the archetype call of group {group.id} failed: {error}"[:2000]
    calls = call_rows(meter.records, run=job.proxy.run_id, step=job.step, scope="tick")
    call_id = calls[-1]["call_id"] if calls else None
    odds = probabilities(spec, decision) if decision is not None else {}
    text = str(getattr(decision, "text", ""))
    status = "stopped" if stopped else "ok" if decision is not None else "failed"
    row = {"run": job.proxy.run_id, "step": job.step, "group_id": group.id, "key": group.key, "members": len(members),
           "call_id": call_id, "status": status, "probabilities": odds or None, "error": failure,
           "text": text if decision is not None and "text" in type(decision).model_fields else None,
           "prompt_print": meter.last_prompts.get(ARCHETYPE_SYSTEM.name)}
    if stopped:
        return calls, row
    for member in members:
        member.row.update(call_id=call_id, group_id=group.id)
        if member.row["status"] is not None:  # its observation failed
            continue
        if decision is None:
            member.row.update(status="llm_error", error=failure)
            continue
        option = draw_option(spec, odds, member_rng(batch.seed, member.agent_id, job.step))
        act = option_act(option, agent_id=member.agent_id, text=text)
        member.acts = [act] if act is not None else []
        counts = member.state.setdefault("counts", {})
        counts[option.name] = counts.get(option.name, 0) + 1
        member.state["last"] = option.name
        member.row.update(status="finished", summary=f"drew {option.name} (p={odds[option.name]:.2f}) from group {group.id}")
    return calls, row


async def step_tier_batch(job: BatchJob) -> BatchResult:
    """Step one tier batch for one tick and stage its shards."""
    started = time.perf_counter()
    batch = job.tiers
    assert batch is not None and job.proxy.run_dir is not None
    proxy = job.proxy.for_task()
    assert proxy.trace is not None and proxy.replay is not None
    env = direct_requests(proxy.env)  # members hold no trace and route nothing: no span, no task each
    recorder = proxy.trace.recorder
    gate = BudgetGate(job.allowance) if job.allowance is not None else None
    refresh_response_caches()
    await _begin(job, batch)
    states = await asyncio.to_thread(read_member_states, job.proxy.run_dir, batch, job.step - 1)
    prompts = await asyncio.to_thread(read_group_prompts, job.proxy.run_dir, batch, job.step - 1)
    kind = "archetype" if isinstance(batch.spec, ArchetypeSpec) else f"rule:{batch.spec.policy}"
    members = [_Member(agent_id, profile, dict(states.get(agent_id, {})), {
        "run": job.proxy.run_id, "agent_id": agent_id, "agent_type": kind, "step": job.step, "t": job.t, "status": None,
        "tools_called": [], "summary": None, "turns": 0, "env_calls": 1, "error": None, "tier": batch.tier,
        "llm_calls": 0, "llm_failures": 0, "input_tokens": 0, "output_tokens": 0, "llm_latency_ms": 0.0, "cost_usd": 0.0,
    }) for agent_id, profile in zip(batch.agent_ids, batch.profiles, strict=True)]
    with recorder.span("tier.batch", tier=batch.tier, batch=batch.name, step=job.step, members=len(members)):
        await _observe(env, members)
        calls: list[dict[str, Any]] = []
        decisions: list[dict[str, Any]] = []
        stopped = 0
        if isinstance(batch.spec, RuleSpec):
            policy = resolve_policy(batch.spec.policy)
            for member in members:
                if member.row["status"] is None:
                    _run_policy(batch, batch.spec, policy, member, job.step)
        else:
            by_id = {m.agent_id: m for m in members}
            decided = await asyncio.gather(*(_decide(job, batch.spec, group, [by_id[i] for i in group.members], gate, recorder,
                                                     prompts.get(group.id)) for group in batch.groups))
            for group, (rows, decision) in zip(batch.groups, decided, strict=True):
                calls += rows
                decisions.append(decision)
                stopped += len(group.members) if decision["status"] == "stopped" else 0
        if stopped:  # the tick stops for more budget; nothing of it commits
            return _result(job, [], calls, stopped, started, ())
        await asyncio.gather(*(_act(env, m) for m in members if m.row["status"] == "finished"))
        failpoint("mid_tier_batch", step=job.step)  # tests: the worker dies with the batch's acts queued, unwritten
    for member in members:
        member.row["duration_ms"] = (time.perf_counter() - started) * 1000 / max(1, len(members))
    await asyncio.to_thread(flush_response_caches)
    check_session(job.proxy.run_dir, job.session)
    part = shard_name(job.step, job.batch)
    writer = proxy.replay.in_txn(job.txn)
    call_paths, _ = write_call_shards(writer, part, calls, job.text_allowance)
    states_rows = [{"run": job.proxy.run_id, "step": job.step, "agent_id": m.agent_id, "tier": batch.tier,
                    "state": states.get(m.agent_id, {}) if m.row["status"] == "error" else m.state} for m in members]
    written = [writer.write_shard(ACTIONS, part, [m.row for m in members]),
               writer.write_shard(AGENT_STATE, shard_name(job.step, batch.name), states_rows),
               writer.write_shard(ARCHETYPE_DECISIONS, shard_name(job.step, batch.name), decisions),
               *call_paths, proxy.trace.write(part, txn=job.txn)]
    return _result(job, [m.row for m in members], calls, 0, started, tuple(k for k in written if k is not None))


def _result(job: BatchJob, rows: list[dict[str, Any]], calls: list[dict[str, Any]], stopped: int,
            started: float, staged: tuple[str, ...]) -> BatchResult:
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    sizes = sizes_by_tier(calls)
    digest_on_span(sizes)
    assert job.tiers is not None
    return BatchResult(
        step=job.step, batch=job.batch, agents=len(rows), replayed=0, statuses=statuses,
        llm_calls=len(calls), input_tokens=sum(c["input_tokens"] for c in calls),
        output_tokens=sum(c["output_tokens"] for c in calls), env_calls=sum(r["env_calls"] for r in rows),
        usage=Usage.of_calls(calls), budget_stopped=stopped, duration_s=time.perf_counter() - started, worker_pid=os.getpid(),
        dispatcher_builds=dispatcher_stats()["builds"], staged=staged, tier=job.tiers.tier, calls_by_tier=sizes,
    )
