"""What a fork runs: the parent's spec with a patch, checked against the past it shares with the parent (sans-IO).

A fork at tick ``K`` starts from the state the parent committed with tick ``K`` (before any later
transaction). Its spec is the parent's with a JSON merge patch (RFC 7386: mappings merge, lists and
values replace, ``null`` removes) applied. What it may change is the future: steps after tick ``K``
(an intervention inserted at ``K``, more or fewer ticks), env module kwargs, LLM settings, the budget.
What it may not change is the past and who lives in it: the agents, the env modules' types and
order, the router, the start time, and the timeline of steps up to tick ``K``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import SpecError
from engine.spec import ExperimentSpec, RunStep, parse_spec

__all__ = ["ForkSpec", "completed_steps_at", "fork_spec", "merge_patch", "timeline"]


@dataclass(frozen=True)
class ForkSpec:
    """The fork's spec and where in it the fork starts."""

    spec: ExperimentSpec
    at_step: int  #: the parent's committed tick the fork starts from
    completed_steps: int  #: top-level steps of ``spec`` done at that tick


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with the JSON merge patch ``patch`` applied (RFC 7386); neither is changed."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def timeline(spec: ExperimentSpec) -> list[tuple[str, Any]]:
    """The spec's steps as events: ``("tick", seconds)`` per tick, ``("step", <the step>)`` otherwise."""
    events: list[tuple[str, Any]] = []
    for step in spec.steps:
        if isinstance(step, RunStep):
            events += [("tick", step.tick)] * step.num_steps
        else:
            events.append(("step", step.model_dump(mode="json")))
    return events


def _past(events: list[tuple[str, Any]], ticks: int) -> list[tuple[str, Any]]:
    """The events up to and including the ``ticks``-th tick (none for 0)."""
    if ticks == 0:
        return []
    seen = 0
    for index, (kind, _) in enumerate(events):
        seen += kind == "tick"
        if seen == ticks:
            return events[: index + 1]
    return events


def completed_steps_at(spec: ExperimentSpec, ticks: int) -> int:
    """How many top-level steps of ``spec`` are done right after tick ``ticks`` commits: run steps
    whose ticks all came, and other steps placed before the last of those ticks."""
    done = 0
    for index, step in enumerate(spec.steps):
        if isinstance(step, RunStep):
            if done + step.num_steps > ticks:
                return index
            done += step.num_steps
        elif done >= ticks:
            return index
    return len(spec.steps)


def fork_spec(parent: ExperimentSpec, at_step: int, ticks_done: int, patch: dict[str, Any] | None = None) -> ForkSpec:
    """The fork of ``parent`` at tick ``at_step`` with ``patch`` applied, checked.

    Args:
        parent: the spec the parent run was started with (or last extended to).
        at_step: the committed tick to fork at (0: before the first).
        ticks_done: the ticks the parent committed.
        patch: a JSON merge patch over ``parent``'s JSON form (None: the same spec).

    Raises:
        SpecError: with the field path: ``at_step`` past the parent's ticks or past the patched
            spec's; a patched spec that is invalid, a sweep, or changes the agents, env modules,
            router, start time or the steps up to ``at_step``.
    """
    if parent.sweep is not None:
        raise SpecError("a sweep root cannot be forked: fork one of its cells' run directories", path="at_step")
    if not 0 <= at_step <= ticks_done:
        raise SpecError(f"the parent committed {ticks_done} tick(s); fork at one of 0..{ticks_done}, not {at_step}", path="at_step")
    base = parent.model_dump(mode="json")
    spec = parse_spec(merge_patch(base, patch) if patch else base)
    if spec.sweep is not None:
        raise SpecError("a fork is one run, not a sweep", path="sweep")
    if spec.all_agents() != parent.all_agents():
        raise SpecError("a fork keeps the parent's agents (their workspaces carry on); change the future, not who lives in it",
                        path="population" if parent.population else "agents")
    if [m.type for m in spec.environment.modules] != [m.type for m in parent.environment.modules]:
        raise SpecError("a fork keeps the parent's env modules and their order (their state carries on); kwargs may change",
                        path="environment.modules")
    if spec.start_time != parent.start_time:
        raise SpecError("a fork keeps the parent's start_time (its clock carries on)", path="start_time")
    if spec.environment.router != parent.environment.router:
        raise SpecError("a fork keeps the parent's router (its caches and snapshot carry on)", path="environment.router")
    if spec.network != parent.network or [m.network for m in spec.environment.modules] != [
            m.network for m in parent.environment.modules]:
        raise SpecError("a fork keeps the parent's network (the env saves its changes to it, not the graph); change it "
                        "with an intervene step's calls", path="network")
    events = timeline(spec)
    if sum(kind == "tick" for kind, _ in events) < at_step:
        raise SpecError(f"the fork's steps have fewer than the {at_step} tick(s) it starts after", path="steps")
    if _past(events, at_step) != _past(timeline(parent), at_step):
        raise SpecError(f"a fork's steps up to tick {at_step} must be the parent's (the same ticks, tick lengths and "
                        "steps between them); change what comes after", path="steps")
    return ForkSpec(spec, at_step, completed_steps_at(spec, at_step))
