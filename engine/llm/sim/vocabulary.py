"""The words and formatted strings the simulated LLM writes with."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

__all__ = ["FORMATS", "WORDS"]

#: Short readable words the simulated LLM writes with.
WORDS: tuple[str, ...] = (
    "apple", "river", "market", "stone", "garden", "cloud", "harbor", "lantern", "meadow", "orbit",
    "pepper", "quiet", "signal", "timber", "velvet", "willow", "amber", "bridge", "canyon", "delta",
    "ember", "forest", "glacier", "hollow", "island", "jasmine", "kettle", "ladder", "marble", "needle",
    "olive", "pebble", "quartz", "ribbon", "saddle", "tunnel", "umbrella", "valley", "window", "yarrow",
    "zephyr", "copper", "falcon", "granite", "honey", "indigo", "juniper", "lotus", "maple", "nectar",
    "ocean", "prairie", "rowan", "silver", "thistle", "violet", "walnut", "cedar", "dune", "fern",
)  # fmt: skip


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2020, 2025):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"


#: Generators for the string formats the sim can guarantee, by JSON Schema ``format`` name.
FORMATS: dict[str, Callable[[random.Random], str]] = {
    "date-time": lambda r: f"{_date(r)}T{_time(r)}",
    "date": _date,
    "time": _time,
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
    "email": lambda r: f"{r.choice(WORDS)}.{r.choice(WORDS)}@example.org",
    "uri": lambda r: f"https://example.org/{r.choice(WORDS)}",
    "iri": lambda r: f"https://example.org/{r.choice(WORDS)}",
    "uri-reference": lambda r: f"https://example.org/{r.choice(WORDS)}",
    "hostname": lambda r: f"{r.choice(WORDS)}.example.org",
    "ipv4": lambda r: f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
    "ipv6": lambda r: f"fd00::{r.randint(1, 0xFFFF):x}",
    "duration": lambda r: f"PT{r.randint(1, 59)}M",
    "password": lambda r: r.choice(WORDS),
    "binary": lambda r: r.choice(WORDS),
}
