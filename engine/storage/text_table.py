"""Plain-text rendering of an Arrow table for the CLI (no pandas).

::

    step | agent | score
    -----+-------+------
       0 | a     |   1.5
       1 | NULL  |     2
    …    | …     | …
    (25 rows)
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

__all__ = ["format_table"]

_MAX_CELL = 60


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    text = json.dumps(value, default=str, ensure_ascii=False) if isinstance(value, list | dict) else str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def _is_numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


def format_table(table: pa.Table, max_rows: int = 20) -> str:
    """Render ``table`` as an aligned text table.

    Numbers are right-aligned, everything else left-aligned; nulls show as ``NULL``, long cells are
    cut with ``…``. If the table has more than ``max_rows`` rows, the first ``max_rows`` are shown
    followed by a ``…`` row. The last line is always the total row count.

    Args:
        table: the table to render.
        max_rows: how many rows to show at most.

    Returns:
        The rendered text, without a trailing newline.
    """
    n = table.num_rows
    shown = table.slice(0, max(max_rows, 0))
    headers = [_cell(name) for name in table.column_names]
    columns = [[_cell(v) for v in col.to_pylist()] for col in shown.columns]
    numeric = [_is_numeric(f.type) for f in table.schema]
    truncated = n > shown.num_rows
    widths = [max([len(h), 1, *(len(c) for c in col)]) for h, col in zip(headers, columns, strict=True)]

    def line(cells: list[str], align: list[bool]) -> str:
        parts = [c.rjust(w) if right else c.ljust(w) for c, w, right in zip(cells, widths, align, strict=True)]
        return " | ".join(parts).rstrip()

    lines: list[str] = []
    if headers:
        lines.append(line(headers, [False] * len(headers)))
        lines.append("-+-".join("-" * w for w in widths))
        for i in range(shown.num_rows):
            lines.append(line([col[i] for col in columns], numeric))
        if truncated:
            lines.append(line(["…"] * len(headers), [False] * len(headers)))
    lines.append(f"({n} row{'' if n == 1 else 's'})")
    return "\n".join(lines)
