"""Scalar instances: readable strings, bounded integers and numbers that honour ``multipleOf``."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

from engine.llm.sim.schema_match import SchemaMatcher, multiple_ok
from engine.llm.sim.vocabulary import FORMATS, WORDS

__all__ = ["ATTEMPTS", "integer_instance", "number_instance", "string_instance"]

#: How many draws a check-and-retry loop makes before it gives up with ValueError.
ATTEMPTS = 12
_NUMBERS = SchemaMatcher(None)  # numeric keywords never need $ref resolution
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def string_instance(schema: dict[str, Any], rng: random.Random, path: str = "#") -> str:
    """A string for a ``type: string`` schema: one of its ``examples``, readable words, or a ``format``.

    Examples are used for plain strings (no ``format``) that fit the length bounds.

    Raises:
        ValueError: an unknown format or length bounds nothing fits.
    """
    fmt = schema.get("format")
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")
    if hi is not None and lo > hi:
        raise ValueError(f"{path}: minLength {lo} > maxLength {hi}")
    examples = schema.get("examples")
    if fmt is None and isinstance(examples, list):
        fitting = [e for e in examples if isinstance(e, str) and lo <= len(e) and (hi is None or len(e) <= hi)]
        if fitting:
            return rng.choice(fitting)
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unsupported string format {fmt!r} at {path}/format")
    if fmt is None:
        return _words(rng, lo, hi)
    for _ in range(ATTEMPTS):
        text = FORMATS[fmt](rng)
        if lo <= len(text) and (hi is None or len(text) <= hi):
            return text
    raise ValueError(f"{path}: no {fmt!r} string fits length bounds [{lo}, {hi}]")


def _words(rng: random.Random, lo: int, hi: int | None) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
    while len(text) < lo:
        text += " " + rng.choice(WORDS)
    if hi is not None and len(text) > hi:
        text = text[:hi]
        if text.endswith(" "):  # a trailing space reads as a glitch; keep the length
            text = text[:-1] + "s"
    return text


def integer_instance(schema: dict[str, Any], rng: random.Random, path: str = "#") -> int:
    """An integer within the bounds and ``multipleOf`` of ``schema``.

    Raises:
        ValueError: no integer satisfies the bounds.
    """
    lo, hi = _int_bounds(schema, path)
    divisor = _divisor(schema, path)
    step = 1 if divisor is None else Fraction(str(divisor)).numerator
    span = max(100, 3 * step)
    lo = (hi - span if hi is not None else 0) if lo is None else lo
    hi = lo + span if hi is None else hi
    k_lo, k_hi = -(-lo // step), hi // step
    if k_lo > k_hi:
        raise ValueError(f"{path}: no integer{' multiple of ' + str(divisor) if divisor else ''} in [{lo}, {hi}]")
    for k in _candidates(rng, k_lo, k_hi):
        value = k * step
        if divisor is None or multiple_ok(value, divisor):
            return value
    raise ValueError(f"{path}: could not find an integer multiple of {divisor} in [{lo}, {hi}]")


def number_instance(schema: dict[str, Any], rng: random.Random, path: str = "#") -> float:
    """A float within the bounds and ``multipleOf`` of ``schema`` (two decimals when possible).

    Raises:
        ValueError: no number satisfies the bounds.
    """
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if isinstance(schema.get(key), bool):
            raise ValueError(f"unsupported draft-4 boolean {key!r} at {path}")
    lo = max((schema[k] for k in ("minimum", "exclusiveMinimum") if k in schema), default=None)
    hi = min((schema[k] for k in ("maximum", "exclusiveMaximum") if k in schema), default=None)
    divisor = _divisor(schema, path)
    span = max(100.0, 3 * float(divisor or 0))
    lo = (hi - span if hi is not None else 0.0) if lo is None else lo
    hi = lo + span if hi is None else hi

    def fits(v: float) -> bool:
        return _NUMBERS.ok(v, {k: schema[k] for k in _NUMBER_KEYS if k in schema})

    if divisor is not None:
        exact = Fraction(str(divisor))
        k_lo, k_hi = int(-(-Fraction(str(lo)) // exact)), int(Fraction(str(hi)) // exact)
        for k in _candidates(rng, k_lo, k_hi):
            value = float(exact * k)
            if fits(value):
                return value
        raise ValueError(f"{path}: could not find a multiple of {divisor} in [{lo}, {hi}]")
    for value in (round(rng.uniform(lo, hi), 2), rng.uniform(lo, hi), (lo + hi) / 2):
        if fits(value):
            return value
    raise ValueError(f"{path}: no number fits bounds [{lo}, {hi}]")


def _int_bounds(schema: dict[str, Any], path: str) -> tuple[int | None, int | None]:
    lows: list[int] = []
    highs: list[int] = []
    for key, bucket, adjust in (
        ("minimum", lows, math.ceil),
        ("exclusiveMinimum", lows, lambda b: math.floor(b) + 1),
        ("maximum", highs, math.floor),
        ("exclusiveMaximum", highs, lambda b: math.ceil(b) - 1),
    ):
        if key in schema:
            if isinstance(schema[key], bool):
                raise ValueError(f"unsupported draft-4 boolean {key!r} at {path}")
            bucket.append(adjust(schema[key]))
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _divisor(schema: dict[str, Any], path: str) -> int | float | None:
    divisor = schema.get("multipleOf")
    if divisor is not None and (isinstance(divisor, bool) or not isinstance(divisor, (int, float)) or divisor <= 0):
        raise ValueError(f"{path}/multipleOf: must be a positive number, got {divisor!r}")
    return divisor


def _candidates(rng: random.Random, k_lo: int, k_hi: int) -> list[int]:
    """Random multipliers, then 0: float ``multipleOf`` checks reject some products (3 * 0.1)."""
    if k_lo > k_hi:
        return []
    return [rng.randint(k_lo, k_hi) for _ in range(ATTEMPTS)] + ([0] if k_lo <= 0 <= k_hi else [])
