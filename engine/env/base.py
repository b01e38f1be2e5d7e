"""EnvBase: an environment module whose ``@tool`` methods a router calls for agents."""

from __future__ import annotations

import inspect
import time
from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from engine.env.metrics import check_declared
from engine.env.tool import ToolInfo, build_tool_info
from engine.env.tool_calls import summarize_result
from engine.env.update_queue import Update, UpdateQueue
from engine.errors import ToolCallError
from engine.llm.meter import serving_agent
from engine.storage.atomic import atomic_write_json, read_json
from engine.storage.catalog import DatasetSchema
from engine.trace import current_span

__all__ = ["EXPERIMENTER_ID", "EnvBase"]

_STATE_FILE = "ENV_STATE.json"
#: The caller id of the experimenter (ask/intervene helper); routers fill ``agent_id`` from the caller,
#: so a tool that requires this id cannot be used by an agent's routed request.
EXPERIMENTER_ID = -1


class EnvBase:
    """Base class of environment modules.

    Subclasses expose behaviour with ``@tool`` methods, keep their dynamic state in plain
    attributes, and persist it with :meth:`dump_state` / :meth:`load_state` (JSON). They declare
    replay datasets with :meth:`replay_datasets` and produce rows with :meth:`replay_rows`, and
    their summary series with :attr:`METRICS` and :meth:`metrics` (the ``env_metrics`` dataset,
    :mod:`engine.env.metrics`).

    A mutating tool changes no state itself: it queues an update on :attr:`updates` and the module
    applies it in :meth:`apply_update`, which :meth:`step` (and :meth:`apply_pending`, after an
    intervention) calls for each update in (agent id, call order) order. The base class owns the
    rest of the exactly-once rule: it drops a re-run agent-step's updates (:meth:`discard_pending`)
    and writes the queue into snapshots. :func:`engine.env.testing.check_update_discipline` checks
    that a module keeps to it.

    Every tool call is recorded in the module's tool-call history, which holds the current env step
    only: the env actor drains it each step into the ``env_tool_calls`` dataset
    (:mod:`engine.env.tool_calls`).
    """

    _tools: ClassVar[dict[str, ToolInfo]] = {}
    #: The summary series the module reports after every env step: metric name -> what it measures
    #: (with its unit). Names that depend on the module's kwargs are added by :meth:`metric_descriptions`.
    METRICS: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_declared(cls.__name__, cls.METRICS)
        tools: dict[str, ToolInfo] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                if callable(member) and hasattr(member, "__polis_tool__"):
                    tools[name] = build_tool_info(cls.__name__, member)
        cls._tools = tools

    @classmethod
    def check_inputs(cls, kwargs: Mapping[str, Any]) -> None:
        """Read and check the input files ``kwargs`` name, under the input roots in force (``input_roots``), so a
        service can refuse a spec at submit rather than at run time; none by default.

        Raises:
            SpecError: a file cannot be used; ``path`` names its argument (``city_file``).
        """

    def __init__(self) -> None:
        self.t: datetime | None = None
        self._workspace_root: Path | None = None
        self._history: list[dict[str, Any]] = []
        #: per agent: its live records in the history, and the history's length when its calls were last undone (the
        #: records before that are dropped when the history is read: undoing a step is no pass over every call)
        self._recorded: dict[int | None, int] = {}
        self._undone: dict[int | None, int] = {}
        self._trace_id: str | None = None
        #: None until the router binds the run's agents (a set here; modules that order their agents keep a sorted list)
        self._agent_ids: Collection[int] | None = None
        #: updates the tools queued since the last step (or :meth:`apply_pending`)
        self.updates = UpdateQueue()

    @property
    def name(self) -> str:
        return type(self).__name__

    # ---- description -------------------------------------------------------------------------
    @classmethod
    def tools(cls) -> dict[str, ToolInfo]:
        """This module's tools by name."""
        return dict(cls._tools)

    @classmethod
    def description(cls) -> str:
        """A short description for routers and the world description."""
        return (inspect.getdoc(cls) or cls.__name__).split("\n\n")[0]

    @classmethod
    def init_description(cls) -> str:
        """Guidance on this module's constructor kwargs (Markdown)."""
        sig = inspect.signature(cls.__init__)
        params = [p for p in sig.parameters.values() if p.name != "self"]
        lines = [f"### {cls.__name__}", cls.description(), "", "kwargs:"]
        lines += [f"- `{p.name}`" + ("" if p.default is p.empty else f" (default `{p.default!r}`)") for p in params]
        return "\n".join(lines)

    @classmethod
    def skill_dirs(cls) -> list[Path]:
        """Directories of agent skills this module ships (``<module>_agent_skills/`` beside it)."""
        source = inspect.getsourcefile(cls)
        if source is None:
            return []
        path = Path(source)
        candidate = path.parent / "agent_skills" if path.name == "__init__.py" else path.with_name(f"{path.stem}_agent_skills")
        return [candidate] if candidate.is_dir() else []

    @classmethod
    def is_concurrency_safe(cls) -> bool:
        """True when every tool touches only the caller's own state (and static data), so calls may interleave.

        The router runs the tools of a module that is not concurrency-safe one at a time (a
        per-module lock around the call; an ``async`` tool that awaits holds it), and those of a
        safe module without a lock. Routing (LLM calls) never holds a lock. Default False.
        """
        return False

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        """The replay datasets this module writes every tick, without a ``run`` column: the env actor
        puts the run id first in each of them (:mod:`engine.env.module_datasets`)."""
        return []

    # ---- lifecycle ---------------------------------------------------------------------------
    async def init(self, start_datetime: datetime) -> None:
        self.t = start_datetime

    async def step(self, tick: int, t: datetime) -> None:
        """Advance one simulation step; ``t`` is the time at its end.

        The default moves the clock to ``t`` and applies the queued updates; a module that
        overrides it calls :meth:`apply_pending` (or ``super().step``) itself.
        """
        self.t = t
        self.apply_pending()

    def apply_pending(self) -> int:
        """Apply the updates queued since the last step now, at ``self.t``; returns how many.

        The env step calls it, and so does ``settle`` after an intervention, so that an
        intervention made between ticks reaches agents in the next tick.
        """
        drained = self.updates.drain()
        for update in drained:
            self.apply_update(update)
        return len(drained)

    def apply_update(self, update: Update) -> None:
        """Apply one queued update to the module's state (modules that queue updates override this).

        Raises:
            NotImplementedError: the module queued an update and does not apply it.
        """
        raise NotImplementedError(f"{self.name} queued an update but does not override apply_update")

    async def close(self) -> None:
        """Release resources (optional)."""

    def set_current_time(self, t: datetime) -> None:
        self.t = t

    def bind_agents(self, agent_ids: list[int]) -> None:
        """Tell the module which agent ids exist (tools check actors and targets against them).
        Modules that set agents up (accounts, homes, matches) extend this and call ``super()``."""
        self._agent_ids = set(agent_ids)

    def check_agent(self, agent_id: int) -> None:
        """Refuse an agent id the run does not have (every id passes before :meth:`bind_agents`).

        Raises:
            ValueError: no such agent (tools turn it into a readable tool error).
        """
        if self._agent_ids is not None and agent_id not in self._agent_ids:
            raise ValueError(f"there is no agent {agent_id}")

    def discard_pending(self, agent_id: int) -> int:
        """Drop the updates ``agent_id`` queued during this tick; returns how many.

        Called when an agent-step is re-run after its worker died mid-step, so the retried step does
        not queue its messages, trades or moves twice.
        """
        return self.updates.discard(agent_id)

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        """Rows for each declared dataset after env step ``step`` (at time ``t``); the actor adds ``run``."""
        return {}

    def metric_descriptions(self) -> dict[str, str]:
        """The metrics this module reports, name -> description: :attr:`METRICS`, which a module whose
        names depend on its kwargs (one price per good) extends."""
        return dict(self.METRICS)

    def metrics(self) -> dict[str, float]:
        """This env step's values of the declared metrics, read after :meth:`step` (with :meth:`replay_rows`).

        Per-step counts count this step only; a metric with no value this step (a mean over nothing)
        is left out. Keep it cheap (no I/O, no LLM, at most a pass over the agents). Default: none.
        """
        return {}

    # ---- persistence -------------------------------------------------------------------------
    def bind_workspace(self, root: Path) -> None:
        self._workspace_root = root

    def dump_state(self) -> dict[str, Any]:
        """The dynamic state as JSON-able data, queued updates aside (override with :meth:`load_state`)."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`dump_state` produced."""

    def dump_snapshot(self) -> dict[str, Any]:
        """Everything a snapshot keeps: the clock, :meth:`dump_state` and the queued updates."""
        return {"t": self.t, "state": self.dump_state(), "updates": self.updates.dump()}

    def load_snapshot(self, saved: dict[str, Any]) -> None:
        """Restore what :meth:`dump_snapshot` produced (after a JSON round trip)."""
        self.load_state(saved["state"])
        if "updates" in saved:  # snapshots written before the queue moved here carry none
            self.updates.load(saved["updates"])
        t = saved.get("t")
        self.t = (datetime.fromisoformat(t) if isinstance(t, str) else t) if t else self.t

    async def to_workspace(self, workspace_path: Path | None = None) -> None:
        root = workspace_path or self._workspace_root
        if root is None:
            return
        atomic_write_json(root / "state" / _STATE_FILE, self.dump_snapshot())

    async def restore(self, workspace_path: Path | None = None) -> bool:
        """Load the state written by :meth:`to_workspace`; False when there is none."""
        root = workspace_path or self._workspace_root
        if root is None:
            return False
        saved = read_json(root / "state" / _STATE_FILE, default=None)
        if saved is None:
            return False
        self.load_snapshot(saved)
        return True

    @classmethod
    async def from_workspace(cls, workspace_path: Path, **init_kwargs: Any) -> EnvBase:
        module = cls(**init_kwargs)
        module.bind_workspace(workspace_path)
        await module.restore(workspace_path)
        return module

    # ---- calling tools -----------------------------------------------------------------------
    def set_trace_context(self, trace_id: str | None) -> None:
        self._trace_id = trace_id

    async def call_tool(self, name: str, arguments: dict[str, Any], *, readonly: bool = False) -> Any:
        """Validate and run one tool, recording it in the tool-call history.

        Raises:
            ToolCallError: unknown tool, a mutating tool in a readonly call, or bad arguments.
        """
        info = self._tools.get(name)
        if info is None:
            raise ToolCallError(f"{self.name} has no tool {name!r}")
        if readonly and not info.readonly:
            raise ToolCallError(f"{self.name}.{name} changes state and this ask is readonly")
        try:
            args = info.args_model.model_validate(arguments)
        except ValidationError as error:
            raise ToolCallError(f"bad arguments for {self.name}.{name}: {error.errors()[0]['msg']} at {error.errors()[0]['loc']}") from None
        kwargs = {key: getattr(args, key) for key in type(args).model_fields}
        span = current_span()  # the request's env.ask span in the actor, when there is one
        agent_id = kwargs.get("agent_id")
        record: dict[str, Any] = {
            "function_name": name, "kwargs": kwargs, "timestamp": time.time(), "module": self.name,
            "agent_id": agent_id if isinstance(agent_id, int) else serving_agent.get(),
            "trace_id": self._trace_id or (span.trace_id if span else None), "span_id": span.span_id if span else None,
        }
        try:
            result = getattr(self, name)(**kwargs)
            if info.is_async:
                result = await result
        except (ValueError, KeyError, LookupError, TypeError) as error:
            record.update(exception_occurred=True, exception_info=repr(error))
            self._keep_call(record)
            raise ToolCallError(f"{self.name}.{name} failed: {error}") from error
        summary, chars = summarize_result(result)  # the row keeps no more: a million observes' feeds are not held a tick
        record.update(result=summary, result_chars=chars, exception_occurred=False)
        self._keep_call(record)
        return result

    def _keep_call(self, record: dict[str, Any]) -> None:
        self._history.append(record)
        self._recorded[record["agent_id"]] = self._recorded.get(record["agent_id"], 0) + 1

    def get_tool_call_history(self) -> list[dict[str, Any]]:
        """The tool calls since the last drain (the current env step), oldest first (a shallow copy).

        Each record has ``function_name``, ``kwargs``, ``timestamp``, ``module``, ``agent_id``,
        ``trace_id``, ``span_id``, ``exception_occurred``, and ``result`` (the return value's JSON text, cut as
        :func:`~engine.env.tool_calls.summarize_result` cuts it) with ``result_chars``, or ``exception_info``.
        """
        undone = self._undone
        if not undone:
            return list(self._history)
        return [r for i, r in enumerate(self._history) if i >= undone.get(r["agent_id"], 0)]

    def reset_tool_call_history(self) -> None:
        self._history, self._recorded, self._undone = [], {}, {}

    def drain_tool_calls(self) -> list[dict[str, Any]]:
        """Return the recorded tool calls and forget them (the env step writes them out)."""
        drained = self.get_tool_call_history()
        self.reset_tool_call_history()
        return drained

    def discard_tool_calls(self, agent_id: int) -> int:
        """Forget the calls recorded for ``agent_id`` since the last drain (its step is undone); returns how many."""
        self._undone[agent_id] = len(self._history)
        return self._recorded.pop(agent_id, 0)
