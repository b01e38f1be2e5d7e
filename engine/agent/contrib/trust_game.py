"""TrustGameAgent: an investor or trustee in a repeated trust game, acting through the environment."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.contrib.game import GameAgent, amount_args
from engine.agent.contrib.prompts import TRUST_GAME
from engine.agent.tools import AgentTool

__all__ = ["TrustGameAgent", "TrustGameConfig"]


class TrustGameConfig(BaseModel):
    """``config["game"]`` of a trust-game player."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["investor", "trustee"] = "investor"
    partner: int | None = None  #: the other player's agent id, if fixed
    endowment: int = Field(default=10, ge=1)  #: the investor's tokens each round
    multiplier: float = Field(default=3.0, gt=0)  #: what is sent is multiplied by this


class TrustGameAgent(GameAgent):
    """A trust-game player: the investor sends tokens, the trustee returns part of what it received."""

    game = "trust game"
    game_config_model = TrustGameConfig
    game_config: TrustGameConfig
    react_prompt = TRUST_GAME

    def move_tool(self) -> AgentTool:
        c = self.game_config
        if c.role == "investor":
            return AgentTool("invest", f"Send 0 to {c.endowment} tokens to the trustee this round",
                             amount_args(f"InvestArgs_{c.endowment}", c.endowment), readonly=False)
        return AgentTool("return_tokens", "Return tokens to the investor this round (at most what you received)",
                         amount_args("ReturnArgs", None), readonly=False)

    def _partner(self) -> str:
        partner = self.game_config.partner
        if partner is not None:
            return f"agent {partner}"
        return "the trustee" if self.game_config.role == "investor" else "the investor"

    def move_instruction(self, args: dict[str, Any], round_: int) -> str:
        verb = "send" if self.game_config.role == "investor" else "return"
        return f"{verb} {args['amount']} tokens to {self._partner()} in round {round_} of the trust game"

    def describe_move(self, args: dict[str, Any]) -> str:
        return f"{'send' if self.game_config.role == 'investor' else 'return'} {args['amount']}"

    def rules(self) -> dict[str, Any]:
        c = self.game_config
        return {"endowment": c.endowment, "multiplier": c.multiplier, "role": c.role, "partner": self._partner()}
