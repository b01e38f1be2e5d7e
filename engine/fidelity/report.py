"""A run's fidelity: its simulated answers to the survey's target items, scored against the real ones.

:func:`fidelity` reads the run's ``survey_answers`` (the real answers), ``questionnaire_answers`` (the
simulated ones: for each agent and item, the valid answer of the last questionnaire that asked it, or
of the one named) and, to group by persona fields, ``agent_profiles``; scores them
(:mod:`engine.fidelity.scoring`); and writes the figures as the run's ``fidelity`` dataset, one shard
per questionnaire scored (a later scoring of the same questionnaire replaces it). The item's labels
and scale come from the codebook in the run's stored spec.

:func:`regression_fidelity` reads the same answers and the persona fields, fits one regression on the real and on the
simulated answers (:mod:`engine.fidelity.regression`) and writes its coefficients as the run's ``regression_fidelity``
dataset, one shard per questionnaire, formula and family.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import FidelityError, SpecError
from engine.fidelity.regression import RegressionData, RegressionReport, fit
from engine.fidelity.scoring import NONE, Checkpoint, Figure, ItemAnswers, compare_variant, no_checkpoint, score
from engine.population.codebook import Codebook, code_key
from engine.society.run.extend import stored_spec
from engine.spec import ExperimentSpec, QuestionnaireStep
from engine.spec_regression import FAMILY_PATH, FORMULA_PATH, RegressionSpec
from engine.storage.catalog import RUN_COLUMN, Catalog, Column, DatasetSchema
from engine.storage.reader import ReplayReader
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import REPLAY_DIR, RunLocation, run_store
from engine.storage.sweep_layout import read_sweep_manifest

__all__ = ["FIDELITY", "REGRESSION_FIDELITY", "FidelityReport", "fidelity", "regression_fidelity", "survey_codebook"]

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


REGRESSION_FIDELITY = DatasetSchema(
    name="regression_fidelity",
    kind="survey",
    description="one regression fitted on the real and on the simulated answers: each coefficient side by side",
    columns=(
        RUN_COLUMN,
        Column(name="questionnaire_id", type="string", description="the questionnaire scored (null: each item's last)"),
        Column(name="formula", type="string", description="target ~ fields, as parsed"),
        Column(name="family", type="string", description="ols (WLS on the scale step) | logit"),
        Column(name="n", type="int64", description="respondents both fits are over"),
        Column(name="term", type="string", description="the coefficient: Intercept, a field, or field=value (a dummy)"),
        Column(name="real", type="float64", description="its estimate on the real answers"),
        Column(name="real_low", type="float64", description="its 95% interval's lower end (sandwich standard errors)"),
        Column(name="real_high", type="float64", description="its upper end"),
        Column(name="real_p", type="float64", description="its p-value (null: no standard error)"),
        Column(name="simulated", type="float64", description="its estimate on the simulated answers"),
        Column(name="simulated_low", type="float64", description="its 95% interval's lower end"),
        Column(name="simulated_high", type="float64", description="its upper end"),
        Column(name="simulated_p", type="float64", description="its p-value"),
        Column(name="difference_p", type="float64", description="z-test of real = simulated, the fits taken as "
                                                                "independent (approximate: same respondents)"),
        Column(name="sign_agrees", type="bool", description="both estimates have the same sign"),
        Column(name="significance_agrees", type="bool", description="both p < 0.05 or both not"),
        Column(name="differs", type="bool", description="difference_p < 0.05"),
    ),
)


def _scale_steps(codebook: Codebook, column: str, real: list[dict[str, Any]],
                 simulated: dict[tuple[int, str], str]) -> tuple[dict[int, float], dict[int, float]]:
    """A target item's answers as scale steps (1: its first label), each agent's real one and simulated one."""
    name, spec = codebook.target_name(column), codebook.columns[column]
    place = {label: i + 1.0 for i, (_, label) in enumerate(spec.labels or ())}
    reals = {r["agent_id"]: r["position"] + 1.0 for r in real if r["item"] == name and r["position"] is not None}
    simulateds = {agent: place[answer] for (agent, item), answer in simulated.items() if item == name and answer in place}
    return reals, simulateds


def _persona_values(codebook: Codebook, column: str, profiles: dict[int, dict[str, Any]], agents: list[int],
                    categorical: bool) -> tuple[np.ndarray, tuple[Any, ...] | None]:
    """A persona field's value for each agent: its code as a number where every code is one (and the formula does not
    say ``C(field)``), else its label, with the labels in the codebook's order."""
    spec = codebook.columns[column]
    field_name = spec.name or column
    given = [profiles.get(agent, {}).get(field_name) for agent in agents]
    code_of = {label: code for code, label in spec.labels or ()}
    codes = [None if v is None else code_key(code_of.get(v, v)) for v in given]
    if not categorical and all(c is None or isinstance(c, float) for c in codes):
        return np.array([np.nan if c is None else c for c in codes], dtype=float), None
    order = [label for _, label in spec.labels or ()] or sorted({str(v) for v in given if v is not None})
    return np.array([None if v is None else str(v) for v in given], dtype=object), tuple(order)


