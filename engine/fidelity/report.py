"""A run's fidelity: its simulated answers to the survey's target items, scored against the real ones.

:func:`fidelity` reads the run's ``survey_answers`` (the real answers), ``questionnaire_answers`` (the
simulated ones: for each agent and item, the valid answer of the last questionnaire that asked it, or
of the one named) and, to group by persona fields, ``agent_profiles``; scores them
(:mod:`engine.fidelity.scoring`); and writes the figures as the run's ``fidelity`` dataset, one shard
per questionnaire scored (a later scoring of the same questionnaire replaces it). The item's labels
and scale come from the codebook in the run's stored spec.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import FidelityError
from engine.fidelity.scoring import NONE, Checkpoint, Figure, ItemAnswers, compare_variant, no_checkpoint, score
from engine.population.codebook import Codebook
from engine.society.run.extend import stored_spec
from engine.spec import ExperimentSpec, QuestionnaireStep
from engine.storage.catalog import RUN_COLUMN, Catalog, Column, DatasetSchema
from engine.storage.reader import ReplayReader
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import REPLAY_DIR, RunLocation, run_store
from engine.storage.sweep_layout import read_sweep_manifest

__all__ = ["FIDELITY", "FidelityReport", "fidelity", "survey_codebook"]

FIDELITY = DatasetSchema(
    name="fidelity",
    kind="survey",
    description="simulated against real answers, per survey item (and subgroup): distances, accuracy and their CIs",
    columns=(
        RUN_COLUMN,
        Column(name="questionnaire_id", type="string", description="the questionnaire scored (null: each item's last)"),
        Column(name="item", type="string", description="the target item; * for a figure across items"),
        Column(name="metric", type="string", description="coverage | tvd | jsd | wasserstein | accuracy | spearman | "
                                                         "item_normalized_accuracy | normalized_accuracy | "
                                                         "correlation_rmse | correlation_pairs"),
        Column(name="group_by", type="string", description="the persona field of a subgroup (null: every respondent)"),
        Column(name="group", type="string", description="the subgroup's value"),
        Column(name="n", type="int64", description="respondents the figure is computed over"),
        Column(name="value", type="float64", description="the figure (null: it does not exist here)"),
        Column(name="ci_low", type="float64", description="its bootstrap interval's lower end"),
        Column(name="ci_high", type="float64", description="its upper end"),
        Column(name="gap", type="float64", description="a subgroup's value minus the whole sample's"),
        Column(name="bootstrap", type="int64", description="bootstrap resamples behind the interval"),
        Column(name="floor", type="float64", description="the figure on noise alone at this n: its mean when each "
                                                         "simulated answer is drawn from the real answers' distribution "
                                                         "(accuracy: chance; null: none)"),
    ),
)


@dataclass(frozen=True)
class FidelityReport:
    """The figures of one scoring, in the order they were computed."""

    figures: tuple[Figure, ...]
    questionnaire_id: str | None
    bootstrap: int

    def rows(self) -> list[dict[str, Any]]:
        return [asdict(figure) for figure in self.figures]

    def text(self) -> str:
        """The figures as a table, the whole sample's first, then each subgroup's with its gap."""
        def number(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        lines = [f"{'item':<16} {'metric':<20} {'group':<32} {'value':>7}  {'95% CI':<17} {'floor':>7} {'gap':>7} {'n':>7}"]
        for f in sorted(self.figures, key=lambda f: (f.group_by is not None, f.group_by or "", f.item, f.group or "")):
            ci = f"[{number(f.ci_low)}, {number(f.ci_high)}]" if f.ci_low is not None else ""
            group = f"{f.group_by}={f.group}" if f.group_by else "all"
            gap = "" if f.gap is None else f"{f.gap:+.3f}"
            floor = "" if f.floor is None else number(f.floor)
            lines.append(f"{f.item:<16} {f.metric:<20} {group:<32} {number(f.value):>7}  {ci:<17} {floor:>7} {gap:>7} {f.n:>7}")
        return "\n".join(lines)

    def get(self, item: str, metric: str, *, group_by: str | None = None, group: str | None = None) -> Figure:
        """The figure of ``metric`` for ``item`` (and subgroup); KeyError if there is none."""
        for figure in self.figures:
            if (figure.item, figure.metric, figure.group_by, figure.group) == (item, metric, group_by, group):
                return figure
        raise KeyError((item, metric, group_by, group))


def survey_codebook(run_dir: RunLocation, spec: ExperimentSpec | None = None) -> Codebook:
    """The codebook of the run's survey population (exactly one); ``spec``: the run's stored spec, if read already.

    Raises:
        FidelityError: the run has no survey population, or several.
    """
    books = [p.codebook for p in (spec or stored_spec(run_dir)).population if p.codebook is not None]
    if len(books) != 1:
        raise FidelityError(f"{run_dir} has {len(books)} survey populations (a population with a codebook); fidelity "
                            "scores a run with exactly one")
    return books[0]


def _simulated(reader: ReplayReader, questionnaire_id: str | None, variants: Sequence[str]) -> dict[tuple[int, str], str]:
    """Each (agent, item)'s valid answer: in ``questionnaire_id``, else in the last questionnaire that asked the item
    (no variant's: ``variants`` are their ids)."""
    if "questionnaire_answers" not in reader.datasets():
        raise FidelityError("the run asked no questionnaire: add a step {type: questionnaire, from_survey: true}")
    params: dict[str, Any]
    if questionnaire_id is not None:
        where, params = "parse_success AND questionnaire_id = $q", {"q": questionnaire_id}
    else:
        where, params = "parse_success AND NOT list_contains($v, questionnaire_id)", {"v": list(variants)}
    rows = reader.query("SELECT agent_id, question_id, arg_max(value_text, step_index) AS answer FROM questionnaire_answers "
                        f"WHERE {where} GROUP BY ALL", params).to_pylist()
    return {(r["agent_id"], r["question_id"]): r["answer"] for r in rows}


def _groups(reader: ReplayReader, by: Sequence[str]) -> dict[int, dict[str, Any]]:
    if not by:
        return {}
    rows = reader.query("SELECT agent_id, profile FROM agent_profiles").to_pylist()
    return {r["agent_id"]: json.loads(r["profile"]) if isinstance(r["profile"], str) else (r["profile"] or {}) for r in rows}


def _item_answers(codebook: Codebook, column: str, real: list[dict[str, Any]], simulated: dict[tuple[int, str], str],
                  profiles: dict[int, dict[str, Any]], by: Sequence[str], retest: Mapping[str, float]) -> ItemAnswers:
    """One target item's respondents: their real and simulated answers as positions among its labels."""
    spec, name = codebook.columns[column], codebook.target_name(column)
    rows = [r for r in real if r["item"] == name]
    labels = tuple(label for _, label in spec.labels or ())
    place = {label: i for i, label in enumerate(labels)}
    given = [simulated.get((r["agent_id"], name)) for r in rows]
    return ItemAnswers(
        item=name, labels=labels, ordinal=spec.scale == "ordinal",
        agents=np.array([r["agent_id"] for r in rows], dtype=np.int64),
        real=np.array([NONE if r["position"] is None else r["position"] for r in rows], dtype=np.int64),
        simulated=np.array([place.get(answer or "", NONE) for answer in given], dtype=np.int64),
        unmatched=sum(answer is not None and answer not in place for answer in given),
        weights=np.array([r["weight"] for r in rows], dtype=float),
        retest=(np.array([place.get(r["retest_label"] or "", NONE) for r in rows], dtype=np.int64)
                if spec.retest_column is not None else None),
        ceiling=retest.get(name, spec.retest),
        groups={field: np.array([profiles.get(r["agent_id"], {}).get(field) for r in rows], dtype=object) for field in by},
    )


def fidelity(run_dir: RunLocation, *, by: Sequence[str] = (), questionnaire_id: str | None = None, bootstrap: int = 200,
             seed: int = 0, retest: Mapping[str, float] | None = None, write: bool = True,
             checkpoint: Checkpoint | None = None) -> FidelityReport:
    """Score the run's simulated answers against its survey's real ones.

    Args:
        by: persona fields (as the profiles name them) to report subgroups of.
        questionnaire_id: score this questionnaire's answers; default: for each item, the last that asked it.
        bootstrap: resamples behind each interval.
        seed: the resampling's seed.
        retest: item -> people's test-retest accuracy on it, over the codebook's ``retest``.
        write: also write the figures as the run's ``fidelity`` dataset.
        checkpoint: called before each bootstrap resample (and between the reads); what it raises ends the scoring,
            before anything is written (how a service bounds a scoring's time or cancels it).

    Raises:
        FidelityError: the run has no survey or asked none of its items, or an item cannot be scored.
    """
    go_on = checkpoint or no_checkpoint
    if bootstrap < 1:
        raise FidelityError("bootstrap must be at least 1")
    if isinstance(run_dir, Path) and read_sweep_manifest(run_dir) is not None:
        raise FidelityError(f"{run_dir} is a sweep: score its cells and rank them (polis fidelity on the root, "
                            "engine.fidelity.rank_sweep)")
    stored = stored_spec(run_dir)
    codebook = survey_codebook(run_dir, stored)
    variants = [step for step in stored.steps if isinstance(step, QuestionnaireStep) and step.variant is not None]
    with ReplayReader(run_dir) as reader:
        real = reader.query("SELECT run, agent_id, item, position, retest_label, weight FROM survey_answers "
                            "ORDER BY item, agent_id").to_pylist()
        go_on()
        simulated = _simulated(reader, questionnaire_id, [step.questionnaire_id for step in variants])
        varied = {step.questionnaire_id: _simulated(reader, step.questionnaire_id, ()) for step in variants
                  if step.variant is not None and step.variant.of == (questionnaire_id or step.variant.of)}
        profiles = _groups(reader, by)
    go_on()
    asked = {item for _, item in simulated}
    items = [_item_answers(codebook, column, real, simulated, profiles, by, retest or {}) for column in codebook.targets
             if codebook.target_name(column) in asked]
    if not items:
        raise FidelityError(f"no questionnaire of the run asked a target item of its survey ({', '.join(codebook.targets)})"
                            + (f" (questionnaire {questionnaire_id!r})" if questionnaire_id else ""))
    figures = score(items, by=by, bootstrap=bootstrap, seed=seed, checkpoint=go_on)
    for step in variants:
        if step.questionnaire_id not in varied or step.variant is None:
            continue
        for answers in items:
            place = {label: i for i, label in enumerate(answers.labels)}
            other = varied[step.questionnaire_id]
            moved = np.array([place.get(other.get((int(a), answers.item)) or "", NONE) for a in answers.agents], dtype=np.int64)
            figures += compare_variant(answers, dataclasses.replace(answers, simulated=moved), step.variant.name,
                                       step.variant.threshold, bootstrap=bootstrap, seed=seed, checkpoint=go_on)
    report = FidelityReport(tuple(figures), questionnaire_id, bootstrap)
    if write:
        run_id = real[0]["run"] if real else ""
        rows = [{"run": run_id, "questionnaire_id": questionnaire_id, "bootstrap": bootstrap, **row} for row in report.rows()]
        Catalog(run_store(run_dir).child(REPLAY_DIR)).register(FIDELITY)
        ReplayWriter(run_dir).write_shard(FIDELITY, f"fidelity-{questionnaire_id or 'last'}", rows)
    return report
