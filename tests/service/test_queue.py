"""FairQueue, driven directly: global slots, per-owner limits, round-robin between owners."""

from __future__ import annotations

import pytest

from service.queue import FairQueue


def _drain(queue: FairQueue) -> list[str]:
    """Run everything to the end, one finish at a time (oldest running first); the start order."""
    order = queue.take()
    running = list(order)
    while running:
        queue.finish(running.pop(0))
        started = queue.take()
        order += started
        running += started
    return order


def test_slots_go_round_robin_between_owners_with_one_slot() -> None:
    queue = FairQueue(1, lambda owner: 10)
    for experiment in ("a1", "a2", "a3"):
        queue.push(experiment, "A")
    queue.push("b1", "B")
    queue.push("b2", "B")
    assert _drain(queue) == ["a1", "b1", "a2", "b2", "a3"]


def test_an_owner_arriving_after_a_long_sweep_gets_the_next_slot() -> None:
    queue = FairQueue(2, lambda owner: 10)
    for i in range(5):
        queue.push(f"a{i}", "A")
    assert queue.take() == ["a0", "a1"]
    queue.push("b0", "B")
    queue.finish("a0")
    assert queue.take() == ["b0"]
    queue.finish("a1")
    assert queue.take() == ["a2"]


def test_the_first_experiment_starts_at_once_when_a_slot_is_free() -> None:
    queue = FairQueue(2, lambda owner: 2)
    queue.push("x", "A")
    assert queue.take() == ["x"]
    assert queue.running() == ["x"] and len(queue) == 0


def test_an_owners_concurrency_limit_holds_its_experiments_back_but_not_the_others() -> None:
    queue = FairQueue(3, lambda owner: 1 if owner == "A" else 3)
    for experiment in ("a1", "a2", "a3"):
        queue.push(experiment, "A")
    queue.push("b1", "B")
    queue.push("b2", "B")
    assert queue.take() == ["a1", "b1", "b2"]
    assert queue.running_of("A") == 1
    queue.finish("b1")
    assert queue.take() == []  # a free slot, but A is at its limit and B has nothing waiting
    queue.finish("a1")
    assert queue.take() == ["a2"]


def test_a_limit_of_one_runs_an_owners_experiments_one_after_another() -> None:
    queue = FairQueue(4, lambda owner: 1)
    for experiment in ("e1", "e2", "e3"):
        queue.push(experiment, "A")
    assert queue.take() == ["e1"]
    assert queue.take() == []
    queue.finish("e1")
    assert queue.take() == ["e2"]
    assert queue.waiting() == ["e3"]


def test_removing_a_waiting_experiment_means_it_never_starts() -> None:
    queue = FairQueue(1, lambda owner: 1)
    queue.push("a1", "A")
    queue.push("a2", "A")
    queue.push("a3", "A")
    assert queue.take() == ["a1"]
    assert queue.remove("a2") is True
    assert queue.remove("a2") is False
    assert queue.remove("a1") is False  # running, not waiting
    assert _drain_after(queue, "a1") == ["a3"]


def _drain_after(queue: FairQueue, running: str) -> list[str]:
    queue.finish(running)
    return queue.take()


def test_an_experiment_cannot_be_queued_twice() -> None:
    queue = FairQueue(1, lambda owner: 1)
    queue.push("a1", "A")
    with pytest.raises(ValueError, match="already"):
        queue.push("a1", "A")
    queue.take()
    with pytest.raises(ValueError, match="already"):
        queue.push("a1", "A")
    queue.finish("a1")
    queue.push("a1", "A")  # finished: it may be queued again (a resume)
    assert "a1" in queue


def test_the_limit_is_asked_each_time_so_a_changed_quota_applies() -> None:
    limits = {"A": 1}
    queue = FairQueue(3, lambda owner: limits[owner])
    for experiment in ("a1", "a2", "a3"):
        queue.push(experiment, "A")
    assert queue.take() == ["a1"]
    limits["A"] = 3
    assert queue.take() == ["a2", "a3"]


def test_zero_slots_are_refused() -> None:
    with pytest.raises(ValueError, match="max_running"):
        FairQueue(0, lambda owner: 1)
