"""Times given in module kwargs and tool arguments, on the simulation clock (naive UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["parse_time"]


def parse_time(value: Any, what: str) -> datetime:
    """Parse an ISO time (YAML specs may already hold datetimes); aware times become naive UTC, like the clock.

    Raises:
        ValueError: not an ISO time; the message names ``what``.
    """
    try:
        parsed = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an ISO time such as 2024-01-01T18:00, got {value!r}") from None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed
