"""Steps on a stored run: a finished run's spec extended with questionnaire, ask or intervene steps.

An extension appends top-level steps to the spec a run was started with; nothing else changes (the
budget may, as on any resume). ``run_experiment(extended, run_dir, ..., resume=True)`` then sees a
run whose spec has more top-level steps than it has completed, runs the new ones (each its own
transaction, its answers in the run's own datasets), and records the extended spec in
``SOCIETY.json``, so a later resume or another extension starts from it.

``run`` steps are refused: new ticks would change what "every agent once per tick" means for the
stored run. Sweeps are refused for now: their cells are separate runs under one manifest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from engine.errors import RunError, SpecError
from engine.society.fork.as_of import check_as_of_steps
from engine.society.status import read_society
from engine.spec import (
    ExperimentSpec,
    RunStep,
    StepSpec,
    format_validation_error,
    parse_spec,
    read_document,
)
from engine.storage.atomic import read_json
from engine.storage.run_layout import SOCIETY_FILE, RunLocation, run_store
from engine.storage.sweep_layout import SWEEP_FILE

__all__ = ["extend_spec", "is_extension", "load_steps", "parse_steps", "record_spec", "stored_spec"]

_STEPS = TypeAdapter(list[StepSpec])


def extend_spec(stored: ExperimentSpec, steps: Sequence[StepSpec]) -> ExperimentSpec:
    """The spec ``stored`` with ``steps`` appended after its own.

    Args:
        stored: the spec the run was started with (or last extended to).
        steps: questionnaire, ask or intervene steps.

    Returns:
        The extended spec, validated.

    Raises:
        SpecError: no steps, a ``run`` step (path ``steps.<i>.type``), a questionnaire naming agents
            the run does not have (``steps.<i>.target_agent_ids``), an ``as_of_step`` after the run's
            ticks (``steps.<i>.as_of_step``), or a sweep.
    """
    if stored.sweep is not None:
        raise SpecError("steps cannot be added to a sweep yet: each cell is its own run (add them to a cell's run directory)")
    if not steps:
        raise SpecError("give at least one step", path="steps")
    for index, step in enumerate(steps):
        if isinstance(step, RunStep):
            raise SpecError("a stored run takes questionnaire, ask or intervene steps, not 'run' (no new ticks)",
                            path=f"steps.{index}.type")
    if problem := stored.questionnaire_target_problem(steps):
        raise SpecError(problem[1], path=problem[0])
    check_as_of_steps(steps, ticks_before=stored.total_ticks())
    return stored.model_copy(update={"steps": [*stored.steps, *steps]})


def is_extension(before: ExperimentSpec, after: ExperimentSpec) -> bool:
    """Whether ``after`` is ``before`` with non-run steps appended (budgets and run options aside)."""
    n = len(before.steps)
    if len(after.steps) <= n or list(after.steps[:n]) != list(before.steps):
        return False
    if any(isinstance(step, RunStep) for step in after.steps[n:]):
        return False
    bare: dict[str, Any] = {"budget": None, "steps": []}
    return {**before.science(), **bare} == {**after.science(), **bare}


def stored_spec(run_dir: RunLocation) -> ExperimentSpec:
    """The spec a stored run (or a sweep root) was started with, or last extended to.

    Raises:
        SpecError: ``run_dir`` holds no run and no sweep.
    """
    stored = read_society(run_dir)
    if stored is None and isinstance(run_dir, Path):
        stored = read_json(run_dir / SWEEP_FILE, default=None)
    if stored is None:
        raise SpecError(f"{run_dir} holds no run to resume (no {SOCIETY_FILE} or {SWEEP_FILE})")
    return parse_spec(stored["spec"])


def record_spec(run_dir: RunLocation, spec: ExperimentSpec) -> None:
    """Make ``spec`` the one ``SOCIETY.json`` records (its hash too); the agents and env stay as stored.

    Raises:
        RunError: ``run_dir`` holds no run.
    """
    stored = read_society(run_dir)
    if stored is None:
        raise RunError(f"{run_dir} holds no run (no {SOCIETY_FILE})")
    run_store(run_dir).set_json(SOCIETY_FILE, {**stored, "spec": spec.model_dump(mode="json"), "spec_hash": spec.spec_hash()}, indent=2)


def load_steps(path: str | Path) -> list[StepSpec]:
    """Read steps from a YAML or JSON file: a list of steps, or ``{"steps": [...]}``.

    Raises:
        SpecError: unreadable file, bad syntax, or invalid steps (with their paths).
    """
    return parse_steps(read_document(path, "steps file"))


def parse_steps(data: Any) -> list[StepSpec]:
    """Steps from plain data: a list of step dicts (or step models), or ``{"steps": [...]}``.

    Raises:
        SpecError: invalid steps, with their paths (``steps.0.questions``).
    """
    if isinstance(data, dict) and set(data) == {"steps"}:
        data = data["steps"]
    try:
        return _STEPS.validate_python(data)
    except ValidationError as error:
        spec_error = SpecError("; ".join(f"steps.{line}" for line in format_validation_error(error).splitlines()))
        spec_error.path = ".".join(["steps", *(str(part) for part in error.errors()[0]["loc"])])
        raise spec_error from None
