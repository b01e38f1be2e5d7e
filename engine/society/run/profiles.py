"""The ``agent_profiles`` and ``survey_answers`` datasets: who each agent is, and what its respondent really said.

They follow from the spec alone, so a run writes them once, before its first step, as start shards
(:mod:`engine.society.run.start_shards`): ``agent_profiles`` holds every agent's profile as its prompts show it, and for a
survey population's members the respondent id and weight; ``survey_answers`` holds each member's
real answer to every target item, which no prompt ever shows; ``calibration`` holds a calibrated survey's fit
(each raked category's target and achieved share, the largest error, the design effect and effective n): of the raked
weights, or, after ``mode: draw``, of the members drawn, each weighing 1. Answers then join back to respondents
in SQL: ``questionnaire_answers JOIN survey_answers USING (agent_id)`` on ``question_id = item``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.population.codebook import show_code
from engine.society.datasets import AGENT_PROFILES, CALIBRATION, SURVEY_ANSWERS
from engine.society.run.start_shards import has_start_shards, write_start_shards
from engine.spec import AgentSpec, ExperimentSpec
from engine.storage.run_layout import RunLocation

__all__ = ["calibration_rows", "profile_rows", "write_profiles"]

#: Rows per shard of each dataset.
SHARD_ROWS = 100_000


def profile_rows(spec: ExperimentSpec, run_id: str, members: Sequence[tuple[int | None, AgentSpec]] | None = None,
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of ``agent_profiles`` and of ``survey_answers`` for ``spec``'s agents (``members``: its
    ``agent_members()``, where the caller has them already)."""
    members = spec.agent_members() if members is None else members
    respondents = {index: iter(population.respondents(spec.population_seed_key(index)))
                   for index, population in enumerate(spec.population) if population.codebook is not None}
    profiles, answers = [], []
    for population, agent in members:
        respondent = next(respondents[population]) if population in respondents else None
        profiles.append({"run": run_id, "agent_id": agent.id, "agent_type": agent.type, "population": population,
                         "respondent_id": respondent.id if respondent else None,
                         "weight": respondent.weight if respondent else None,
                         "profile": agent.profile})
        if respondent is None:
            continue
        codebook = spec.population[population].codebook  # type: ignore[index]
        assert codebook is not None
        for column, target in codebook.targets.items():
            item = codebook.target_name(column)
            code, again = respondent.answers[item], respondent.retests.get(item)
            labels = [label for _, label in target.labels or ()]
            label = target.label_of(code) if code is not None else None
            answers.append({"run": run_id, "agent_id": agent.id, "respondent_id": respondent.id, "item": item,
                            "label": label, "position": labels.index(label) if label is not None else None,
                            "code": show_code(code) if code is not None else None,
                            "retest_label": target.label_of(again) if again is not None else None,
                            "weight": respondent.weight})
    return profiles, answers


def calibration_rows(spec: ExperimentSpec, run_id: str) -> list[dict[str, Any]]:
    """The ``calibration`` rows of every calibrated survey population of ``spec``.

    With ``mode: weight`` they describe the raked weights; with ``mode: draw`` the members drawn (see
    ``engine.population.spec._drawn_report``): ``after`` is their share, ``design_effect`` and ``effective_n`` are
    Kish's over the rows drawn weighted by the times each was drawn, ``converged`` is False when the draw cannot hit the
    targets on average, and ``before`` and ``respondents`` are still the pool's.
    """
    rows = []
    for index, population in enumerate(spec.population):
        if population.calibrate is None:
            continue
        _, _, report = population.survey_members(spec.population_seed_key(index))
        assert report is not None
        summary = {"max_error": report.max_error, "design_effect": report.design_effect, "effective_n": report.effective_n,
                   "respondents": report.n, "iterations": report.iterations, "converged": report.converged}
        rows += [{"run": run_id, "population": index, "variable": m.variable, "category": m.category, "target": m.target,
                  "before": m.before, "after": m.after, **summary} for m in report.margins]
    return rows


def write_profiles(run_dir: RunLocation, spec: ExperimentSpec, run_id: str,
                   members: Sequence[tuple[int | None, AgentSpec]] | None = None) -> bool:
    """Write the three datasets into ``run_dir`` (``survey_answers`` for a survey, ``calibration`` for a calibrated
    one), unless it has them (a resumed run); ``members``: as for :func:`profile_rows`. Returns whether they were
    written (``agent_profiles`` last: its presence says all three are there)."""
    if has_start_shards(run_dir, AGENT_PROFILES):
        return False
    profiles, answers = profile_rows(spec, run_id, members)
    for schema, rows in ((CALIBRATION, calibration_rows(spec, run_id)), (SURVEY_ANSWERS, answers), (AGENT_PROFILES, profiles)):
        write_start_shards(run_dir, schema, [schema.to_table(rows[start:start + SHARD_ROWS])
                                             for start in range(0, len(rows), SHARD_ROWS)])
    return True
