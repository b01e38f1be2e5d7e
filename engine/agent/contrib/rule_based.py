"""RuleBasedAgent: a baseline that needs no LLM. A fixed rule over its inbox picks cooperate or defect.

The agent reads its observation (``env.observe``), finds the moves other agents announced in it
(the words ``cooperate…`` / ``defect…`` in lines ``from agent N``), applies its rule and acts:
through a direct tool call when the environment is an in-process router and ``config.rule.tool``
names a tool, else through ``env.ask`` with a plain instruction. Either way the agent itself makes
no LLM call, and the same inbox always gives the same move.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.agent.base import AgentBase
from engine.agent.config import AgentConfig
from engine.agent.outcome import StepOutcome
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import AgentWorkspace
from engine.errors import ToolCallError
from engine.format_template import check_format_arguments, check_format_template
from engine.instruction_template import is_bare_template

__all__ = ["Move", "RuleBasedAgent", "RuleConfig", "announced_moves", "decide"]

Move = Literal["cooperate", "defect"]

_SENDER = re.compile(r"\bfrom agent (\d+)\b")
_MOVE = re.compile(r"\b(cooperat|defect)\w*", re.IGNORECASE)
_HISTORY = 50
_LABELS: dict[Move, str] = {"cooperate": "cooperate", "defect": "defect"}
_TEMPLATE_NAMES = ("move", "round", "label")


class RuleConfig(BaseModel):
    """``config["rule"]`` of a :class:`RuleBasedAgent`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rule: Literal["tit_for_tat", "grim_trigger", "threshold", "always_cooperate", "always_defect"] = "tit_for_tat"
    opponent: int | None = None  #: only this agent's announcements count (None: every sender)
    threshold: float = Field(default=0.5, ge=0, le=1)  #: ``threshold``: cooperate when this share cooperated
    first_move: Move = "cooperate"  #: when nothing has been announced yet
    labels: dict[Move, str] = Field(default_factory=lambda: dict(_LABELS))  #: text per move ({label})
    instruction: str = "play {move} in round {round}"  #: sent with ``env.ask`` ({move}, {round}, {label})
    tool: str | None = None  #: a router tool to call directly instead (in-process routers)
    arguments: dict[str, Any] = Field(default_factory=dict)  #: its arguments; string values are formatted like ``instruction``

    @field_validator("instruction")
    @classmethod
    def _instruction_bounded(cls, value: str) -> str:
        check_format_template(value, _TEMPLATE_NAMES)
        return value

    @field_validator("arguments")
    @classmethod
    def _arguments_bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_format_arguments(value, _TEMPLATE_NAMES)
        return value


def announced_moves(observation: str, opponent: int | None = None) -> list[Move]:
    """The moves announced in ``observation``, oldest first (the last move word of each line counts)."""
    moves: list[Move] = []
    for line in observation.splitlines():
        sender = _SENDER.search(line)
        if opponent is not None and (sender is None or int(sender.group(1)) != opponent):
            continue
        found = _MOVE.findall(line)
        if found:
            moves.append("cooperate" if found[-1].lower() == "cooperat" else "defect")
    return moves


def decide(config: RuleConfig, seen: list[Move], *, triggered: bool = False) -> tuple[Move, str]:
    """The move ``config.rule`` makes after ``seen``; returns it with a one-line reason.

    Args:
        config: the rule and its parameters.
        seen: announced moves, oldest first.
        triggered: a grim trigger already pulled in an earlier round.
    """
    if config.rule == "always_cooperate":
        return "cooperate", "always cooperates"
    if config.rule == "always_defect":
        return "defect", "always defects"
    if config.rule == "grim_trigger":
        if triggered or "defect" in seen:
            return "defect", "a defection was seen, so it defects for good"
        return "cooperate", "no defection seen yet"
    if not seen:
        return config.first_move, "nothing announced yet, so it opens"
    if config.rule == "tit_for_tat":
        return seen[-1], f"copies the last announced move ({seen[-1]})"
    share = seen.count("cooperate") / len(seen)
    move: Move = "cooperate" if share >= config.threshold else "defect"
    return move, f"{share:.0%} of announced moves cooperated (threshold {config.threshold:.0%})"


