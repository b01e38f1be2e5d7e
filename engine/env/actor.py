"""The env router's Dask actor: a thin async shell around a RouterBase.

Every method is ``async`` so it runs on the worker's event loop and never takes the actor's single
executor thread; nothing in here blocks for long (tool code is microseconds, LLM waits are awaits).

``ask_many`` serves the requests of one coalescing window side by side, and a request that raises
is answered on its own (an :class:`EnvReply` with status ``"error"``; the traceback goes to the log
and the request's ``env.ask`` span): one agent's failing request never fails its neighbours'.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import traceback
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from engine.env.control import BeginTick, EndConsult, EndTick, TickEnd
from engine.env.input_files import InputRoots, input_roots
from engine.env.metrics import ENV_METRICS, metric_rows
from engine.env.module_datasets import module_datasets
from engine.env.registry import resolve_env_module
from engine.env.requests import EnvReply, EnvRequest, ToolCall
from engine.env.router_base import RouterBase, RouterSetup
from engine.env.routers import ROUTERS, CodeGenRouter
from engine.env.routers.cache_ledger import CODEGEN_CACHE, CacheLedger
from engine.env.tool_calls import ENV_TOOL_CALLS, tool_call_rows
from engine.env.world import WorldDescription, load_or_describe
from engine.errors import ToolCallError
from engine.failpoints import failpoint
from engine.llm.budget import Allowance, BudgetGate, Usage
from engine.llm.client import LLMClient
from engine.llm.dispatcher import caller_model, flush_response_caches, refresh_response_caches
from engine.llm.meter import CallRecord, Meter, serving_agent
from engine.router_names import DEFAULT_ROUTER, RouterName
from engine.storage.atomic import atomic_write_json, read_json
from engine.storage.catalog import RUN_COLUMN, Catalog
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import (
    ENV_SNAPSHOT_DONE,
    REPLAY_DIR,
    RunLayout,
    RunLocation,
    env_snapshot_prefix,
    is_url,
    run_store,
)
from engine.storage.shards import shard_name
from engine.storage.store import get_tree, put_tree
from engine.trace import SpanRef, TraceRecorder, write_trace_shard

__all__ = ["CACHE_LEDGER", "EnvRouterActor", "EnvRouterConfig", "build_router", "snapshot_name", "template_cache_dir"]

logger = logging.getLogger(__name__)

#: How much of a failed request's exception its reply carries (the log and the span keep the rest).
_ERROR_CHARS = 300

#: the CodeGen cache's counts in a snapshot (beside the modules' directories)
CACHE_LEDGER = "_codegen_cache.json"


def snapshot_name(txn: int) -> str:
    return f"txn_{txn:06d}"


@dataclass(frozen=True)
class EnvRouterConfig:
    """Everything needed to build the router on whichever worker hosts the actor."""

    modules: tuple[tuple[str, dict[str, Any]], ...]  #: (type name, kwargs) in spec order
    router: RouterName = DEFAULT_ROUTER
    max_steps: int = 3
    coder: LLMClient = field(default_factory=lambda: LLMClient(role="coder"))
    run_dir: RunLocation | None = None
    #: the spec's ``environment.router_config``: what the router's ``Config`` takes
    router_config: Mapping[str, Any] = field(default_factory=dict)
    embedder: str = "sim"  #: for a router that embeds (codegen's template cache)
    embedder_config: Mapping[str, Any] = field(default_factory=dict)
    #: codegen only: the template cache's directory, shared across runs (``$POLIS_HOME/codegen_cache``,
    #: from ``EngineSettings.template_cache_dir``); None: see :func:`template_cache_dir`
    template_cache_dir: Path | None = None
    #: directories whose files module kwargs may name besides ``<run_dir>/inputs`` and bundled data
    #: (``POLIS_INPUT_DIRS``, from ``EngineSettings.input_dirs``); see :mod:`engine.env.input_files`
    input_dirs: tuple[Path, ...] = ()


def template_cache_dir(config: EnvRouterConfig) -> Path | None:
    """Where the CodeGen template cache lives: the shared directory when configured; else beside the
    coder's response cache when that one is shared (lies outside the run: a rerun replaying an earlier
    run's answers replays the code generated from them too); else ``<run_dir>/env/_codegen_cache`` for a run on
    local disk, and None (no template cache) for a run in object storage."""
    if config.template_cache_dir is not None:
        return Path(config.template_cache_dir)
    if config.coder.cache_dir is not None and is_url(config.coder.cache_dir):
        return None  # a response cache in object storage: the run is there too
    responses = Path(config.coder.cache_dir) if config.coder.cache_dir is not None else None
    run_dir = Path(config.run_dir) if config.run_dir is not None and not is_url(config.run_dir) else None
    if responses is not None and (run_dir is None or not responses.resolve().is_relative_to(run_dir.resolve())):
        return responses / "codegen_cache"
    return RunLayout(run_dir).codegen_cache if run_dir is not None else None


def build_router(config: EnvRouterConfig, *, trace: TraceRecorder | None = None, budget: BudgetGate | None = None,
                 env_root: Path | None = None) -> RouterBase:
    """Construct modules and the router (no Dask involved; tests use this directly).

    Args:
        config: what to build.
        trace: where the coder's ``llm.completion`` spans go; None: no spans.
        budget: the gate the coder's calls are charged to; None: unlimited.
        env_root: where the modules keep their live state; default the run's ``env/`` (a run on local disk), or no
            folder (a run in object storage: what a tick commits is its snapshot, in the store).
    """
    # Files a spec names (city_file, ...) resolve only under the run's inputs and the allow-list.
    with input_roots(InputRoots.for_run(config.run_dir, tuple(config.input_dirs))):
        modules = [resolve_env_module(type_name)(**kwargs) for type_name, kwargs in config.modules]
    meter = Meter()
    llm = caller_model(config.coder, meter, caller="router", role="coder", trace=trace, budget=budget)
    cls = ROUTERS.resolve(config.router)
    setup = RouterSetup(meter, config.max_steps, template_cache_dir(config), config.coder.seed, config.embedder,
                        config.embedder_config)
    router = cls.from_config(modules, llm, cls.Config.model_validate(dict(config.router_config)), setup)
    if env_root is None and config.run_dir is not None and not is_url(config.run_dir):
        env_root = RunLayout(Path(config.run_dir)).env
    if env_root is not None:
        router.bind_env_workspaces(env_root, [t for t, _ in config.modules])
    return router


def _tool_call(request: EnvRequest, result: str, *, ok: bool) -> tuple[ToolCall, ...]:
    """The call a ``call_tool`` request made, for its reply (other requests call no tool themselves)."""
    if request.op != "call_tool":
        return ()
    return (ToolCall(request.instruction, dict(request.arguments or {}), result, ok),)


class EnvRouterActor:
    """Hosts the router for a whole run. Create with ``client.submit(EnvRouterActor, config, actor=True)``."""

    def __init__(self, config: EnvRouterConfig) -> None:
        self.config = config
        self._trace = TraceRecorder()
        #: the router's share of each transaction's budget (the driver renews it: :meth:`begin_tick`)
        self._budget = BudgetGate(Allowance())
        # A run in object storage: the modules' live state in a scratch folder of this process, removed when the actor
        # closes or is dropped (a released actor is never closed).
        scratch = Path(tempfile.mkdtemp(prefix="polis-env-")) if config.run_dir is not None and is_url(config.run_dir) else None
        self._scratch = weakref.finalize(self, shutil.rmtree, scratch, ignore_errors=True) if scratch is not None else None
        self.router = build_router(config, trace=self._trace, budget=self._budget, env_root=scratch)
        self._replay = ReplayWriter(config.run_dir) if config.run_dir is not None else None
        self.requests_served = 0
        self.batches_served = 0
        #: per-step cache rows and run totals (codegen only)
        self._ledger = CacheLedger(self.router.get_cache_stats()) if isinstance(self.router, CodeGenRouter) else None
        self._world: WorldDescription | None = None  #: the run's world description, once known

    async def init(self, start_t: datetime, agent_ids: Sequence[int] | np.ndarray, snapshot: str | None = None,
                   allowance: Allowance | None = None) -> dict[str, Any]:
        """Initialise modules, restoring the committed snapshot ``snapshot`` when given; returns what the proxy carries.

        The world description's LLM call (once per run) is charged to ``allowance`` (None: unlimited). The driver
        sends ``agent_ids`` as an int64 array: one buffer, where a list of a million ints took the actor call a
        minute to carry (``benchmarks/network.py``).
        """
        agent_ids = agent_ids.tolist() if isinstance(agent_ids, np.ndarray) else list(agent_ids)
        self._budget.renew(allowance or Allowance())
        with tempfile.TemporaryDirectory(prefix="polis-snapshot-") as scratch:
            folder = Path(scratch) / "snapshot"
            if snapshot:
                assert self.config.run_dir is not None, "snapshots need a run"
                await asyncio.to_thread(get_tree, run_store(self.config.run_dir), env_snapshot_prefix(snapshot), folder)
            restored = await self.router.init(start_t, agent_ids, snapshot=folder if snapshot else None)
            ledger = read_json(folder / CACHE_LEDGER, default={}) if snapshot else None
        if self.config.run_dir is not None:
            catalog = Catalog(run_store(self.config.run_dir).child(REPLAY_DIR))
            catalog.register(ENV_TOOL_CALLS)
            catalog.register(ENV_METRICS)
            if self._ledger is not None:
                catalog.register(CODEGEN_CACHE)
        if self._ledger is not None and ledger is not None:
            # The cache file itself reloaded when the router was built; its counts come from the snapshot.
            self._ledger.restore(ledger)
        return {
            "restored": restored,
            "world_description": await self._world_description(),
            "env_skill_dirs": [(m.name, str(d)) for m in self.router.env_modules for d in m.skill_dirs()],
        }

    async def _world_description(self) -> str:
        """The run's world description: this actor's, else the run directory's, else the LLM's (once per run)."""
        if self._world is None:
            run = run_store(self.config.run_dir) if self.config.run_dir is not None else None
            with self._trace.span("env.world_description") as span:
                self._world = await load_or_describe(run, self.router.env_modules, self.router.llm)
                span.set(source=self._world.source, error=self._world.error)
            self.router.set_world_description(self._world.text)
        return self._world.text

    async def begin_tick(self, begin: BeginTick) -> None:
        """Begin a transaction: set the tick's simulated time (None: it stays), and charge the router's LLM calls
        from now on to ``begin.allowance``, as the driver does with each batch's share (None: the gate stays as it
        is); refusals count from zero again. Calls the driver has not drained yet (init's world description) are
        charged to the share: the driver did not know of them."""
        if begin.t is not None:
            self.router.set_current_time(begin.t)
        if begin.allowance is not None:
            self._budget.renew(begin.allowance)
            self._budget.used = Usage.of_calls(r.as_row() for r in self.router.meter.records)

    async def _serve(self, request: EnvRequest, route: Callable[[EnvRequest], Awaitable[EnvReply]]) -> EnvReply:
        """Answer one request by ``route``; an exception becomes this request's ``"error"`` reply, and only its."""
        try:
            return await route(request)
        except Exception as error:  # noqa: BLE001 - recorded (log, span) and answered; the window's other requests go on
            logger.warning("env %s request of agent %s failed", request.op, request.agent_id, exc_info=True)
            detail = f"{type(error).__name__}: {error}"
            if len(detail) > _ERROR_CHARS:
                detail = detail[:_ERROR_CHARS] + "..."
            answer = f"error: the environment failed on this {request.op} request ({detail})"
            return EnvReply(answer, "error", _tool_call(request, answer, ok=False))

    async def _traced(self, request: EnvRequest) -> EnvReply:
        serving_agent.set(request.agent_id)  # each request runs as its own task: the router's calls serve this agent
        parent = SpanRef(request.trace_id, request.parent_span_id) if request.trace_id and request.parent_span_id else None
        with self._trace.span(
            "env.ask", trace_id=request.trace_id, parent=parent, op=request.op, agent_id=request.agent_id
        ) as span:
            try:
                return await self._route(request)
            except Exception:
                span.set(traceback=traceback.format_exc(limit=12)[-4000:])  # the span records the error itself
                raise

    async def _route(self, request: EnvRequest) -> EnvReply:
        if request.op == "observe":
            return EnvReply(await self.router.observe(request.agent_id), "success")
        if request.op == "discard":
            dropped = await self.router.discard_pending(request.agent_id)
            self.router.discard_tool_calls(request.agent_id)  # the undone step's calls are not the tick's
            return EnvReply(f"{dropped} queued updates dropped", "success", value=dropped)
        if request.op == "call_tool":
            try:
                value = await self.router.call_tool(request.instruction, request.arguments or {}, readonly=request.readonly)
            except ToolCallError as error:
                return EnvReply(f"error: {error}", "fail", _tool_call(request, f"error: {error}", ok=False))
            return EnvReply(str(value), "success", _tool_call(request, str(value), ok=True), value)
        return await self.router.ask(request)

    async def ask_many(self, requests: list[EnvRequest]) -> list[EnvReply]:
        """Serve many agents' requests in one actor call, concurrently; each reply answers its own request.

        Returns:
            One reply per request, in order; a request that raised gets a reply with status ``"error"``.
        """
        self.requests_served += len(requests)
        self.batches_served += 1
        return list(await asyncio.gather(*(self._serve(r, self._traced) for r in requests)))

    async def serve_direct(self, requests: list[EnvRequest]) -> list[EnvReply]:
        """Serve observes, direct tool calls and discards one after another in this call, with no span each.

        For callers that hold no trace and route nothing (tier members, :func:`engine.env.proxy.direct_requests`):
        at a million members a tick, a task and a root span per request cost a fifth of the actor's time and most
        of a run's bytes, and no span of theirs joins anything. Their tool calls still land in ``env_tool_calls``.

        Returns:
            One reply per request, in order; a request that raised gets a reply with status ``"error"``, and an
            ``ask`` (it routes through an LLM, concurrently: :meth:`ask_many`) is refused as one.
        """
        self.requests_served += len(requests)
        self.batches_served += 1
        replies = [await self._serve(r, self._direct) for r in requests]
        serving_agent.set(None)
        return replies

    async def _direct(self, request: EnvRequest) -> EnvReply:
        if request.op == "ask":
            raise ValueError("an ask is routed by ask_many, not served directly")
        serving_agent.set(request.agent_id)
        return await self._route(request)

    async def end_tick(self, end: EndTick) -> TickEnd:
        """End a tick: drain the router's call records and read the budget's refusals; then, unless the budget
        stopped or refused anything (:meth:`EndTick.steps`), run the env step inside transaction ``end.txn``: apply
        the tick's updates, stage its replay rows (the modules' own datasets, their metrics as ``env_metrics``,
        tool calls, codegen cache traffic; every row carrying run id ``end.run``) and trace, and write the state
        snapshot the transaction commits.

        The tool-call history is drained by the step whether or not there is a run directory: the actor
        holds one step's calls at most.

        Raises:
            EnvMetricError: a module reported an undeclared metric or a value that is not a finite number.
        """
        records, refused = self._drain()
        if not end.steps(refused):
            return TickEnd(records, refused)
        step, t, txn, run = end.step, end.t_end, end.txn, end.run
        await self.router.step(end.tick, t)
        calls = tool_call_rows(run, step, t, self.router.drain_tool_calls())
        cache_row = self._ledger.row(run, step, t) if self._ledger is not None else None
        counts: dict[str, int] = {}
        staged: list[str] = []
        if self._replay is not None and self.config.run_dir is not None:
            writer = self._replay.in_txn(txn)
            schemas = {s.name: s for s in module_datasets(type(m) for m in self.router.env_modules)}
            for module in self.router.env_modules:
                for name, rows in module.replay_rows(step, t).items():
                    # A module's rows do not know the run: the run column is stamped here, for every module.
                    stamped = [{**row, RUN_COLUMN.name: run} for row in rows]
                    key = writer.write_shard(schemas[name], shard_name(step, f"env-{module.name}"), stamped)
                    staged += [key] if key else []
                    counts[name] = counts.get(name, 0) + len(rows)
            metrics = metric_rows(run, step, t, self.router.env_modules)
            key = writer.write_shard(ENV_METRICS, shard_name(step, "env-metrics"), metrics)
            staged += [key] if key else []
            counts[ENV_METRICS.name] = len(metrics)
            key = writer.write_shard(ENV_TOOL_CALLS, shard_name(step, "env"), calls)
            staged += [key] if key else []
            counts[ENV_TOOL_CALLS.name] = len(calls)
            if cache_row is not None:
                key = writer.write_shard(CODEGEN_CACHE, shard_name(step, "env-router"), [cache_row])
                staged += [key] if key else []
                counts[CODEGEN_CACHE.name] = 1
            trace = write_trace_shard(self.config.run_dir, shard_name(step, "env"), self._trace.drain(), txn=txn)
            staged += [trace] if trace else []
            failpoint("env_step", step=step)
        await asyncio.to_thread(flush_response_caches)  # the router's answers are on disk before the tick commits
        refresh_response_caches()  # and next tick's first miss looks for the packs the batches wrote
        return TickEnd(records, refused, tuple(staged), counts, await self._snapshot(txn))

    async def end_consult(self, end: EndConsult) -> TickEnd:
        """End an ask or intervene: drain the router's call records and read the budget's refusals; an intervention
        the budget refused nothing of (:meth:`EndConsult.settles`) then applies the updates it queued, without
        advancing time, and writes the snapshot its transaction commits."""
        records, refused = self._drain()
        if not end.settles(refused):
            return TickEnd(records, refused)
        self.router.apply_pending()
        return TickEnd(records, refused, snapshot=await self._snapshot(end.txn))

    def _drain(self) -> tuple[tuple[CallRecord, ...], int]:
        """The router's call records since the last drain, and how many calls the budget refused since :meth:`begin_tick`."""
        records = tuple(self.router.meter.records)
        self.router.meter.records.clear()
        return records, self._budget.refused

    async def _snapshot(self, txn: int) -> str | None:
        """Write every module's state as snapshot ``txn_<txn>``: the run's keys ``env/_snapshots/txn_<txn>/...``.

        The modules write a scratch folder, which then replaces the keys of the snapshot (a re-run of the same
        transaction overwrites its snapshot). Until the transaction commits, no reader looks at them.
        """
        if self.config.run_dir is None:
            return None
        name = snapshot_name(txn)
        with tempfile.TemporaryDirectory(prefix="polis-snapshot-") as scratch:
            folder = Path(scratch) / name
            folder.mkdir()  # a module-less router writes nothing
            await self.router.to_workspaces(folder)
            if self._ledger is not None:
                await asyncio.to_thread(atomic_write_json, folder / CACHE_LEDGER, self._ledger.dump())
            await asyncio.to_thread(self._publish_snapshot, name, folder)
        return name

    def _publish_snapshot(self, name: str, folder: Path) -> None:
        assert self.config.run_dir is not None
        store, prefix = run_store(self.config.run_dir), env_snapshot_prefix(name)
        files = put_tree(store, prefix, folder)
        store.set_json(prefix + ENV_SNAPSHOT_DONE, {"files": files})  # last: the snapshot is whole

    async def usage(self) -> dict[str, Any]:
        """The router's LLM usage, the requests and batches served, and (codegen) the run's
        template cache counts under ``codegen_cache``."""
        usage: dict[str, Any] = {
            **self.router.get_token_usages(),
            "requests": self.requests_served,
            "batches": self.batches_served,
        }
        if self._ledger is not None:
            usage["codegen_cache"] = self._ledger.totals().as_dict()
        return usage

    async def where(self) -> dict[str, Any]:
        """The worker address and process id hosting this actor."""
        from distributed import get_worker

        return {"address": get_worker().address, "pid": os.getpid()}

    async def close(self) -> None:
        await self.router.close()
        if self._scratch is not None:
            self._scratch()
