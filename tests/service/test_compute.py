"""ComputePool: service-side work on threads of its own, refused (not queued) past an owner's or everyone's slots,
holding its slot until the work has really ended, and stopped at its next check by a time limit, a cancelled
request or the service stopping."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from service.admission.limits import Slots
from service.compute import ComputePool, Deadline
from service.errors import TimeLimitError, TooManyRequestsError, WorkCancelledError

#: Only bounds a hang: the events below are set by the test itself.
HANG_S = 30


def pool(per_owner: int = 1, total: int = 2, time_limit: tuple[float, str] | None = None) -> ComputePool:
    return ComputePool(Slots("scorings", (per_owner, "PER_OWNER"), (total, "TOTAL")), "the scoring", time_limit)


async def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.001)


async def test_an_owner_past_its_slots_is_refused_while_another_owner_runs_on_the_pools_own_threads() -> None:
    work, release = pool(), threading.Event()

    def blocked(deadline: Deadline) -> str:
        release.wait(HANG_S)
        return threading.current_thread().name

    first = asyncio.create_task(work.run("a", blocked))
    await until(lambda: work.slots.held("a") == 1)
    with pytest.raises(TooManyRequestsError, match=r"a has 1 scorings open.*PER_OWNER=1"):
        await work.run("a", blocked)
    second = asyncio.create_task(work.run("b", blocked))
    await until(lambda: work.slots.held() == 2)
    with pytest.raises(TooManyRequestsError, match=r"the service has 2 scorings open.*TOTAL=2"):
        await work.run("c", blocked)
    release.set()
    names = await asyncio.gather(first, second)
    assert all(name.startswith("polis-compute") for name in names)  # not the loop's default executor
    assert work.slots.held() == 0
    work.shutdown()


async def test_a_cancelled_request_stops_its_work_at_the_next_check_and_keeps_the_slot_until_then() -> None:
    work, checked, release = pool(), threading.Event(), threading.Event()
    ended: list[BaseException] = []

    def long(deadline: Deadline) -> None:
        release.wait(HANG_S)
        try:
            deadline.check()
        except WorkCancelledError as error:
            ended.append(error)
            raise
        checked.set()

    request = asyncio.create_task(work.run("a", long))
    await until(lambda: work.slots.held("a") == 1)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert work.slots.held("a") == 1  # the thread still runs the work: its slot is not free yet
    release.set()
    await until(lambda: work.slots.held("a") == 0)
    assert len(ended) == 1 and "was cancelled" in str(ended[0]) and not checked.is_set()
    work.shutdown()


async def test_the_time_limit_stops_work_at_its_next_check_naming_the_setting() -> None:
    work = pool(time_limit=(0.001, "POLIS_X_TIMEOUT_S"))

    def slow(deadline: Deadline) -> None:
        time.sleep(0.01)
        deadline.check()

    with pytest.raises(TimeLimitError, match=r"^the scoring ran past its 0.001 s time limit \(POLIS_X_TIMEOUT_S\)"):
        await work.run("a", slow)
    assert work.slots.held() == 0
    work.shutdown()


async def test_shutting_down_stops_running_work_and_takes_no_more() -> None:
    work, started, release = pool(), threading.Event(), threading.Event()

    def long(deadline: Deadline) -> None:
        started.set()
        release.wait(HANG_S)
        deadline.check()

    running = asyncio.create_task(work.run("a", long))
    await until(started.is_set)
    work.shutdown()
    release.set()
    with pytest.raises(WorkCancelledError):
        await running
    with pytest.raises(RuntimeError):
        await work.run("a", long)
    assert work.slots.held() == 0


def test_a_pool_needs_a_total_cap() -> None:
    with pytest.raises(ValueError, match="needs a total cap"):
        ComputePool(Slots("streams", (1, "PER_OWNER")), "the stream")
