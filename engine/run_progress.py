"""A run's progress as the runner reports it, and the one line of text that shows it.

:class:`RunProgress` is what ``run_experiment`` hands its ``on_progress`` callback: at every phase of
the run (:class:`RunPhase`: the model loading, workspaces created, a tick starting, answers coming in),
on every batch and tick, and as batches' LLM calls happen. It is also the payload of the service's
``tick`` Server-Sent Events (:meth:`RunProgress.to_json` there, :meth:`RunProgress.from_json` in a
client), so ``polis run``'s progress line and a REST client's are drawn by the same
:func:`render_progress` from the same fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.run_status import RunStatus

__all__ = ["Phase", "RunPhase", "RunProgress", "describe_phase", "render_progress"]

_BAR_WIDTH = 30


class RunPhase(StrEnum):
    """What a run is doing now (a progress report's ``phase``), in the words the progress line shows."""

    STARTING_CLUSTER = "starting cluster"  #: a LocalCluster starts (or the client connects to the scheduler)
    LOADING_MODEL = "loading model"  #: a ``local/*`` model's server loads it (``phase_seconds``: so far)
    MODEL_READY = "model ready"  #: it answers (``phase_seconds``: how long loading took)
    CHECKING_WORKERS = "checking workers"  #: the preflight probes every worker
    CHECKING_LLMS = "checking LLMs"  #: the preflight's test call to each distinct model
    #: the spec's network layers are read or generated, and ``network_edges`` written (a task on a worker)
    BUILDING_NETWORK = "building network"
    CREATING_WORKSPACES = "creating workspaces"  #: ``phase_done`` of ``phase_total`` agents' workspaces written
    STARTING_ENV = "starting environment"  #: the env router actor starts from its last snapshot
    TICK = "tick"  #: a tick runs its agents (the next after ``ticks_done``)
    QUESTIONNAIRE = "questionnaire"  #: ``phase_done`` of ``phase_total`` answers (agents x questions) are in
    INTERVIEW = "interview"  #: ``phase_done`` of ``phase_total`` interviewed agents answered (an ask or intervene step)
    ASK = "ask"  #: the helper answers an ``ask`` step
    INTERVENE = "intervene"  #: the helper carries out an ``intervene`` step
    COMMITTING = "committing"  #: the env step and the commit that end a transaction
    FINISHING = "finishing"  #: the run's tally is read and its outcome judged


#: what a phase's ``phase_done`` / ``phase_total`` count, where it is not the phase's own noun
_UNITS: dict[str, str] = {RunPhase.QUESTIONNAIRE: "answers", RunPhase.INTERVIEW: "answers"}


@dataclass(frozen=True)
class Phase:
    """One phase as the engine reports it; :class:`RunProgress` carries its fields flat (``phase``, ``phase_done`` ...)."""

    name: str  #: a :class:`RunPhase` value
    done: int | None = None  #: items of the phase done so far
    total: int | None = None  #: items the phase has
    seconds: float | None = None  #: how long the phase has taken


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
    #: what the run is doing now (a :class:`RunPhase` value; a newer engine's unknown value is kept as it
    #: came); None: not said (a report from before phases, or a sweep's sum)
    phase: str | None = None
    phase_done: int | None = None  #: items of the phase done (workspaces created, answers in); None: it counts none
    phase_total: int | None = None  #: items the phase has
    phase_seconds: float | None = None  #: how long the phase has taken (the model loading)
    #: the last committed tick's token telemetry, by tier (``llm``, ``archetype``, ``router``, ``total`` ...): its
    #: ``token_telemetry`` rows without run and tier (calls, prompt and completion tokens with p50/p95/max,
    #: prefix_share ...); None: no tick committed yet in this driver
    tokens: dict[str, dict[str, Any]] | None = None

    def with_phase(self, phase: Phase | None) -> RunProgress:
        """This report in ``phase`` (None: no phase)."""
        if phase is None:
            return dataclasses.replace(self, phase=None, phase_done=None, phase_total=None, phase_seconds=None)
        return dataclasses.replace(self, phase=str(phase.name), phase_done=phase.done, phase_total=phase.total,
                                   phase_seconds=phase.seconds)

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON-ready values (the status as its string)."""
        fields = dataclasses.asdict(self)
        fields["status"] = str(self.status)
        if self.phase is not None:
            fields["phase"] = str(self.phase)
        return fields

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunProgress:
        """Rebuild a report from :meth:`to_json`'s output (unknown keys are ignored, missing counters are 0,
        a missing phase is None: an older service's JSON parses).

        Raises:
            ValueError: the status is not a :class:`RunStatus` value.
            KeyError: a required field (status, ticks and agent-steps done and total) is missing.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["status"] = RunStatus(values["status"])
        return cls(**values)


def describe_phase(progress: RunProgress) -> str | None:
    """The phase of ``progress`` in words (``creating workspaces 1,200/5,000``, ``loading model 12 s``); None: no phase."""
    if progress.phase is None:
        return None
    text = "agents stepping" if progress.phase == RunPhase.TICK else progress.phase  # the line shows which tick
    if progress.phase_total is not None:
        text += f" {progress.phase_done or 0:,}/{progress.phase_total:,}"
    elif progress.phase_done is not None:
        text += f" {progress.phase_done:,}"
    if progress.phase_done is not None and (unit := _UNITS.get(progress.phase)) is not None:
        text += f" {unit}"
    if progress.phase_seconds is not None:
        text += f" in {progress.phase_seconds:.1f} s" if progress.phase == RunPhase.MODEL_READY else f" {progress.phase_seconds:.0f} s"
    return text


def render_progress(progress: RunProgress, width: int = _BAR_WIDTH) -> str:
    """One line that shows ``progress``: a bar of agent-steps, ticks, LLM usage, errors and the phase.

    The phase (:func:`describe_phase`) stands in brackets before the status, which stays the last word.

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
    if (phase := describe_phase(progress)) is not None:
        line += f" ({phase})"
    return f"{line} {progress.status:<10}"
