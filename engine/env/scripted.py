"""ScriptedEnv: an EnvHandle that answers from a script (a shipped fake for tests and notebooks)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.env.requests import EnvReply, EnvRequest
from engine.errors import ToolCallError

__all__ = ["ScriptedEnv"]


class ScriptedEnv:
    """Answer each ask with the next scripted reply; records every request it saw.

    Args:
        replies: the asks' replies in order; a plain text is a reply with status ``success``.
        observation: what :meth:`observe` returns for every agent.
        world: what :meth:`get_world_description` returns.
        tools: the tools :meth:`call_tool` may call, by name (each takes the arguments dict).
    """

    def __init__(
        self,
        replies: Iterable[EnvReply | str] = (),
        *,
        observation: str = "",
        world: str = "A scripted world.",
        tools: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
    ) -> None:
        self._replies = [r if isinstance(r, EnvReply) else EnvReply(r, "success") for r in replies]
        self._observation = observation
        self._world = world
        self._tools = dict(tools or {})
        self.requests: list[EnvRequest] = []  #: every request, in order (observe, call_tool and discard too)

    async def ask(self, request: EnvRequest) -> EnvReply:
        self.requests.append(request)
        if request.op != "ask":
            raise ValueError(f"ask() takes an ask request, not {request.op!r}")
        if not self._replies:
            raise AssertionError("ScriptedEnv ran out of replies")
        return self._replies.pop(0)

    async def observe(self, agent_id: int) -> str:
        self.requests.append(EnvRequest("observe", agent_id, readonly=True))
        return self._observation

    async def call_tool(self, name: str, arguments: dict[str, Any], *, readonly: bool = False) -> Any:
        """Run the scripted tool ``name``.

        Raises:
            ToolCallError: no tool of that name was scripted, or it raised one.
        """
        self.requests.append(EnvRequest("call_tool", int(arguments.get("agent_id", -1)), name, readonly, arguments=dict(arguments)))
        tool = self._tools.get(name)
        if tool is None:
            raise ToolCallError(f"unknown tool {name!r}")
        return tool(dict(arguments))

    async def discard_pending(self, agent_id: int) -> int:
        """Nothing is ever queued here, so nothing is dropped."""
        self.requests.append(EnvRequest("discard", agent_id))
        return 0

    def get_world_description(self) -> str:
        return self._world
