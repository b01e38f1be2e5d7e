"""``PopulationSpec``: a spec's generated population, from a template or a persona table.

Part of the experiment spec (``engine.spec`` re-exports it); the members it makes are
:mod:`engine.population.members`, its table's rows :mod:`engine.population.table`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import random
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from engine.format_template import check_format_template, formatted_size_bound
from engine.population.calibrate import CalibrationReport, MarginFit, rake
from engine.population.codebook import Codebook, Respondent, codebook_problem
from engine.population.members import (
    MAX_POPULATION_ROWS,
    DrawKind,
    SampleKind,
    chosen_rows,
    draw_by_weight,
    draw_value,
    table_profiles,
)
from engine.population.table import first_row_problem
from engine.tiers.spec import TIERS, ArchetypeSpec, RuleSpec, Tier

__all__ = ["CalibrateSpec", "PopulationSpec"]

_TEMPLATE_NAMES = ("i", "id")


def _known_agent_type(name: str) -> str:
    from engine.agent.registry import check_agent_type

    return check_agent_type(name)


def _check_persona_fields(names: list[str], fields: list[str], error_type: str, path: str) -> None:
    """Refuse the first of ``names`` that is none of the population's ``fields``, at ``<path>.<i>``, with the nearest field."""
    for i, name in enumerate(names):
        if name not in fields:
            near = difflib.get_close_matches(name, fields, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise PydanticCustomError(error_type, "{message}", {
                "key": f"{path}.{i}",
                "message": f"{name!r} is not a persona field of this population; {hint}its fields: {', '.join(fields) or '(none)'}"})


class CalibrateSpec(BaseModel):
    """Weights (or a draw) that make a survey population match known marginal shares, e.g. a census table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    marginals: dict[str, dict[str, float]] = Field(
        min_length=1, description="persona field -> its label -> target share (a field's shares sum to 1)")
    mode: Literal["weight", "draw"] = Field(
        "weight", description="weight: rake the members' weights; draw: rake every row, then draw the members "
        "with probability proportional to the raked weight (their weights are then 1)")
    draw: DrawKind = Field(
        "systematic", exclude_if=lambda v: v == "systematic",
        description="mode draw: systematic draws no row twice, each with probability min(1, c * weight) (a row whose "
        "weight asks for more than 1 is taken once, and the margins then fall short: the calibration report says so); "
        "with_replacement draws each member independently, and a row drawn twice is two members")
    max_iter: int = Field(200, ge=1, le=10_000, description="raking rounds at most")
    tolerance: float = Field(1e-6, gt=0, lt=1, description="the largest margin error to stop at")

    @field_validator("marginals")
    @classmethod
    def _shares_sum_to_one(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for field, shares in value.items():
            if not shares or any(share < 0 for share in shares.values()):
                raise ValueError(f"marginals.{field}: give each label a share of at least 0")
            if abs(sum(shares.values()) - 1) > 1e-6:
                raise ValueError(f"marginals.{field}: the shares sum to {sum(shares.values()):.6g}, not 1")
        return value

    @model_validator(mode="after")
    def _draw_needs_mode_draw(self) -> CalibrateSpec:
        if "draw" in self.model_fields_set and self.mode != "draw":
            raise ValueError(f"draw: {self.draw} chooses how mode draw draws; this calibration's mode is {self.mode}")
        return self


class PopulationSpec(BaseModel):
    """A generated population: members drawn from a template, or one member per row of a table.

    With ``profile_template``, each value is either a scalar (strings may use ``{i}``, the member's
    index, and ``{id}``, its agent id) or a list, from which each member draws one value with the
    spec's seed; ``count`` is required.

    With ``from`` (a ``.parquet``, ``.csv`` or ``.jsonl`` file), each row makes one member whose
    profile fields are the row's columns (or only ``columns``); see :mod:`engine.population.table`
    for what a value may be. ``load_spec`` resolves the name against the spec file's folder, the
    service under ``POLIS_INPUT_DIRS`` only, and the table is read into ``rows``, which the stored
    spec keeps (a resumed, swept or forked run reads no file). ``count`` (default: every row) rows
    are taken: the first ones, or with ``sample: random`` a sample seeded by the spec's seed, in
    file order. A ``count`` over the rows is an error: no row is repeated to make up the number.
    ``rows`` may also be given inline.

    With ``codebook`` (a YAML file or a mapping, see :mod:`engine.population.codebook`), the table is a
    survey's respondents: each member's profile is its row's persona columns, as labels; its target
    columns are never in a profile, and are what a ``from_survey`` questionnaire asks and fidelity scores.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True)

    from_: str | None = Field(None, alias="from", min_length=1, exclude_if=lambda v: v is None,
                              description="a .parquet, .csv or .jsonl persona table: one member per row")
    codebook: Codebook | None = Field(None, exclude_if=lambda v: v is None,
                                      description="the table is a survey: each column's role, question and labels")
    calibrate: CalibrateSpec | None = Field(None, exclude_if=lambda v: v is None,
                                            description="a survey's weights raked to known marginal shares")
    persona: list[str] | None = Field(
        None, min_length=1, exclude_if=lambda v: v is None,
        description="a survey's persona fields the agents are shown (default: all); fewer for an ablation, e.g. "
        "demographics only")
    columns: list[str] | None = Field(None, min_length=1, exclude_if=lambda v: v is None,
                                      description="the table's columns that become profile fields; default: all")
    sample: SampleKind = Field("first", exclude_if=lambda v: v == "first",
                               description="which rows when count is below the rows: the first, or a seeded random sample")
    rows: list[dict[str, Any]] | None = Field(None, min_length=1, validate_default=True, exclude_if=lambda v: v is None,
                                              description="the table's rows (filled in from 'from' when the spec is loaded)")
    count: int | None = Field(None, ge=1, le=MAX_POPULATION_ROWS, validate_default=True,
                              description="members; required with profile_template, default every row of a table")
    type: str = "PersonAgent"
    profile_template: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    id_start: int | None = Field(None, ge=0, description="first agent id; defaults to after the previous agents")
    tier: Tier = Field("llm", exclude_if=lambda v: v == "llm",
                       description="llm: an LLM agent per member; archetype: one LLM decision per group of members, each "
                       "member drawing from it; rule: a registered policy per member, no LLM")
    tier_mix: dict[Tier, float] | None = Field(
        None, exclude_if=lambda v: v is None,
        description="instead of one tier, each tier's share of the members (summing to 1), assigned by a seeded draw: "
        "e.g. {llm: 0.1, archetype: 0.9}; sweep it to compare costs against fidelity")
    archetype: ArchetypeSpec | None = Field(None, exclude_if=lambda v: v is None,
                                            description="tier archetype: the groups' key, size, context and options")
    rule: RuleSpec | None = Field(None, exclude_if=lambda v: v is None, description="tier rule: the policy and its params")

    _type_known = field_validator("type")(classmethod(lambda cls, v: _known_agent_type(v)))

    @field_validator("config")
    @classmethod
    def _config_fits_the_agent(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.agent.registry import check_agent_config

        return check_agent_config(info.data.get("type"), value)

    @field_validator("rows")
    @classmethod
    def _rows_are_profiles(cls, value: list[dict[str, Any]] | None, info: ValidationInfo) -> list[dict[str, Any]] | None:
        if value is None:
            if info.data.get("from_") is not None:
                raise ValueError(f"the table {info.data['from_']!r} has not been read: load the spec from its file "
                                 "(polis run, load_spec), whose folder a relative name is resolved against, or give 'rows'")
            if info.data.get("columns") is not None:
                raise ValueError("'columns' picks columns of a table: give 'from' or 'rows' too")
            return None
        if (problem := first_row_problem(value, info.data.get("columns"))) is not None:
            raise ValueError(problem.message)
        codebook = info.data.get("codebook")
        if codebook is not None:
            if info.data.get("columns") is not None:
                raise ValueError("a survey's codebook chooses its columns: leave 'columns' out")
            if (found := codebook_problem(codebook, value)) is not None:
                raise ValueError(found[0])
        return value

    @field_validator("count")
    @classmethod
    def _count_fits_the_rows(cls, value: int | None, info: ValidationInfo) -> int | None:
        rows = info.data.get("rows")
        if rows is None and "rows" in info.data:  # no table (a bad table is refused under 'rows' already)
            if value is None:
                raise ValueError("a population without a table ('from' or 'rows') needs a count")
        elif rows is not None and value is not None and value > len(rows):
            raise ValueError(f"{value} is more than the {len(rows)} rows of the table; rows are not repeated")
        return value

    @field_validator("profile_template")
    @classmethod
    def _lists_not_empty(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if value and info.data.get("rows") is not None:
            raise ValueError("a population takes its profiles from a table ('from' or 'rows') or from a template, not both")
        for key, item in value.items():
            if isinstance(item, list) and not item:
                raise ValueError(f"profile_template.{key} is an empty list: nothing to draw from")
            for choice in item if isinstance(item, list) else [item]:
                if isinstance(choice, str):
                    try:
                        check_format_template(choice, _TEMPLATE_NAMES)
                        choice.format(i=0, id=0)
                    except ValueError as error:
                        raise ValueError(f"profile_template.{key}: {error}") from None
        return value

    @model_validator(mode="after")
    def _persona_fields_exist(self) -> PopulationSpec:
        if self.persona is None:
            return self
        if self.codebook is None:
            raise ValueError("persona chooses a survey's persona fields: give the population a codebook")
        names = [spec.name or column for column, spec in self.codebook.by_role("persona").items()]
        if unknown := next((name for name in self.persona if name not in names), None):
            raise ValueError(f"persona: {unknown!r} is not a persona field of the survey; its fields: {', '.join(names)}")
        return self

    @model_validator(mode="after")
    def _tier_fits(self) -> PopulationSpec:
        mix = self.tier_mix
        if mix is not None:
            if self.tier != "llm":
                raise ValueError("give 'tier' or 'tier_mix', not both")
            if any(share < 0 for share in mix.values()) or abs(sum(mix.values()) - 1) > 1e-6:
                raise PydanticCustomError("tier_mix", "{message}", {"key": "tier_mix", "message":
                                          f"the shares must be at least 0 and sum to 1, not {sum(mix.values()):.6g}"})
        used = {tier for tier, share in mix.items() if share > 0} if mix is not None else {self.tier}
        for tier, given in (("archetype", self.archetype), ("rule", self.rule)):
            if given is None and tier in used:
                raise ValueError(f"tier {tier} needs '{tier}': its settings")
            if given is not None and mix is None and self.tier != tier:  # a mix may keep a tier's settings at share 0
                raise ValueError(f"'{tier}' is for tier {tier}; this population's tier is {self.tier}")
        if self.archetype is None:
            return self
        fields = self.profile_fields()
        _check_persona_fields(self.archetype.key, fields, "archetype_key", "archetype.key")
        if self.archetype.cluster is not None:
            _check_persona_fields(self.archetype.cluster.fields, fields, "archetype_cluster", "archetype.cluster.fields")
        return self

    def member_tiers(self, seed: int, index: int) -> list[Tier]:
        """Each member's tier, in member order: ``tier``, or ``tier_mix``'s shares (largest remainders) dealt by a draw
        seeded by the spec's ``seed`` and the population's ``index``."""
        if self.tier_mix is None:
            return [self.tier] * self.size
        exact = {tier: share * self.size for tier, share in self.tier_mix.items()}
        counts = {tier: int(value) for tier, value in exact.items()}
        for tier in sorted(exact, key=lambda t: counts[t] - exact[t])[: self.size - sum(counts.values())]:
            counts[tier] += 1
        dealt: list[Tier] = [tier for tier in TIERS for _ in range(counts.get(tier, 0))]
        random.Random(f"tier-mix:{seed}:{index}").shuffle(dealt)
        return dealt

    def profile_fields(self) -> list[str]:
        """The fields every member's profile may have: the template's keys, the table's (chosen) columns, or the
        survey's (shown) persona fields."""
        if self.codebook is not None:
            names = [spec.name or column for column, spec in self.codebook.by_role("persona").items()]
            return [n for n in names if self.persona is None or n in self.persona]
        if self.rows is not None:
            return list(self.columns) if self.columns is not None else list(dict.fromkeys(k for row in self.rows[:100] for k in row))
        return list(self.profile_template)

    @model_validator(mode="after")
    def _calibration_fits(self) -> PopulationSpec:
        if self.calibrate is None:
            return self
        if self.codebook is None or self.rows is None:
            raise ValueError("calibrate weights a survey: give the population a codebook")
        names = {spec.name or column: spec for column, spec in self.codebook.by_role("persona").items()}
        for field, shares in self.calibrate.marginals.items():
            if field not in names:
                raise ValueError(f"calibrate.marginals.{field}: not a persona field of the survey; its fields: "
                                 f"{', '.join(names)}")
            labels = [label for _, label in names[field].labels or ()]
            if labels and (unknown := next((label for label in shares if label not in labels), None)):
                raise ValueError(f"calibrate.marginals.{field}: {unknown!r} is none of its labels ({', '.join(labels)})")
        return self  # that its members fit the marginals is checked with their sample (ExperimentSpec knows its seed)

    def survey_members(self, seed_key: str) -> tuple[list[int], list[float], CalibrationReport | None]:
        """A survey population's rows (indexes, in file order), each member's weight, and the calibration's report.

        With ``mode: draw`` a row drawn twice (``draw: with_replacement``) is there twice, and the report describes the
        members drawn (see :func:`_drawn_report`), not the raked rows.

        Raises:
            ValueError: a member has no category of a raked field, or a target category no member; or fewer rows
                than ``count`` have a raked weight above 0 to draw from without replacement.
        """
        assert self.codebook is not None and self.rows is not None
        codebook, rows = self.codebook, self.rows
        calibrate = self.calibrate
        if calibrate is not None and calibrate.mode == "draw":
            pool = list(range(len(rows)))
        else:
            pool = chosen_rows(len(rows), self.size, self.sample, seed_key)
        base = [codebook.respondent(rows[i], i + 1).weight for i in pool]
        if calibrate is None:
            return pool, base, None
        categories: dict[str, list[str]] = {}
        for field in calibrate.marginals:
            found = []
            for i in pool:
                value = codebook.profile(rows[i]).get(field)
                if value is None:
                    raise ValueError(f"calibrate: row {i + 1} has no {field!r} to rake on (it is missing there)")
                found.append(str(value))
            categories[field] = found
        weights, report = rake(categories, calibrate.marginals, np.array(base, dtype=float), max_iter=calibrate.max_iter,
                               tolerance=calibrate.tolerance)
        if calibrate.mode == "weight":
            return pool, weights.tolist(), report
        draw = np.random.default_rng(random.Random(f"calibrate-draw:{seed_key}").getrandbits(63))
        try:
            chosen, expected = draw_by_weight(weights, self.size, calibrate.draw, draw)
        except ValueError as error:
            raise ValueError(f"calibrate: {error} (draw: with_replacement may repeat rows)") from None
        return [pool[i] for i in chosen], [1.0] * len(chosen), _drawn_report(report, categories, chosen, expected,
                                                                              calibrate.tolerance)

    @property
    def size(self) -> int:
        """The number of members: ``count``, or every row of the table."""
        return self.count if self.count is not None else len(self.rows or ())

    def size_bound(self, id_digits: int) -> int:
        """An upper bound on the characters of all members' profiles and configs (as JSON), for ids of ``id_digits`` digits."""
        member = len(json.dumps(self.config, default=str))
        if self.rows is not None:  # the rows are in memory already; the chosen ones are a part of them
            return len(json.dumps(self.rows)) + self.size * (member + 8)
        for key, item in self.profile_template.items():
            sizes = [formatted_size_bound(c, id_digits) if isinstance(c, str) else len(json.dumps(c, default=str))
                     for c in (item if isinstance(item, list) else [item])]
            member += len(key) + max(sizes) + 8
        return self.size * member

    def profiles(self, rng: random.Random, seed_key: str, start: int) -> list[dict[str, Any]]:
        """Every member's profile: drawn with ``rng`` from the template, or taken from the rows (sampled by ``seed_key``)."""
        if self.codebook is not None and self.rows is not None:
            shown = set(self.persona) if self.persona is not None else None
            return [{k: v for k, v in self.codebook.profile(self.rows[i]).items() if shown is None or k in shown}
                    for i in self.survey_members(seed_key)[0]]
        if self.rows is not None:
            return table_profiles(self.rows, self.size, self.sample, self.columns, seed_key)
        return [{key: draw_value(value, rng, i, start + i) for key, value in self.profile_template.items()}
                for i in range(self.size)]

    def respondents(self, seed_key: str) -> list[Respondent]:
        """A survey population's members as respondents, in member order (none without a codebook)."""
        if self.codebook is None or self.rows is None:
            return []
        indexes, weights, _ = self.survey_members(seed_key)
        return [dataclasses.replace(self.codebook.respondent(self.rows[i], i + 1), weight=weight)
                for i, weight in zip(indexes, weights, strict=True)]


def _drawn_report(raked: CalibrationReport, categories: dict[str, list[str]], chosen: list[int], expected: np.ndarray,
                  tolerance: float) -> CalibrationReport:
    """The calibration report of a draw: the members drawn, not the raked rows.

    Each margin's ``after`` is the drawn members' share (each member counts once, a row drawn twice twice), and
    ``max_error`` the largest gap between those shares and the targets: sampling error, and any shortfall of the
    design. ``converged`` says that the raking converged *and* that the draw hits the targets on average (the
    expected number of draws of each category's rows, over ``count``, within ``tolerance`` of its target): it is
    False when rows had to be taken for sure (inclusion probability 1) and their category still falls short,
    or when the raking could not reach the margins. The design effect and effective n are Kish's over the
    distinct rows drawn, each weighted by the times it was drawn: 1 and ``count`` without replacement, where
    every member weighs 1.
    """
    count, members = len(chosen), np.asarray(chosen)
    values = {variable: np.asarray(found) for variable, found in categories.items()}
    margins, reached = [], raked.converged
    for fit in raked.margins:
        rows = values[fit.variable] == fit.category
        reached = reached and abs(float(expected[rows].sum()) / count - fit.target) <= tolerance
        margins.append(MarginFit(fit.variable, fit.category, fit.target, fit.before, float(rows[members].sum()) / count))
    times = np.unique(members, return_counts=True)[1].astype(np.float64)
    squares = float(np.square(times).sum())
    return dataclasses.replace(
        raked, margins=tuple(margins), converged=reached, max_error=max(abs(m.after - m.target) for m in margins),
        design_effect=len(times) * squares / count**2, effective_n=count**2 / squares)
