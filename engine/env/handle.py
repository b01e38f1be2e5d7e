"""EnvHandle: what an agent holds to reach the environment (``ServiceProxy.env``).

Three implementations ship: :class:`~engine.env.router_base.RouterBase` (the router in this
process), :class:`~engine.env.proxy.EnvRouterProxy` (the router in a Dask actor) and
:class:`~engine.env.scripted.ScriptedEnv` (a fake that answers from a script).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from engine.env.requests import EnvReply, EnvRequest

__all__ = ["EnvHandle"]


@runtime_checkable
class EnvHandle(Protocol):
    """The environment as agents, batches and the helper see it."""

    async def ask(self, request: EnvRequest) -> EnvReply:
        """Route one natural-language instruction (``request.op == "ask"``) onto the environment's tools.

        A failure to route is an answer (status ``fail`` or ``error``), not an exception.

        Raises:
            EnvUnavailableError: the environment cannot be reached (its actor was lost).
        """
        ...

    async def observe(self, agent_id: int) -> str:
        """What ``agent_id`` observes now (no LLM involved)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any], *, readonly: bool = False) -> Any:
        """Call one tool directly, without routing.

        Raises:
            ToolCallError: unknown name, readonly violation, bad arguments or a failing tool.
        """
        ...

    async def discard_pending(self, agent_id: int) -> int:
        """Drop what ``agent_id`` queued this tick (its step is being re-run); returns how many."""
        ...

    def get_world_description(self) -> str:
        """A short description of the world for agents' prompts."""
        ...
