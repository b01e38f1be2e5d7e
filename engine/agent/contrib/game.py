"""GameAgent: the shared shape of the game-theory agents (one move tool, rules in the prompt, a move history).

A subclass names its game, its system template, its config model and its move tool, and turns a
move into a plain-language instruction for the environment ("play cooperate in round 3"). The
decision itself is the base ReAct loop's; the move tool goes to the environment through
:meth:`AgentBase.ask_env`, so the agents work against any environment whose router understands
the instruction.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.agent.base import AgentBase
from engine.agent.config import AgentConfig
from engine.agent.contrib.prompts import GAME_ASK, GAME_ROUND
from engine.agent.outcome import StepOutcome
from engine.agent.service_proxy import ServiceProxy
from engine.agent.tools import AgentTool
from engine.agent.workspace import AgentWorkspace
from engine.llm.prompt import PromptTemplate

__all__ = ["GameAgent", "amount_args"]

_HISTORY = 20  #: moves kept in AGENT.json and shown in the prompt


@lru_cache(maxsize=64)
def amount_args(name: str, upper: int | None) -> type[BaseModel]:
    """An arguments model ``{amount: int}`` in ``0..upper`` (cached: the decision schema is cached per class)."""
    return create_model(
        name,
        __config__=ConfigDict(extra="forbid"),
        amount=(int, Field(ge=0, le=upper, description="whole tokens" + (f", 0 to {upper}" if upper is not None else ""))),
    )


class GameAgent(AgentBase):
    """Base of the game agents. Subclasses set the class attributes and implement the move hooks."""

    #: the game's name in prompts ("prisoner's dilemma")
    game: ClassVar[str] = "game"
    #: the model of ``config["game"]``
    game_config_model: ClassVar[type[BaseModel]]
    #: ``config["game"]`` validated by ``game_config_model`` (subclasses narrow the annotation)
    game_config: BaseModel
    react_prompt: PromptTemplate

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "game_config_model" in cls.__dict__:  # the Config of this game: the base's keys and ``game``
            cls.Config = create_model(f"{cls.__name__}Config", __base__=AgentConfig, __doc__=f"The config of a {cls.game} player.",
                                      game=(cls.game_config_model, Field(default_factory=cls.game_config_model,
                                                                         description=f"the {cls.game}'s settings")))

    async def restore(self, workspace: AgentWorkspace | Path, service_proxy: ServiceProxy, **kwargs: Any) -> None:
        """Restore the base (which reads ``config["game"]`` too, by the class's Config)."""
        await super().restore(workspace, service_proxy, **kwargs)
        self.game_config = self.settings.game  # type: ignore[attr-defined]  # a field of the Config made above
        self._moved_in_round: int | None = None
        self._moves_sent = 0  #: moves that reached the environment in this step

    # ---- what a game defines -----------------------------------------------------------------
    def move_tool(self) -> AgentTool:
        """The tool that makes this player's move."""
        raise NotImplementedError

    def move_instruction(self, args: dict[str, Any], round_: int) -> str:
        """The instruction sent to the environment for a move."""
        raise NotImplementedError

    def describe_move(self, args: dict[str, Any]) -> str:
        """A short label of a move for the history ("cooperate", "contribute 4")."""
        raise NotImplementedError

    def rules(self) -> dict[str, Any]:
        """Values of the game's system template beyond the shared ones."""
        return {}

    # ---- shared --------------------------------------------------------------------------------
    @property
    def round(self) -> int:
        """The round being played: one per society step."""
        return self._step_count + 1

    def _history_text(self) -> str:
        moves = self.state.get("moves", [])
        return "\n".join(
            f"- round {m['round']}: {m['move']}" + ("" if m.get("accepted") else " (not accepted)") + f" -> {m['env']}"
            for m in moves
        ) or "- (none yet)"

    def react_tools(self, *, readonly: bool = False) -> dict[str, AgentTool]:
        tools = super().react_tools(readonly=readonly)
        if readonly:
            return tools
        move = self.move_tool()
        return self._offer({move.name: move, **tools}, readonly=readonly)

    async def dispatch_react_tool(self, action: str, args: dict[str, Any], *, readonly: bool = False) -> str:
        move = self.move_tool()
        if action != move.name:
            return await super().dispatch_react_tool(action, args, readonly=readonly)
        if readonly:
            return "error: a move cannot be made while answering a question"
        if self._moved_in_round == self.round:
            return f"error: you already moved in round {self.round}; finish the step"
        result = await self.ask_env(self.move_instruction(args, self.round), readonly=False)
        self._moves_sent += 1
        accepted = result.startswith(("[success]", "[in_progress]"))
        entry = {"round": self.round, "move": self.describe_move(args), "accepted": accepted, "env": result[:300]}
        self.state["moves"] = [*self.state.get("moves", []), entry][-_HISTORY:]
        if accepted:
            self._moved_in_round = self.round
        return result

    def build_react_messages(
        self, *, tick: int, t: datetime, observations: list[str], question: str | None = None, readonly: bool = False
    ) -> list[dict[str, Any]]:
        tools = self.react_tools(readonly=readonly)
        move = self.move_tool().name
        system = self.react_prompt.render(
            name=self.name,
            game=self.game,
            profile="\n".join(f"- {k}: {v}" for k, v in self.profile.items()) or "- (no profile)",
            time=t.isoformat(),
            round=self.round,
            history=self._history_text(),
            tools="\n".join(f"- {name}: {tool.description}" for name, tool in tools.items()),
            move_tool=move,
            **self.rules(),
        )
        if question is not None:
            user = GAME_ASK.render(question=question)
        else:
            user = GAME_ROUND.render(round=self.round, observations="\n".join(observations) or "(nothing new)", move_tool=move)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def step(self, tick: int, t: datetime) -> StepOutcome:
        self._current_time = t
        self._moves_sent = 0
        observation = await self._env.observe(self.id)
        outcome = await self.run_react_loop(tick=tick, t=t, observations=[observation])
        outcome.env_calls += 1 + self._moves_sent  # the observation and each move sent reached the environment too
        self._step_count += 1
        return outcome

    async def ask(self, message: str, readonly: bool = True, *, t: datetime | None = None) -> str:
        t = t or self._current_time or datetime.now()
        outcome = await self.run_react_loop(tick=0, t=t, question=message, readonly=readonly)
        if outcome.status != "finished":
            return f"[{outcome.status}] {outcome.error or 'no answer within the turn limit'}"
        return outcome.summary or ""
