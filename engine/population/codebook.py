"""A survey's codebook: what each column of the respondents' table is, and what its codes mean.

Each listed column has a **role**:

- ``persona``: shown to the agent, as its label (``religious: strongly``), never as the bare code;
- ``target``: never shown to the agent; asked as a questionnaire item with its own wording and its
  labels as the options, in scale order, and scored against the respondent's real answer;
- ``id``: the respondent's identifier, kept out of the prompt and used as the join key;
- ``weight``: the respondent's survey weight (finite, not negative), kept out of the prompt.

Columns the codebook does not list are not read at all. A code listed under ``missing`` (the
codebook's, for every column, or the column's own) is no answer: a persona field is left out, and a
target is not scored for that respondent. Codes are compared as numbers where they are numbers
(``1``, ``1.0`` and ``"1"`` are one code) and as text otherwise.

Sans-IO: the codebook checks rows that have already been read (:mod:`engine.population.table`,
:mod:`engine.population.survey_files`) and turns them into profiles and respondents.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Code", "Codebook", "ColumnSpec", "Respondent", "code_key", "codebook_problem", "show_code"]

#: A code as compared: a number (as a float) or a text.
Code = float | str
Role = Literal["persona", "target", "id", "weight"]


def code_key(value: Any) -> Code | None:
    """``value`` as a code: numbers (and texts that are numbers) as floats, other texts stripped; None for no value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def show_code(code: Code) -> str:
    """A code as the data wrote it (``3``, not ``3.0``)."""
    return str(int(code)) if isinstance(code, float) and code.is_integer() else str(code)


def _labels(value: Any) -> Any:
    """A mapping ``{code: label}`` (its order is the scale's) as ``[[code, label], ...]``; pairs as they are."""
    if isinstance(value, Mapping):
        return [[code, label] for code, label in value.items()]
    return value


