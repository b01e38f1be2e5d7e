"""PrisonersDilemmaAgent: plays a repeated prisoner's dilemma through the environment."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.contrib.game import GameAgent
from engine.agent.contrib.prompts import PRISONERS_DILEMMA
from engine.agent.tools import AgentTool

__all__ = ["PLAY", "PlayArgs", "PrisonersDilemmaAgent", "PrisonersDilemmaConfig"]


class PlayArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    move: Literal["cooperate", "defect"] = Field(description="your move this round")


class PrisonersDilemmaConfig(BaseModel):
    """``config["game"]`` of a prisoner's-dilemma player (payoffs only shape the prompt)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    opponent: int | None = None  #: the other player's agent id, if fixed
    temptation: float = 5  #: defect against a cooperator
    reward: float = 3  #: both cooperate
    punishment: float = 1  #: both defect
    sucker: float = 0  #: cooperate against a defector


PLAY = AgentTool("play", "Make your move this round: cooperate or defect", PlayArgs, readonly=False)


class PrisonersDilemmaAgent(GameAgent):
    """A prisoner's-dilemma player deciding each round with the LLM."""

    game = "prisoner's dilemma"
    game_config_model = PrisonersDilemmaConfig
    game_config: PrisonersDilemmaConfig
    react_prompt = PRISONERS_DILEMMA

    def move_tool(self) -> AgentTool:
        return PLAY

    def _against(self) -> str:
        opponent = self.game_config.opponent
        return f"agent {opponent}" if opponent is not None else "the other player"

    def move_instruction(self, args: dict[str, Any], round_: int) -> str:
        suffix = f" against agent {self.game_config.opponent}" if self.game_config.opponent is not None else ""
        return f"play {args['move']} in round {round_} of the prisoner's dilemma{suffix}"

    def describe_move(self, args: dict[str, Any]) -> str:
        return str(args["move"])

    def rules(self) -> dict[str, Any]:
        c = self.game_config
        return {"opponent": self._against(), "temptation": c.temptation, "reward": c.reward,
                "punishment": c.punishment, "sucker": c.sucker}
