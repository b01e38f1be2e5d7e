"""run_experiment: one spec, end to end, on a Dask client (used by the CLI and the service)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from distributed import Client

from engine.agent.registry import resolve_agent
from engine.env.actor import EnvRouterConfig
from engine.errors import BudgetExhaustedError, RunError, SpecError, StorageError
from engine.failpoints import failpoint
from engine.llm.budget import Allowance
from engine.llm.client import LimiterConfig, LLMClient
from engine.llm.local import is_local, resolve_local_clients
from engine.run_progress import Phase, RunPhase, RunProgress
from engine.run_status import RunStatus, is_finished
from engine.society.batch import BatchResult
from engine.society.fork.as_of import check_as_of_kept, check_as_of_steps
from engine.society.lease import RunLease
from engine.society.questionnaire.items import Questionnaire
from engine.society.run.dashboard import NETWORK, experiment_span, task_key
from engine.society.run.extend import is_extension, record_spec
from engine.society.run.heartbeat import with_heartbeat
from engine.society.run.live_calls import LiveCalls, fold_live
from engine.society.run.manifest import write_run_manifest
from engine.society.run.network import start_network
from engine.society.run.outcome import RunTally, judge, read_run_tally
from engine.society.run.preflight import check_llms, models_to_check
from engine.society.run.profiles import write_profiles
from engine.society.run.target import claim_run_target
from engine.society.shells import Shell, as_shell
from engine.society.society import AgentSociety
from engine.society.status import SocietyStep, has_society_step, read_society, read_society_step
from engine.society.workspaces.manifest import PACKED
from engine.spec import AskStep, ExperimentSpec, InterveneStep, QuestionnaireStep, RunStep, parse_spec
from engine.spec_calls import describe_calls, resolve_env_calls
from engine.storage.run_layout import LLM_CACHE_DIR, RunLocation, as_location, is_url, run_child, run_name, run_store
from engine.storage.store import check_store
from engine.tiers.plan import deal_members, spec_tier_batches

__all__ = ["RunProgress", "RunSummary", "run_experiment"]

log = logging.getLogger(__name__)

#: Action statuses that count as an agent-step in error (as ``outcome.read_run_tally`` counts them).
_ERROR_STATUSES = ("error", "llm_error")


@dataclass(frozen=True)
class RunSummary:
    status: RunStatus
    run_dir: Path | str
    ticks_done: int
    agent_steps: int
    llm_calls: int
    input_tokens: int
    output_tokens: int
    duration_s: float
    error: str | None
    statuses: dict[str, int] | None = None
    tick_seconds: tuple[float, ...] = ()
    env: dict[str, Any] | None = None
    provider_calls: int = 0  #: calls that reached a provider, whole run (resumed parts included)
    dispatcher_builds: dict[int, tuple[int, int]] | None = None  #: worker pid -> backends built (at first batch, at end)
    env_recoveries: int = 0  #: env actors replaced after their worker died
    replayed: int = 0  #: agent-steps re-emitted by retried batches instead of stepped twice
    rolled_back: int = 0  #: agent-steps undone to their journal and stepped again
    #: failures of the whole run: agent-steps that ended in error or llm_error, questionnaire answers without
    #: a valid value, and failed ask or intervene steps (:class:`~engine.society.run.outcome.RunTally`)
    errors: int = 0
    first_error: str | None = None  #: the earliest of them
    transcripts: int = 0  #: rows in ``transcripts`` (one per LLM call while the dataset is on)
    transcripts_dropped: int = 0  #: of which past the cap: metadata only
    transcript_cap: int | None = None  #: the spec's ``transcripts.max_bytes``; None: transcripts off
    #: how the served models differ from the previous ``MANIFEST.json`` (a resume); empty: they do not
    manifest_warnings: tuple[str, ...] = ()

    def transcripts_line(self) -> str:
        """How the transcripts came out, as the CLI prints it."""
        if self.transcript_cap is None:
            return "transcripts: off"
        line = f"transcripts: {self.transcripts} rows"
        if self.transcripts_dropped:
            line += f", {self.transcripts_dropped} with text dropped past the cap of {self.transcript_cap} bytes"
        return line


def _transcript_cap(spec: ExperimentSpec) -> int | None:
    return spec.transcripts.max_bytes if spec.transcripts.enabled else None


def _clients(spec: ExperimentSpec, cache_dir: RunLocation | None, limits: LimiterConfig | None) -> dict[str, LLMClient]:
    extra: dict[str, Any] = {"seed": spec.seed, "cache_dir": str(cache_dir) if cache_dir else None}
    if limits is not None:
        extra["limits"] = limits
    coder = spec.llm.coder or spec.llm.default
    budget = {"default": spec.context_budget, "coder": None}
    return {role: LLMClient(role=role, prompt_budget=budget[role], **extra,
                            **client.model_dump(exclude={"extra"}) | {"options": client.request_options()})
            for role, client in (("default", spec.llm.default), ("coder", coder))}


def _resume_state(spec: ExperimentSpec, run_dir: Path | str, force: bool) -> tuple[SocietyStep, bool]:
    """Where a run stands, after checking that ``spec`` is the one it was started with, and whether ``SOCIETY.json``
    is to record ``spec``: it extends the run with new non-run steps (:mod:`engine.society.run.extend`) or changes
    its run options (:class:`~engine.spec.RunOptions`).

    Raises:
        RunError: nothing to resume in ``run_dir``.
        SpecError: the spec changed (other than its budget and run options, or by appended steps) and ``force`` is
            off; or it changes ``storage.workspaces``.
    """
    stored = read_society(run_dir)
    status = read_society_step(run_dir)
    if stored is None or status is None:
        raise RunError(f"{run_dir} holds no run to resume (SOCIETY.json / SOCIETY_STEP.json missing)")
    before = parse_spec(stored["spec"])
    if spec.storage.workspaces != before.storage.workspaces:
        raise SpecError(f"{run_dir} keeps its workspaces {before.storage.workspaces!r}; a resumed run cannot change "
                        f"storage.workspaces to {spec.storage.workspaces!r}", path="storage.workspaces")
    extends = is_extension(before, spec)
    if _without_budget(before) != _without_budget(spec) and not extends and not force:
        raise SpecError(
            f"the spec differs from the one {run_dir} was started with (hash {stored.get('spec_hash')}); "
            "only the budget and the run options (batch_size, max_workers, transcripts, snapshots, storage.checkpoint_every) "
            "may change on resume, and questionnaire, ask or intervene steps be appended. Pass --force to resume anyway."
        )
    return status, extends or before.run_options() != spec.run_options()


def _without_budget(spec: ExperimentSpec) -> dict[str, Any]:
    return {**spec.science(), "budget": None}


def _by_tier(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A tick's ``token_telemetry`` rows keyed by tier, as the progress record carries them."""
    return {row["tier"]: {k: v for k, v in row.items() if k not in ("run", "tier")} for row in rows}