class RuleBasedAgent(AgentBase):
    """A deterministic, LLM-free player (tit-for-tat, grim trigger, threshold, always-C/D), for baselines."""

    class Config(AgentConfig):
        """The config of a rule-based player: the base's keys and ``rule``."""

        rule: RuleConfig = Field(default_factory=RuleConfig, description="the rule it plays and how it announces moves")

    async def restore(self, workspace: AgentWorkspace | Path, service_proxy: ServiceProxy, **kwargs: Any) -> None:
        """Restore the base (which reads ``config["rule"]`` too, by :class:`Config`)."""
        await super().restore(workspace, service_proxy, **kwargs)
        self.rule: RuleConfig = self.settings.rule  # type: ignore[attr-defined]  # settings is a Config here

    def build_react_messages(
        self, *, tick: int, t: datetime, observations: list[str], question: str | None = None, readonly: bool = False
    ) -> list[dict[str, Any]]:
        """Unused (this agent never runs the ReAct loop); describes the rule for completeness."""
        return [{"role": "system", "content": f"Rule-based agent {self.id} following {self.rule.rule}."}]

    async def _act(self, move: Move, round_: int) -> tuple[str, str, bool]:
        """Send the move; returns (tool used, environment answer, accepted)."""
        values = {"move": move, "round": round_, "label": self.rule.labels.get(move, move)}
        if self.rule.tool is not None:
            arguments = {k: v.format(**values) if isinstance(v, str) else v for k, v in self.rule.arguments.items()}
            try:
                scope = self._trace.span("env.call_tool", agent_id=self.id, tool=self.rule.tool) if self._trace else nullcontext()
                with scope:
                    answer = await self._env.call_tool(self.rule.tool, {"agent_id": self.id, **arguments}, readonly=False)
            except ToolCallError as error:
                return self.rule.tool, f"[error] {error}", False
            return self.rule.tool, f"[success] {answer}", True
        if is_bare_template(self.rule.instruction):
            # The configured instruction is already a template: its values travel as variables.
            answer = await self.ask_env(self.rule.instruction, readonly=False, variables=values)
        else:
            answer = await self.ask_env(self.rule.instruction.format(**values), readonly=False)
        return "ask_env", answer, answer.startswith(("[success]", "[in_progress]"))

    async def step(self, tick: int, t: datetime) -> StepOutcome:
        self._current_time = t
        round_ = self._step_count + 1
        observation = await self._env.observe(self.id)
        seen = announced_moves(observation, self.rule.opponent)
        move, reason = decide(self.rule, seen, triggered=bool(self.state.get("triggered")))
        tool, answer, accepted = await self._act(move, round_)
        if self.rule.rule == "grim_trigger" and move == "defect":
            self.state["triggered"] = True
        entry = {"round": round_, "move": move, "accepted": accepted, "env": answer[:300]}
        self.state["moves"] = [*self.state.get("moves", []), entry][-_HISTORY:]
        self._tool_log.append({"t": t.isoformat(), "tool": tool, "arguments": {"move": move}, "result": answer, "ms": 0.0})
        self._step_count += 1
        summary = f"played {move} in round {round_}: {self.rule.rule} {reason}"
        if not accepted:
            return StepOutcome(status="error", summary=None, tools_called=[tool], env_calls=2, error=f"{summary}; refused: {answer}")
        return StepOutcome(status="finished", summary=summary, tools_called=[tool], env_calls=2)

    async def ask(self, message: str, readonly: bool = True, *, t: datetime | None = None) -> str:
        """Describe the rule and the last move (no reasoning, no LLM)."""
        moves = self.state.get("moves", [])
        last = f"; my last move was {moves[-1]['move']} in round {moves[-1]['round']}" if moves else ""
        return f"I am a rule-based agent following {self.rule.rule}{last}."
