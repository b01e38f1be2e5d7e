"""What one agent-step (or ask) produced: the source of an ``actions`` replay row."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StepOutcome"]


@dataclass
class StepOutcome:
    """The result of a ReAct loop run."""

    status: str  #: finished | turn_limit | llm_error | error
    summary: str | None = None
    tools_called: list[str] = field(default_factory=list)
    env_calls: int = 0
    turns: int = 0
    error: str | None = None