class ColumnSpec(BaseModel):
    """One column of the survey."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    name: str | None = Field(None, min_length=1, description="the profile field or question id; default: the column")
    question: str | None = Field(None, min_length=1, description="the question as it was asked (a target is asked it)")
    labels: list[tuple[Code, str]] | None = Field(
        None, description="code -> label, in scale order (a mapping in YAML); a persona column without labels shows its values")
    missing: list[Code] = Field(default_factory=list, description="codes that mean no answer (refused, don't know ...)")
    scale: Literal["nominal", "ordinal"] = Field("nominal", description="ordinal: the labels' order is a scale")
    retest: float | None = Field(None, gt=0, le=1, description="a target's test-retest accuracy of people, if known")
    retest_column: str | None = Field(None, min_length=1, description="a target's column of the same item asked again")

    _pairs = field_validator("labels", mode="before")(classmethod(lambda cls, v: _labels(v)))

    @field_validator("labels", "missing", mode="after")
    @classmethod
    def _codes_are_codes(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, list) and value and isinstance(value[0], tuple):
            keyed = [(code_key(code), label) for code, label in value]
            pairs = [(code, label) for code, label in keyed if code is not None]
            if len(pairs) < len(keyed):
                raise ValueError("a code cannot be empty")
            codes = [code for code, _ in pairs]
            if len(set(codes)) != len(codes):
                twice = next(c for c in codes if codes.count(c) > 1)
                raise ValueError(f"the code {show_code(twice)} is listed twice")
            return pairs
        return [code_key(code) for code in value]

    @model_validator(mode="after")
    def _fits_its_role(self) -> ColumnSpec:
        if self.role != "target" and (self.retest is not None or self.retest_column is not None):
            raise ValueError("retest and retest_column belong to a target column")
        if self.role in ("id", "weight") and (self.labels or self.question):
            raise ValueError(f"an {self.role} column has no question or labels")
        if self.labels is not None and not self.labels:
            raise ValueError("labels is empty: list each code and its label")
        return self

    def label_of(self, code: Code) -> str | None:
        """The label of ``code`` (None: it has none)."""
        return next((label for c, label in self.labels or () if c == code), None)


@dataclass(frozen=True)
class Respondent:
    """One respondent as the codebook reads its row: what is scored, and against what."""

    row: int  #: 1-based data row
    id: str  #: the id column's value, else the row number
    weight: float  #: 1.0 without a weight column
    answers: dict[str, Code | None]  #: target name -> its code (None: no answer, or a missing code)
    retests: dict[str, Code | None]  #: target name -> the retest column's code, where the codebook names one


class Codebook(BaseModel):
    """The survey's columns by name (in the order listed), and the codes that mean no answer in every column."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    columns: dict[str, ColumnSpec] = Field(min_length=1)
    missing: list[Code] = Field(default_factory=list, description="codes that mean no answer in every column")
    source: str | None = Field(None, description="where the data comes from (a citation)")

    _codes = field_validator("missing", mode="after")(classmethod(lambda cls, v: [code_key(c) for c in v]))

    @model_validator(mode="after")
    def _roles(self) -> Codebook:
        for role in ("id", "weight"):
            if len(found := [c for c, spec in self.columns.items() if spec.role == role]) > 1:
                raise ValueError(f"columns {found[0]!r} and {found[1]!r} are both the {role}; a survey has one")
        names: dict[str, str] = {}
        for column, spec in self.columns.items():
            if spec.role not in ("persona", "target"):
                continue
            name = spec.name or column
            if name in names:
                raise ValueError(f"columns {names[name]!r} and {column!r} are both named {name!r}")
            names[name] = column
            if spec.role == "target" and not spec.labels:
                raise ValueError(f"target column {column!r} needs labels: they are the options the agent chooses from")
            if spec.role == "target" and not spec.question:
                raise ValueError(f"target column {column!r} needs its question, as it was asked")
        for column, spec in self.columns.items():
            if spec.retest_column is not None and spec.retest_column in self.columns:
                raise ValueError(f"{column!r}'s retest column {spec.retest_column!r} cannot have a role of its own: "
                                 "a target's answers never reach a prompt")
        return self

    # ---- what the codebook names ---------------------------------------------------------------------------
    def by_role(self, role: Role) -> dict[str, ColumnSpec]:
        return {column: spec for column, spec in self.columns.items() if spec.role == role}

    @property
    def targets(self) -> dict[str, ColumnSpec]:
        """Target columns by column name."""
        return self.by_role("target")

    def target_name(self, column: str) -> str:
        return self.columns[column].name or column

    def read_columns(self) -> list[str]:
        """Every column to read from the file: the listed ones, and the targets' retest columns."""
        retests = [spec.retest_column for spec in self.targets.values() if spec.retest_column is not None]
        return [*self.columns, *retests]

    def is_missing(self, spec: ColumnSpec, code: Code | None) -> bool:
        return code is None or code in spec.missing or code in self.missing

    # ---- rows in, profiles and respondents out -----------------------------------------------------------------
    def profile(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The persona fields of one row: labels where the column has them, the value itself where it has none;
        missing codes left out. Targets, the id and the weight are never in it."""
        profile: dict[str, Any] = {}
        for column, spec in self.by_role("persona").items():
            value = row.get(column)
            code = code_key(value)
            if self.is_missing(spec, code):
                continue
            profile[spec.name or column] = spec.label_of(code) if spec.labels else value  # type: ignore[arg-type]
        return profile

    def respondent(self, row: Mapping[str, Any], number: int) -> Respondent:
        ids, weights = self.by_role("id"), self.by_role("weight")
        rid = str(row.get(next(iter(ids)))) if ids else str(number)
        weight = float(row[next(iter(weights))]) if weights else 1.0
        answers, retests = {}, {}
        for column, spec in self.targets.items():
            code = code_key(row.get(column))
            answers[spec.name or column] = None if self.is_missing(spec, code) else code
            if spec.retest_column is not None:
                again = code_key(row.get(spec.retest_column))
                retests[spec.name or column] = None if self.is_missing(spec, again) else again
        return Respondent(number, rid, weight, answers, retests)


def codebook_problem(codebook: Codebook, rows: Sequence[Mapping[str, Any]]) -> tuple[str, int | None, str | None] | None:
    """The first thing in ``rows`` the codebook cannot read, as ``(message, row, column)``; None when all is well.

    A listed column absent from every row, a code with no label in a labelled column, a weight that is
    not a finite number of at least 0, or an id that repeats.
    """
    present = set().union(*(row.keys() for row in rows)) if rows else set()
    for column in codebook.read_columns():
        if column not in present:
            return f"the codebook's column {column!r} is not in the data; its columns: {', '.join(sorted(present))}", None, column
    seen: dict[str, int] = {}
    ids = next(iter(codebook.by_role("id")), None)
    weight = next(iter(codebook.by_role("weight")), None)
    for number, row in enumerate(rows, 1):
        for column, spec in codebook.columns.items():
            code = code_key(row.get(column))
            if spec.labels and not codebook.is_missing(spec, code) and spec.label_of(code) is None:  # type: ignore[arg-type]
                return (f"row {number}, column {column!r}: the code {show_code(code)} has no label "  # type: ignore[arg-type]
                        "(add it to the column's labels, or to missing)"), number, column
        for spec in codebook.targets.values():
            if spec.retest_column is not None:
                code = code_key(row.get(spec.retest_column))
                if not codebook.is_missing(spec, code) and spec.label_of(code) is None:  # type: ignore[arg-type]
                    return (f"row {number}, column {spec.retest_column!r}: the code {show_code(code)} has no label in its "  # type: ignore[arg-type]
                            "target's labels"), number, spec.retest_column
        if weight is not None:
            value = row.get(weight)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                return f"row {number}, column {weight!r}: the weight {value!r} is not a finite number of at least 0", number, weight
        if ids is not None:
            rid = row.get(ids)
            if rid is None:
                return f"row {number}, column {ids!r}: the respondent has no id", number, ids
            if str(rid) in seen:
                return f"row {number}, column {ids!r}: the id {rid!r} is also row {seen[str(rid)]}'s", number, ids
            seen[str(rid)] = number
    return None
