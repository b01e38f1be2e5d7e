"""The experiment queue: a fixed number of run slots, shared fairly between owners (sans-IO).

Experiments wait in the queue as ``queued``. A slot goes to the owner served least recently among
those who have an experiment waiting and are under their own concurrency limit; within one owner,
experiments start in the order they were queued. So an owner's sweep of many experiments takes
turns with everyone else's instead of holding every slot: with one slot, owner A queueing three
and B two start as A, B, A, B, A.

:class:`FairQueue` has no asyncio, no clock and no I/O: the submitter feeds it ``push``, ``remove``
and ``finish`` and starts whatever :meth:`FairQueue.take` hands out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FairQueue"]


@dataclass(frozen=True)
class _Waiting:
    experiment_id: str
    owner: str
    seq: int  #: arrival order, over all owners


class FairQueue:
    """Queued experiments, the running ones, and who gets the next slot.

    Args:
        max_running: how many experiments may run at once, over all owners.
        max_concurrent: the most experiments one owner may run at once (the owner's quota).
    """

    def __init__(self, max_running: int, max_concurrent: Callable[[str], int]) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be at least 1, not {max_running}")
        self.max_running = max_running
        self._max_concurrent = max_concurrent
        self._waiting: dict[str, _Waiting] = {}  # insertion order = arrival order
        self._running: dict[str, str] = {}  # experiment id -> owner
        self._last_served: dict[str, int] = {}  # owner -> the turn it was last given a slot
        self._turns = itertools.count(1)
        self._arrivals = itertools.count()

    def push(self, experiment_id: str, owner: str) -> None:
        """Queue an experiment behind its owner's earlier ones.

        Raises:
            ValueError: the experiment is queued or running already.
        """
        if experiment_id in self._waiting or experiment_id in self._running:
            raise ValueError(f"experiment {experiment_id!r} is already in the queue")
        self._waiting[experiment_id] = _Waiting(experiment_id, owner, next(self._arrivals))

    def remove(self, experiment_id: str) -> bool:
        """Take a waiting experiment out of the queue (it was cancelled); False if it is not waiting."""
        return self._waiting.pop(experiment_id, None) is not None

    def finish(self, experiment_id: str) -> None:
        """A running experiment ended; its slot is free (a no-op for one that is not running)."""
        self._running.pop(experiment_id, None)

    def take(self) -> list[str]:
        """Hand out every slot that can be filled now, fairly; the experiments returned count as running.

        Returns:
            The ids to start, in the order their slots were given.
        """
        started: list[str] = []
        while len(self._running) < self.max_running:
            chosen = self._next()
            if chosen is None:
                break
            del self._waiting[chosen.experiment_id]
            self._running[chosen.experiment_id] = chosen.owner
            self._last_served[chosen.owner] = next(self._turns)
            started.append(chosen.experiment_id)
        return started

    def _next(self) -> _Waiting | None:
        # Each owner's first waiting experiment, for owners under their limit; the least recently
        # served owner wins (never served counts as first), and earlier arrival breaks ties.
        heads: dict[str, _Waiting] = {}
        for waiting in self._waiting.values():
            heads.setdefault(waiting.owner, waiting)
        eligible = [head for owner, head in heads.items() if self.running_of(owner) < self._max_concurrent(owner)]
        if not eligible:
            return None
        return min(eligible, key=lambda head: (self._last_served.get(head.owner, 0), head.seq))

    def running_of(self, owner: str) -> int:
        """How many experiments of ``owner`` hold a slot."""
        return sum(1 for running_owner in self._running.values() if running_owner == owner)

    def waiting(self) -> list[str]:
        """The queued experiments' ids, in arrival order (not the order they will start in)."""
        return list(self._waiting)

    def running(self) -> list[str]:
        """The ids of the experiments holding a slot."""
        return list(self._running)

    def __contains__(self, experiment_id: object) -> bool:
        return experiment_id in self._waiting or experiment_id in self._running

    def __len__(self) -> int:
        """How many experiments are waiting."""
        return len(self._waiting)

