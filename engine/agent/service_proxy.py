"""ServiceProxy: the one serializable container of shared service handles an agent receives."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.env.handle import EnvHandle
from engine.llm.client import LLMClient
from engine.storage.run_layout import RunLayout

__all__ = ["ServiceProxy"]


@dataclass(frozen=True)
class ServiceProxy:
    """Handles and settings only: no locks, connections or threads.

    ``env`` is an :class:`~engine.env.handle.EnvHandle`: an EnvRouterProxy (router in a Dask
    actor), an in-process RouterBase, or a ScriptedEnv (tests). LLM clients carry connection
    settings and each worker builds its own backend; ``run_dir`` is where the writers put replay
    shards (``replay/``) and trace shards (``trace/``).
    """

    env: EnvHandle
    llm: dict[str, LLMClient] = field(default_factory=lambda: {"default": LLMClient()})
    run_dir: Path | None = None
    run_id: str = "run"

    def client(self, role: str = "default") -> LLMClient:
        """The client for ``role``, falling back to ``default``."""
        return self.llm.get(role) or self.llm["default"]

    @property
    def replay_dir(self) -> Path | None:
        return RunLayout(self.run_dir).replay if self.run_dir else None

    @property
    def trace_dir(self) -> Path | None:
        return RunLayout(self.run_dir).trace if self.run_dir else None