def regression_fidelity(run_dir: RunLocation, regression: RegressionSpec, *, questionnaire_id: str | None = None,
                        write: bool = True, checkpoint: Checkpoint | None = None) -> RegressionReport:
    """Fit one regression on the run's real answers and on its simulated ones, and compare the coefficients.

    Args:
        regression: the formula (``target ~ fields``, over the codebook's persona fields and target items, by column
            or field name) and the family.
        questionnaire_id: the simulated answers of this questionnaire; default: for each item, the last that asked it.
        write: also write the coefficients as the run's ``regression_fidelity`` dataset.
        checkpoint: called between the reads; what it raises ends the fitting before anything is written.

    Raises:
        SpecError: at ``regression.formula``, a column that is neither a persona field nor a target item, a target
            whose answers are no number, a collinear design or too few respondents; at ``regression.family``, a logit
            of a target that is not binary.
        FidelityError: the run has no survey or asked no questionnaire, or a logit cannot be fitted.
    """
    go_on = checkpoint or no_checkpoint
    formula = regression.parsed
    stored = stored_spec(run_dir)
    codebook = survey_codebook(run_dir, stored)
    targets = {name: column for column in codebook.targets for name in (column, codebook.target_name(column))}
    personas = {name: column for column, spec in codebook.by_role("persona").items() for name in (column, spec.name or column)}
    for name in (formula.target, *(t.field for t in formula.terms)):
        if name not in targets and name not in personas:
            raise SpecError(f"{name!r} is neither a persona field nor a target item of the survey (persona fields: "
                            f"{', '.join(codebook.by_role('persona')) or 'none'}; targets: {', '.join(codebook.targets)})",
                            FORMULA_PATH)
    if formula.target not in targets:
        raise SpecError(f"{formula.target!r} is a persona field: the left of '~' must be a target item "
                        f"({', '.join(codebook.targets)})", FORMULA_PATH)
    target_labels = codebook.columns[targets[formula.target]].labels or []
    if regression.family == "logit" and len(target_labels) != 2:
        raise SpecError(f"a logit needs a binary target: {formula.target!r} has {len(target_labels)} options "
                        "(use family ols on an ordinal item)", FAMILY_PATH)
    categorical = {t.field for t in formula.terms if t.categorical}
    for name in (formula.target, *(t.field for t in formula.terms)):
        spec = codebook.columns.get(targets.get(name, ""))
        if spec is not None and name not in categorical and spec.scale != "ordinal" and len(spec.labels or []) != 2:
            raise SpecError(f"{name!r} is a nominal item with {len(spec.labels or [])} options: its answers are no number"
                            + ("" if name == formula.target else f"; write C({name}) for one dummy per answer"),
                            FORMULA_PATH)
    variants = [step.questionnaire_id for step in stored.steps if isinstance(step, QuestionnaireStep) and step.variant is not None]
    with ReplayReader(run_dir) as reader:
        real = reader.query("SELECT run, agent_id, item, position, weight FROM survey_answers ORDER BY item, agent_id"
                            ).to_pylist()
        go_on()
        simulated = _simulated(reader, questionnaire_id, variants)
        go_on()
        profiles = _groups(reader, ["*"]) if personas.keys() & {t.field for t in formula.terms} else {}
    target_name = codebook.target_name(targets[formula.target])
    if not any(item == target_name for _, item in simulated):
        raise FidelityError(f"no questionnaire of the run asked {target_name!r}"
                            + (f" (questionnaire {questionnaire_id!r})" if questionnaire_id else ""))
    weight_of = {r["agent_id"]: r["weight"] for r in real if r["item"] == target_name}
    agents = sorted(weight_of)
    sides: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] = ({}, {})
    levels: dict[str, tuple[Any, ...]] = {}
    for name in (formula.target, *(t.field for t in formula.terms)):
        if name in targets:
            column = targets[name]
            steps = _scale_steps(codebook, column, real, simulated)
            if regression.family == "logit" and name == formula.target:
                steps = ({a: v - 1 for a, v in steps[0].items()}, {a: v - 1 for a, v in steps[1].items()})
            if name in categorical:
                for side, answers in zip(sides, steps, strict=True):
                    side[name] = np.array([answers.get(a) for a in agents], dtype=object)
                levels[name] = tuple(float(i + 1) for i in range(len(codebook.columns[column].labels or [])))
            else:
                for side, answers in zip(sides, steps, strict=True):
                    side[name] = np.array([answers.get(a, np.nan) for a in agents], dtype=float)
        else:
            values, order = _persona_values(codebook, personas[name], profiles, agents, name in categorical)
            sides[0][name] = sides[1][name] = values
            if order is not None:
                levels[name] = order
    go_on()
    report = fit(formula, regression.family, RegressionData(real=sides[0], simulated=sides[1], levels=levels,
                                                            weights=np.array([weight_of[a] for a in agents], dtype=float)))
    if write:
        run_id = real[0]["run"] if real else ""
        key = hashlib.sha256(f"{report.family}:{report.formula}".encode()).hexdigest()[:12]
        rows = [{"run": run_id, "questionnaire_id": questionnaire_id, **row} for row in report.rows()]
        Catalog(run_store(run_dir).child(REPLAY_DIR)).register(REGRESSION_FIDELITY)
        ReplayWriter(run_dir).write_shard(REGRESSION_FIDELITY, f"regression-{questionnaire_id or 'last'}-{key}", rows)
    return report
