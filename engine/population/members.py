"""A population's members: profiles drawn from a template, or taken from a table's rows.

Both are plain functions of the population's fields and a seed, so expanding the same spec twice
makes the same agents. The bounds here are checked before anything is expanded or read.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["MAX_POPULATION_CHARS", "MAX_POPULATION_ROWS", "SampleKind", "chosen_rows", "draw_value", "table_profiles"]

#: The most characters a spec's populations may expand to (profiles and configs, as JSON), checked
#: before expanding; a population's table is bounded by it too (its decoded size, before rows are made).
MAX_POPULATION_CHARS = 256 * 1024 * 1024
#: The most members one population may have, and the most rows its table may hold.
MAX_POPULATION_ROWS = 1_000_000

#: How ``count`` rows are taken from a table: the first ones, or a seeded sample (kept in file order).
SampleKind = Literal["first", "random"]


def draw_value(value: Any, rng: random.Random, i: int, agent_id: int) -> Any:
    """One template value for member ``i``: a list draws one choice, a string is formatted with ``{i}`` and ``{id}``."""
    if isinstance(value, list):
        value = rng.choice(value)
    if isinstance(value, str):
        return value.format(i=i, id=agent_id)
    return value


def chosen_rows(rows: int, count: int, sample: SampleKind, seed_key: str) -> list[int]:
    """The indexes of the ``count`` of ``rows`` rows a population takes, in file order (see :func:`table_profiles`)."""
    if count > rows:
        raise ValueError(f"count {count} is more than the table's {rows} rows")
    if sample == "random" and count < rows:
        return sorted(random.Random(f"population-rows:{seed_key}").sample(range(rows), count))
    return list(range(count))


def table_profiles(
    rows: Sequence[Mapping[str, Any]], count: int, sample: SampleKind, columns: Sequence[str] | None, seed_key: str,
) -> list[dict[str, Any]]:
    """The profiles of ``count`` of ``rows``, in file order.

    Args:
        rows: the table's rows (validated: every value a string, finite number, boolean or null).
        count: how many rows to take, at most ``len(rows)`` (no row is repeated).
        sample: ``first`` takes the first ``count``; ``random`` a sample seeded by ``seed_key``.
        columns: the columns that become profile fields; None: every column of the row.
        seed_key: the sample's seed (the spec's seed and the population's index).

    Returns:
        One profile per chosen row. A null value leaves its field out: the row has no value there,
        and none is invented.
    """
    keys = list(columns) if columns is not None else None
    profiles = []
    for index in chosen_rows(len(rows), count, sample, seed_key):
        row = rows[index]
        picked = row.items() if keys is None else ((key, row.get(key)) for key in keys)
        profiles.append({key: value for key, value in picked if value is not None})
    return profiles
