"""ServiceProxy: the one serializable container of shared service handles an agent receives."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.env.handle import EnvHandle
from engine.llm.client import LLMClient
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import RunLocation
from engine.trace import TraceHandle

__all__ = ["ServiceProxy"]


@dataclass(frozen=True)
class ServiceProxy:
    """Handles and settings only: no locks, connections or threads.

    ``env`` is an :class:`~engine.env.handle.EnvHandle`: an EnvRouterProxy (router in a Dask
    actor), an in-process RouterBase, or a ScriptedEnv (tests). LLM clients carry connection
    settings and each worker builds its own backend. ``trace`` and ``replay`` say where spans and
    replay shards go (the run's ``trace/`` and ``replay/`` unless given): the trace handle pickles
    without its spans, so each task records its own (:meth:`for_task`), and the replay writer names the
    run, staged per transaction by :meth:`ReplayWriter.in_txn`. Agents bind ``env``, the
    default LLM client and ``trace`` in ``AgentBase._bind_services``.
    """

    env: EnvHandle
    llm: dict[str, LLMClient] = field(default_factory=lambda: {"default": LLMClient()})
    run_dir: RunLocation | None = None
    run_id: str = "run"
    trace: TraceHandle | None = None  #: where this task's spans go; None: spans are not recorded
    replay: ReplayWriter | None = None  #: writes the run's replay shards

    def __post_init__(self) -> None:
        if self.run_dir is not None:
            if self.trace is None:
                object.__setattr__(self, "trace", TraceHandle(self.run_dir))
            if self.replay is None:
                object.__setattr__(self, "replay", ReplayWriter(self.run_dir))

    def client(self, role: str = "default") -> LLMClient:
        """The client for ``role``, falling back to ``default``."""
        return self.llm.get(role) or self.llm["default"]

    def for_task(self) -> ServiceProxy:
        """This proxy with a trace recorder of its own, for one task whose spans it writes as one shard."""
        return replace(self, trace=self.trace.for_task()) if self.trace is not None else self
