"""The regression a fidelity call names (``regression: {formula: "rate_marriage ~ age + religious", family: ols}``):
its formula parsed and checked for form. What its columns are, and whether the run's answers can fit it, is
:mod:`engine.fidelity.regression`'s to check.

A value module (pydantic only), so the service's request models and its HTTP client can hold one and stay light.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.errors import SpecError

__all__ = ["FAMILY_PATH", "FORMULA_PATH", "Formula", "RegressionSpec", "Term", "parse_formula", "regression_spec"]

#: Where a formula's errors point (a request's field, a keyword's name).
FORMULA_PATH = "regression.formula"
FAMILY_PATH = "regression.family"

_NAME = r"[A-Za-z_][A-Za-z0-9_.]*"
_TERM = re.compile(rf"^(?:C\(\s*(?P<cat>{_NAME})\s*\)|(?P<num>{_NAME}))$")


@dataclass(frozen=True)
class Term:
    """One right-hand column of a formula."""

    field: str  #: a persona field or a target item, as the codebook names its column (or the field's name)
    categorical: bool = False  #: ``C(field)``: one dummy per value but the first, whatever its codes


@dataclass(frozen=True)
class Formula:
    """A parsed ``target ~ a + b + C(c)``: the intercept is always in."""

    target: str
    terms: tuple[Term, ...]

    @property
    def text(self) -> str:
        return f"{self.target} ~ " + " + ".join(f"C({t.field})" if t.categorical else t.field for t in self.terms)


def parse_formula(text: str) -> Formula:
    """``target ~ a + b + C(c)`` as a :class:`Formula`.

    Raises:
        ValueError: it does not parse, or names a column twice (the message says where).
    """
    target, tilde, right = text.partition("~")
    target = target.strip()
    if not tilde or "~" in right:
        raise ValueError(f"{text!r} is no formula: write 'target ~ field + field', e.g. 'rate_marriage ~ age + religious'")
    if not re.fullmatch(_NAME, target):
        raise ValueError(f"the left of '~' must be one target item, not {target!r}")
    terms: list[Term] = []
    for part in right.split("+"):
        match = _TERM.match(part.strip())
        if match is None:
            raise ValueError(f"{part.strip()!r} is no column: name a persona field or a target item, or C(field) for "
                             "one dummy per value (interactions and transforms are not supported)")
        term = Term(match["cat"] or match["num"], categorical=match["cat"] is not None)
        if term.field == target or term.field in {t.field for t in terms}:
            raise ValueError(f"{term.field!r} is named twice in the formula")
        terms.append(term)
    return Formula(target, tuple(terms))


class RegressionSpec(BaseModel):
    """A regression to fit on the real and on the simulated answers (see :mod:`engine.fidelity.regression`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    formula: str = Field(min_length=1, max_length=2000, examples=["rate_marriage ~ age + yrs_married + religious"],
                         description="target ~ persona fields (or other targets); C(field) makes a field categorical")
    family: Literal["ols", "logit"] = Field("ols", description="ols: WLS on the scale step; logit: a binary target")

    @field_validator("formula")
    @classmethod
    def _parses(cls, formula: str) -> str:
        return parse_formula(formula).text

    @property
    def parsed(self) -> Formula:
        return parse_formula(self.formula)


def regression_spec(formula: str, family: str = "ols") -> RegressionSpec:
    """A :class:`RegressionSpec` from a formula and a family, as the CLI and Python calls give them.

    Raises:
        SpecError: the formula does not parse (at ``regression.formula``) or the family is unknown.
    """
    try:
        return RegressionSpec(formula=formula, family=family)
    except ValidationError as error:
        first = error.errors()[0]
        where = "regression." + ".".join(str(p) for p in first["loc"])
        raise SpecError(first["msg"].removeprefix("Value error, "), where) from None
