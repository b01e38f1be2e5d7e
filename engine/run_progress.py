"""A run's progress as the runner reports it, and the one line of text that shows it.

:class:`RunProgress` is what ``run_experiment`` hands its ``on_progress`` callback on every batch and
tick. It is also the payload of the service's ``tick`` Server-Sent Events (:meth:`RunProgress.to_json`
there, :meth:`RunProgress.from_json` in a client), so ``polis run``'s progress line and a REST
client's are drawn by the same :func:`render_progress` from the same fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.run_status import RunStatus

__all__ = ["RunProgress", "render_progress"]

_BAR_WIDTH = 30


@dataclass(frozen=True)
class RunProgress:
    """How far a run has got, counted over the whole run (a resumed run includes its earlier parts)."""

    status: RunStatus
    ticks_done: int
    ticks_total: int
    agent_steps_done: int
    agent_steps_total: int
    error: str | None = None
    llm_calls: int = 0  #: LLM calls of the agents so far (cache hits included; the final tally also counts the router's)
    input_tokens: int = 0  #: their prompt tokens
    output_tokens: int = 0  #: their completion tokens
    cost_usd: float = 0.0  #: what the provider charged so far (cache hits are free)
    errors: int = 0  #: agent-steps so far that ended in ``error`` or ``llm_error``

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON-ready values (the status as its string)."""
        fields = dataclasses.asdict(self)
        fields["status"] = str(self.status)
        return fields

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunProgress:
        """Rebuild a report from :meth:`to_json`'s output (unknown keys are ignored, missing counters are 0).

        Raises:
            ValueError: the status is not a :class:`RunStatus` value.
            KeyError: a required field (status, ticks and agent-steps done and total) is missing.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["status"] = RunStatus(values["status"])
        return cls(**values)


def render_progress(progress: RunProgress, width: int = _BAR_WIDTH) -> str:
    """One line that shows ``progress``: a bar of agent-steps, ticks, LLM usage and errors.

    Args:
        progress: the latest report.
        width: the bar's width in characters.

    Returns:
        The line, without a line ending (``polis run`` redraws it with ``\\r``).
    """
    total = max(progress.agent_steps_total, 1)
    filled = min(width, int(width * progress.agent_steps_done / total))
    line = (
        f"[{'#' * filled}{'.' * (width - filled)}] tick {progress.ticks_done}/{progress.ticks_total} "
        f"agent-steps {progress.agent_steps_done}/{progress.agent_steps_total} "
        f"llm {progress.llm_calls} calls {progress.input_tokens + progress.output_tokens} tok"
    )
    if progress.cost_usd:
        line += f" ${progress.cost_usd:.4f}"
    if progress.errors:
        line += f" errors {progress.errors}"
    return f"{line} {progress.status:<10}"
