"""GlobalInformationEnv: GlobalInformationSpace with the reference system's ``get`` and a setter.

The reference's ``GlobalInformationEnv`` holds one piece of global information that agents read
(``get``, its observation) and change (``set``). Here the current global information is the newest
public fact of GlobalInformationSpace, so setting it publishes a fact and the news history keeps
the earlier ones. The setter is ``set_info``, not ``set``: the code-generating router binds tools
as names in the code it runs, where ``set`` is the builtin that code uses to build sets.

Like a broadcast, a new value is queued and applied at the tick's env step, in (agent id, call
order) order, so when several agents set it in one tick the last applied is current. The
experimenter (an intervention) may set it too; its facts name the experimenter as their source.
"""

from __future__ import annotations

from typing import Any

from engine.env.base import EXPERIMENTER_ID
from engine.env.modules.global_info import GlobalInformationSpace
from engine.env.tool import tool
from engine.env.update_queue import Update

__all__ = ["GlobalInformationEnv"]


class GlobalInformationEnv(GlobalInformationSpace):
    """Global information everyone reads: the current information, which agents and the experimenter can replace, and the news before it.

    ``get`` shows the current global information; ``set_info`` replaces it from the end of this
    step (earlier information stays readable as news).

    Args:
        global_information: the information at the start (the newest of the initial facts).
        facts: earlier initial facts, as GlobalInformationSpace takes them.
        news_limit: how many facts ``latest_news`` shows.
        max_length: longest information accepted, in characters.
        default_source: the source of initial facts that name none.
    """

    def __init__(
        self,
        global_information: str | None = None,
        facts: list[str | dict[str, Any]] | None = None,
        news_limit: int = 5,
        max_length: int = 500,
        default_source: str = "world",
    ) -> None:
        initial = [*(facts or []), *([global_information] if global_information is not None else [])]
        super().__init__(facts=initial, news_limit=news_limit, max_length=max_length, default_source=default_source)

    @tool(readonly=True, kind="observe")
    def get(self, agent_id: int) -> str:
        """Show the current global information, with its time and source."""
        facts = self._visible()
        if not facts:
            return "There is no global information yet."
        return "Current global information:\n" + self._render(facts[0])

    @tool(readonly=False)
    def set_info(self, agent_id: int, text: str) -> str:
        """Replace the global information with text; everyone reads it from the next step."""
        if agent_id != EXPERIMENTER_ID:
            self.check_agent(agent_id)
        text = text.strip()
        if not text:
            raise ValueError("the global information cannot be empty")
        if len(text) > self._max_length:
            raise ValueError(f"information longer than {self._max_length} characters")
        self.updates.queue(agent_id, text=text)
        return "global information queued; everyone reads it from the next step"

    def apply_update(self, update: Update) -> None:
        """Publish the information as GlobalInformationSpace publishes a broadcast, naming the experimenter as such."""
        super().apply_update(update)
        if update.agent_id == EXPERIMENTER_ID:
            self._facts[-1]["source"] = "the experimenter"
