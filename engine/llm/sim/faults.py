"""Faults the simulated LLM server injects: latency, capacity, 429/500, hangs, malformed bodies.

``SimFaults`` is the frozen configuration; ``FaultPlan`` is the sans-IO core that draws, from its
own seeded random stream, what happens to each call. The server only acts the draws out.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FaultDraw", "FaultPlan", "Outcome", "SimFaults"]

Outcome = Literal["ok", "429", "500", "hang", "malformed"]
#: Injected outcomes in the order their rates stack up on the unit interval.
_INJECTED: tuple[tuple[str, Outcome], ...] = (
    ("rate_429", "429"),
    ("rate_500", "500"),
    ("rate_hang", "hang"),
    ("rate_malformed", "malformed"),
)


class SimFaults(BaseModel):
    """How badly the simulated LLM server behaves.

    The ``rate_*`` fields are probabilities per call and must sum to at most 1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    latency_ms: float = Field(default=0, ge=0, description="mean answer latency")
    jitter_ms: float = Field(default=0, ge=0, description="standard deviation of the latency")
    capacity: int | None = Field(default=None, ge=1, description="max concurrent requests; more get 429 at once")
    rate_429: float = Field(default=0, ge=0, le=1, description="share of calls answered 429")
    rate_500: float = Field(default=0, ge=0, le=1, description="share of calls answered 500")
    rate_hang: float = Field(default=0, ge=0, le=1, description="share of calls that hang for hang_s")
    rate_malformed: float = Field(default=0, ge=0, le=1, description="share of calls answered 200 with a non-JSON body")
    retry_after_s: float = Field(default=1.0, ge=0, description="Retry-After sent with every 429")
    hang_s: float = Field(default=3600, ge=0, description="how long a hanging call sleeps")
    seed: int = Field(default=0, description="seed of the fault stream (independent of the answers' seed)")

    @model_validator(mode="after")
    def _rates_fit(self) -> SimFaults:
        total = self.rate_429 + self.rate_500 + self.rate_hang + self.rate_malformed
        if total > 1 + 1e-9:
            raise ValueError(f"rate_429 + rate_500 + rate_hang + rate_malformed must be <= 1, got {total:g}")
        return self


@dataclass(frozen=True, slots=True)
class FaultDraw:
    """What happens to one call."""

    outcome: Outcome  #: the call's fate
    latency_s: float  #: how long to wait before answering (not used by 429 and hang)


class FaultPlan:
    """Draws each call's outcome and latency from a stream seeded by ``faults.seed``.

    Args:
        faults: the fault configuration.
    """

    def __init__(self, faults: SimFaults) -> None:
        self.faults = faults
        self._rng = random.Random(f"polis-sim-faults:{faults.seed}")
        edges: list[tuple[float, Outcome]] = []
        total = 0.0
        for field, outcome in _INJECTED:
            total += getattr(faults, field)
            edges.append((total, outcome))
        self._edges = tuple(edges)

    def draw(self) -> FaultDraw:
        """The next call's outcome and latency (always two draws, so the stream stays aligned)."""
        u = self._rng.random()
        latency_ms = self._rng.gauss(self.faults.latency_ms, self.faults.jitter_ms)
        outcome: Outcome = next((o for edge, o in self._edges if u < edge), "ok")
        return FaultDraw(outcome, max(0.0, latency_ms) / 1000.0)
