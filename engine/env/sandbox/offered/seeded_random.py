"""``random`` for sandboxed code, seeded per request: the same request draws the same numbers.

Each execution gets a generator seeded with the request's seed (the router derives it from the run
seed and the request, see ``CodeGenRouter``). Nothing here reads the operating system's entropy:
``random.seed()`` without a value goes back to the request's seed, and ``random.Random()`` without
one is seeded from the execution's generator, so a second generator is reproducible too. The
underlying ``random.Random`` is out of reach (no ``getstate``/``setstate``, no ``SystemRandom``),
and the draws that allocate at will (``choices(k=...)``, ``getrandbits``, ``randbytes``) are bounded.
"""

from __future__ import annotations

import random as _random
from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_DRAW", "RANDOM", "SandboxRandom"]

#: The most items (``choices``, ``sample``), bits (``getrandbits``) or bytes (``randbytes``) of one draw.
MAX_DRAW = 1_000_000
#: Methods passed through to the generator as they are.
_PLAIN = ("random", "uniform", "randint", "randrange", "choice", "shuffle", "gauss", "normalvariate",
          "lognormvariate", "expovariate", "vonmisesvariate", "gammavariate", "triangular", "betavariate",
          "paretovariate", "weibullvariate")  # fmt: skip
#: Every name the ``random`` proxy holds.
RANDOM = (*_PLAIN, "choices", "sample", "getrandbits", "randbytes", "seed", "Random")
_SEEDS = (int, float, str, bytes)


def _too_big(what: str, n: Any) -> ValueError:
    return ValueError(f"{what} of {n} is too large for the sandbox (at most {MAX_DRAW})")


class SandboxRandom:
    """One seeded generator; the ``random`` of an execution and what ``random.Random(...)`` returns.

    Args:
        seed: the seed (an int, float, str or bytes; the same seed gives the same draws).
    """

    __slots__ = ("_rng", "_seed", *_PLAIN)

    def __init__(self, seed: int | float | str | bytes) -> None:
        if isinstance(seed, bool) or not isinstance(seed, _SEEDS):
            raise TypeError("the sandbox's random is seeded with an int, float, str or bytes")
        self._seed = seed
        self._rng = _random.Random(seed)
        for name in _PLAIN:
            object.__setattr__(self, name, getattr(self._rng, name))

    def __repr__(self) -> str:
        return "<random generator>"

    def seed(self, a: int | float | str | bytes | None = None) -> None:
        """Reseed with ``a``; without a value, go back to the seed this generator started with."""
        if a is None:
            a = self._seed
        if isinstance(a, bool) or not isinstance(a, _SEEDS):
            raise TypeError("random.seed() takes an int, float, str or bytes")
        self._rng.seed(a)

    def Random(self, seed: int | float | str | bytes | None = None) -> SandboxRandom:  # noqa: N802 - the module's name
        """A new generator: seeded with ``seed``, or, without one, from this generator (reproducibly)."""
        return SandboxRandom(self._rng.getrandbits(64) if seed is None else seed)

    def choices(self, population: Sequence[Any], weights: Any = None, *, cum_weights: Any = None, k: int = 1) -> list[Any]:
        if isinstance(k, int) and k > MAX_DRAW:
            raise _too_big("choices(k=...)", k)
        return self._rng.choices(population, weights, cum_weights=cum_weights, k=k)

    def sample(self, population: Sequence[Any], k: int, *, counts: Any = None) -> list[Any]:
        if isinstance(k, int) and k > MAX_DRAW:
            raise _too_big("sample(k=...)", k)
        if counts is not None:
            counts = list(counts)
            if sum(c for c in counts if isinstance(c, int)) > MAX_DRAW:
                raise _too_big("sample(counts=...) adding up to a population", sum(counts))
        return self._rng.sample(population, k, counts=counts)

    def getrandbits(self, k: int) -> int:
        if isinstance(k, int) and k > MAX_DRAW:
            raise _too_big("getrandbits", k)
        return self._rng.getrandbits(k)

    def randbytes(self, n: int) -> bytes:
        if isinstance(n, int) and n > MAX_DRAW:
            raise _too_big("randbytes", n)
        return self._rng.randbytes(n)
