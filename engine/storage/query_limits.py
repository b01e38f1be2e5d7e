"""QueryLimits: how much memory, how many threads and how much time one reader's queries may take.

The values come from ``EngineSettings`` (``POLIS_QUERY_MEMORY_LIMIT``, ``POLIS_QUERY_THREADS``,
``POLIS_QUERY_TIMEOUT_S``) at the edge and reach :class:`~engine.storage.reader.ReplayReader` as a
value. This module does not import DuckDB.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["QueryLimits", "check_memory_limit", "parse_size"]

_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in a DuckDB-style size (``"512MB"``, ``"1GB"``, ``"2GiB"``; KB = 1000 bytes, KiB = 1024).

    Raises:
        ValueError: not a number followed by one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size such as 512MB or 1GB")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def check_memory_limit(value: str) -> str:
    """``value`` stripped, if it is a size DuckDB can run queries in (at least 1MiB).

    Raises:
        ValueError: not a size, or below 1MiB.
    """
    if parse_size(value) < 2**20:
        raise ValueError(f"{value!r} is below 1MiB; DuckDB cannot run queries in that")
    return value.strip()


class QueryLimits(BaseModel):
    """The limits every query of one :class:`~engine.storage.reader.ReplayReader` runs under.

    The memory limit bounds DuckDB's own memory (a query needing more fails, nothing spills to
    disk) and, separately, the Arrow result a query returns.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_limit: str = "1GB"  #: DuckDB's ``memory_limit`` (its own default is 80% of RAM), and the result's cap
    threads: int = Field(default=2, ge=1, le=256)  #: DuckDB's ``threads``
    timeout_s: float = Field(default=30.0, gt=0)  #: a query running longer is interrupted

    _a_size = field_validator("memory_limit")(classmethod(lambda cls, v: check_memory_limit(v)))

    @property
    def memory_bytes(self) -> int:
        """The memory limit in bytes."""
        return parse_size(self.memory_limit)
