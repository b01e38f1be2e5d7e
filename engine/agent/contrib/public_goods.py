"""PublicGoodsAgent: contributes to a common pool each round through the environment."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.contrib.game import GameAgent, amount_args
from engine.agent.contrib.prompts import PUBLIC_GOODS
from engine.agent.tools import AgentTool

__all__ = ["PublicGoodsAgent", "PublicGoodsConfig"]


class PublicGoodsConfig(BaseModel):
    """``config["game"]`` of a public-goods player."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    endowment: int = Field(default=10, ge=1)  #: tokens received each round
    multiplier: float = Field(default=1.6, gt=0)  #: pool multiplier
    group_size: int = Field(default=4, ge=2)  #: players sharing the pool


class PublicGoodsAgent(GameAgent):
    """A public-goods player choosing its contribution each round with the LLM."""

    game = "public goods game"
    game_config_model = PublicGoodsConfig
    game_config: PublicGoodsConfig
    react_prompt = PUBLIC_GOODS

    def move_tool(self) -> AgentTool:
        endowment = self.game_config.endowment
        return AgentTool(
            "contribute", f"Contribute 0 to {endowment} tokens to the common pool this round",
            amount_args(f"ContributeArgs_{endowment}", endowment), readonly=False,
        )

    def move_instruction(self, args: dict[str, Any], round_: int) -> str:
        return (f"contribute {args['amount']} of my {self.game_config.endowment} tokens to the public pool "
                f"in round {round_} of the public goods game")

    def describe_move(self, args: dict[str, Any]) -> str:
        return f"contribute {args['amount']}"

    def rules(self) -> dict[str, Any]:
        c = self.game_config
        return {"endowment": c.endowment, "multiplier": c.multiplier, "group_size": c.group_size}