def _budget(spec: ExperimentSpec) -> Allowance | None:
    if spec.budget is None:
        return None
    return Allowance(spec.budget.max_calls, spec.budget.max_tokens, spec.budget.max_cost_usd)


async def _start_network(spec: ExperimentSpec, shell: Shell, run_dir: RunLocation, run_id: str,
                         enter: Callable[[Phase], None]) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The env modules' kwargs with the spec's network layers and persona fields filled in, once ``network_edges`` is
    written (:func:`~engine.society.run.network.start_network`). A network is made where the shell offloads work (a
    task on a worker), so that it holds no thread of this process (a service's) and the run's cancellation stops it;
    without one, the persona fields are read on a thread here."""
    if spec.network is None:
        return await asyncio.to_thread(start_network, spec, run_dir, run_id)
    enter(Phase(RunPhase.BUILDING_NETWORK))
    return await shell.offload(partial(start_network, spec, run_dir, run_id), key=task_key(NETWORK, run_id, 0))


async def _run_steps(spec: ExperimentSpec, society: AgentSociety, on_tick: Callable[[], None]) -> None:
    """Run the spec's top-level steps that are not completed yet (a resumed run skips the rest)."""
    ticks_before = 0
    for index, step in enumerate(spec.steps):
        if isinstance(step, RunStep):
            done_here = min(step.num_steps, max(0, society.step_count - ticks_before))
            ticks_before += step.num_steps
            if index < society.completed_steps:
                continue
            for _ in range(step.num_steps - done_here):
                await society.step(step.tick)
                on_tick()
            society.mark_step_completed(index)
        elif index < society.completed_steps:
            continue
        elif isinstance(step, QuestionnaireStep):
            await society.run_questionnaire(Questionnaire.from_step(step), step.target_agent_ids, step_index=index,
                                            as_of_step=step.as_of_step)
        elif isinstance(step, AskStep):
            await society.ask(step.question, step_index=index, as_of_step=step.as_of_step)
        elif isinstance(step, InterveneStep) and step.calls is not None:
            modules = [module.type for module in spec.environment.modules]
            await society.intervene(step.instruction or describe_calls(step.calls), step_index=index,
                                    calls=resolve_env_calls(step.calls, modules))
        elif isinstance(step, InterveneStep):
            assert step.instruction is not None  # the spec gives one or the other
            await society.intervene(step.instruction, step_index=index)
        failpoint("between_steps", index=index)


async def run_experiment(
    spec: ExperimentSpec,
    run_dir: RunLocation,
    cluster: Client | Shell,
    *,
    on_progress: Callable[[RunProgress], None] | None = None,
    resume: bool = False,
    force: bool = False,
    llm_cache_dir: Path | None = None,
    llm_limits: LimiterConfig | None = None,
    template_cache_dir: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    experiment_id: str | None = None,
) -> RunSummary:
    """Run every step of ``spec`` into ``run_dir``; failures come back as status ``failed``.

    Args:
        spec: the experiment.
        run_dir: where everything lands: a directory, or a URL of object storage (``s3://bucket/runs/r1``; the
            credentials and endpoint come from the standard AWS environment of the driver and of every worker).
        cluster: where the batches and the env router run: an asynchronous distributed Client (its cluster), or
            a :class:`~engine.society.shells.base.Shell` (:class:`~engine.society.shells.InProcessShell`: this process).
        on_progress: called at every phase (:class:`~engine.run_progress.RunPhase`), on every batch and tick, and
            as the batches' LLM calls happen (:mod:`engine.society.run.live_calls`; only while someone listens).
        resume: continue the run in ``run_dir`` from its last committed transaction.
        force: resume even though the spec changed.
        llm_cache_dir: the response cache (default ``run_dir/llm_cache``); point a rerun at an
            earlier run's cache to replay it without provider calls.
        llm_limits: the AIMD limiter settings (from ``EngineSettings.limiter_config()``).
        template_cache_dir: CodeGen template caches shared across runs (``EngineSettings.template_cache_dir``,
            under ``POLIS_HOME``); None keeps the cache in the run directory.
        input_dirs: folders beside ``run_dir/inputs`` that files named in the spec may come from
            (``EngineSettings.input_dirs``, ``POLIS_INPUT_DIRS``).
        experiment_id: the run's span on the Dask dashboard, and the name its task keys carry
            (:mod:`engine.society.run.dashboard`); default ``run_dir``'s name. Inside an open span
            (a sweep's) the run's span nests in it.

    Raises:
        asyncio.CancelledError: the run was cancelled (status ``cancelled`` is written first; the run
            resumes from its last committed transaction).
    """
    started = time.perf_counter()
    shell = as_shell(cluster)
    run_dir = as_location(run_dir)
    members = spec.agent_members()  # each agent with its population: agent_profiles needs both
    agents = [agent for _, agent in members]
    ticks_total = spec.total_ticks()
    steps_total = ticks_total * len(agents)
    progress = {"ticks": 0, "agent_steps": 0}
    before = RunTally(0, 0, 0, None, 0, 0, 0)  # what a resumed run's earlier drivers committed
    phase: Phase | None = None  # what the run does now (None once it ended)
    live = LiveCalls()  # the batches in flight, as they report their calls (while someone listens)
    working = False  # the society is up: reports say running, not starting

    def report(status: str, error: str | None = None, final: RunTally | None = None) -> None:
        """Report progress: the batches' counts while the run goes on; ``final``, the run's recorded calls (its
        router's and helper's too), so that the last report and the summary count the same calls."""
        if on_progress is None:
            return
        totals = society.totals if society is not None else None
        errors = sum(totals.statuses.get(s, 0) for s in _ERROR_STATUSES) if totals else 0
        calls, tokens_in, tokens_out = ((final.llm_calls, final.input_tokens, final.output_tokens) if final is not None else (
            before.llm_calls + (totals.llm_calls if totals else 0), before.input_tokens + (totals.input_tokens if totals else 0),
            before.output_tokens + (totals.output_tokens if totals else 0)))
        on_progress(fold_live(RunProgress(
            RunStatus(status), progress["ticks"], ticks_total, progress["agent_steps"], steps_total, error,
            llm_calls=calls, input_tokens=tokens_in, output_tokens=tokens_out,
            cost_usd=society.usage.cost_usd if society is not None else 0.0, errors=before.errors + errors,
            tokens=_by_tier(society.last_telemetry) if society is not None and society.last_telemetry else None,
        ).with_phase(phase), live))

    def report_live() -> None:
        report(RunStatus.RUNNING if working else RunStatus.STARTING)

    def enter(now: Phase | None) -> None:
        nonlocal phase
        phase = now
        report_live()

    def on_batch(result: BatchResult) -> None:
        progress["agent_steps"] += result.agents - result.replayed
        report(RunStatus.RUNNING)

    def on_tick() -> None:
        progress["ticks"] = society.step_count if society is not None else 0
        report(RunStatus.RUNNING)

    society: AgentSociety | None = None
    if not resume:  # a resumed run's first report waits for the counts its earlier drivers committed (below)
        report(RunStatus.STARTING)
    local_servers = contextlib.ExitStack()
    env_usage: dict[str, Any] | None = None
    tally: RunTally | None = None
    try:
        if spec.sweep is not None:
            raise SpecError("sweep: this spec declares a sweep; run it with engine.society.run.sweep.run_sweep (polis run does)")
        for agent in agents:
            resolve_agent(agent.type)
        check_as_of_steps(spec.steps)
        if is_url(run_dir):  # a missing bucket or credential fails here, naming the URL, before anything is written
            if spec.storage.workspaces != PACKED:
                raise SpecError(f"a run at a URL ({run_dir}) keeps its agents in packs: storage.workspaces "
                                f"{spec.storage.workspaces!r} needs a local run directory", path="storage.workspaces")
            await asyncio.to_thread(check_store, run_store(run_dir))
        state, record = _resume_state(spec, run_dir, force) if resume else (None, False)
        if state is not None:
            check_as_of_kept(spec, run_dir, state)
        if state is None and has_society_step(run_dir):
            claim_run_target(run_dir)  # refused, saying what is there: the front doors check this before the cluster
        if state is not None and is_finished(state.status) and state.completed_steps >= len(spec.steps):
            progress.update(ticks=state.step_count, agent_steps=state.agent_steps_done)
            report(state.status)
            done = read_run_tally(run_dir)
            return RunSummary(RunStatus(state.status), run_dir, state.step_count, state.agent_steps_done, done.llm_calls,
                              done.input_tokens, done.output_tokens, time.perf_counter() - started, state.error,
                              errors=done.failures, first_error=done.first_failure, transcripts=done.transcripts,
                              transcripts_dropped=done.transcripts_dropped, transcript_cap=_transcript_cap(spec))
        if state is not None:
            progress.update(ticks=state.step_count, agent_steps=state.agent_steps_done)
            with contextlib.suppress(StorageError, OSError):  # a run stopped before its first commit has no replay
                before = await asyncio.to_thread(read_run_tally, run_dir)
        if resume:
            report(RunStatus.STARTING)
        if isinstance(run_dir, Path):
            run_dir.mkdir(parents=True, exist_ok=True)
        with experiment_span(experiment_id or run_name(run_dir)):  # every task of the run joins it
            async with RunLease(run_dir) as lease:
                if record:  # under the lease: a later resume, or another extension, starts from this spec
                    record_spec(run_dir, spec)
                clients = _clients(spec, llm_cache_dir or run_child(run_dir, LLM_CACHE_DIR), llm_limits)
                if any(is_local(c) for c in clients.values()):
                    # local/<name>: start the offline model's server for this run (blocking start-up in a thread),
                    # bound to the driver's address toward the scheduler so that every worker can reach it.
                    from engine.llm.local.server import LocalServerConfig  # stdlib only, but the module loads lazily

                    served = LocalServerConfig(host=shell.driver_host())
                    log.info("local models: serving on %s (the driver's address toward the scheduler)", served.host)
                    enter(Phase(RunPhase.LOADING_MODEL))
                    loading = time.perf_counter()
                    clients = await with_heartbeat(
                        asyncio.to_thread(local_servers.enter_context, resolve_local_clients(clients, served)),
                        lambda seconds: enter(Phase(RunPhase.LOADING_MODEL, seconds=seconds)))
                    enter(Phase(RunPhase.MODEL_READY, seconds=time.perf_counter() - loading))
                # Before tick 0: every worker runs this Polis, reads this run directory and reaches the LLMs.
                await shell.preflight(run_dir, clients, enter)
                if spec.llm_check and models_to_check(clients):
                    enter(Phase(RunPhase.CHECKING_LLMS))
                    await check_llms(clients)
                llm_agents, light = deal_members(spec, members)
                tiers = spec_tier_batches(spec, light)
                specs = [a.model_dump() for a in llm_agents]  # the LLM agents: they get workspaces
                run_id = f"{spec.name}-{uuid.uuid4().hex[:6]}"
                await asyncio.to_thread(write_profiles, run_dir, spec, run_id, members)  # once: a resume finds them written
                modules = await _start_network(spec, shell, run_dir, run_id, enter)
                config = EnvRouterConfig(
                    modules=modules,
                    router=spec.environment.router,
                    max_steps=spec.environment.max_router_steps,
                    coder=clients["coder"],
                    run_dir=run_dir,
                    router_config=dict(spec.environment.router_config),
                    embedder=spec.environment.embedder,
                    embedder_config=dict(spec.environment.embedder_config),
                    template_cache_dir=template_cache_dir,
                    input_dirs=tuple(input_dirs),
                )
                options: dict[str, Any] = {
                    "env": shell.env_host(config, start_t=spec.start_time, agent_ids=[a.id for a in agents], run_id=run_id),
                    "llm": clients, "shell": shell, "run_id": run_id, "batch_size": spec.batch_size,
                    "max_workers": spec.max_workers, "budget": _budget(spec), "on_batch": on_batch, "on_phase": enter,
                    "live": live if on_progress is not None else None,
                    "session": lease.session, "transcript_bytes": _transcript_cap(spec),
                    "snapshots_keep": spec.snapshots.keep, "storage": spec.storage, "tiers": tiers,
                    "info": {
                        "name": spec.name, "spec_hash": spec.spec_hash(), "spec": spec.model_dump(mode="json"),
                        "env_modules": [m.model_dump(mode="json") for m in spec.environment.modules],
                        "llm": {role: c.model_dump(mode="json", exclude={"cache_dir"}) for role, c in clients.items()},
                    },
                }
                society = (await AgentSociety.from_workspace(run_dir, **options) if state is not None
                           else AgentSociety(specs, start_t=spec.start_time, run_dir=run_dir, **options))
                async with contextlib.AsyncExitStack() as listeners, society:
                    if on_progress is not None:
                        await listeners.enter_async_context(shell.listening(run_id, live, report_live))
                    working = True
                    await _run_steps(spec, society, on_tick)
                    enter(Phase(RunPhase.FINISHING))
                    env_usage = await society.env.usage()
                    await society.forget_journals()
                    tally = await asyncio.to_thread(read_run_tally, run_dir)
                    verdict = judge(tally, expected_agent_steps=society.step_count * len(agents),
                                    max_error_rate=spec.max_error_rate)
                    society.set_status(verdict.status, verdict.error)
        status, error = verdict.status, verdict.error
    except asyncio.CancelledError:
        if society is not None:
            society.set_status(RunStatus.CANCELLED, "stopped by a signal or a cancel request; resume to continue")
        phase = None
        report(RunStatus.CANCELLED)
        raise
    except BudgetExhaustedError as caught:
        status, error = RunStatus.BUDGET_EXHAUSTED, str(caught)
        if society is not None:
            society.set_status(status, error)
    except Exception as caught:  # noqa: BLE001 - workers re-raise any type (ImportError, KilledWorker, ...); record it
        status, error = RunStatus.FAILED, f"{type(caught).__name__}: {caught}"
        if society is not None:
            society.set_status(RunStatus.FAILED, error)
    finally:
        await asyncio.to_thread(local_servers.close)
    phase = None
    if tally is None and society is not None:
        with contextlib.suppress(StorageError, OSError):
            tally = await asyncio.to_thread(read_run_tally, run_dir)
    report(status, error, tally)
    warnings: list[str] = []
    if society is not None:
        try:
            warnings = await asyncio.to_thread(write_run_manifest, run_dir, spec)
        except (StorageError, OSError) as caught:  # the run's outcome stands; its manifest is missing
            log.warning("%s: MANIFEST.json not written: %s", run_dir, caught)
        for line in warnings:
            log.warning("%s: %s", run_dir, line)
    totals = society.totals if society is not None else None
    return RunSummary(
        status=RunStatus(status),
        run_dir=run_dir,
        ticks_done=society.step_count if society is not None else progress["ticks"],
        agent_steps=progress["agent_steps"],
        llm_calls=tally.llm_calls if tally else 0,
        input_tokens=tally.input_tokens if tally else 0,
        output_tokens=tally.output_tokens if tally else 0,
        duration_s=time.perf_counter() - started,
        error=error,
        statuses=dict(totals.statuses) if totals else None,
        tick_seconds=tuple(totals.tick_seconds) if totals else (),
        env=env_usage,
        provider_calls=society.usage.calls if society is not None else 0,
        dispatcher_builds={pid: (totals.dispatcher_builds_first[pid], n) for pid, n in totals.dispatcher_builds.items()}
        if totals else None,
        env_recoveries=society.env_recoveries if society is not None else 0,
        replayed=totals.replayed if totals else 0,
        rolled_back=totals.rolled_back if totals else 0,
        errors=tally.failures if tally else 0,
        first_error=tally.first_failure if tally else None,
        transcripts=tally.transcripts if tally else 0,
        transcripts_dropped=tally.transcripts_dropped if tally else 0,
        transcript_cap=_transcript_cap(spec),
        manifest_warnings=tuple(warnings),
    )
