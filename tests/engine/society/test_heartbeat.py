"""The heartbeat while the driver waits on something silent (a local model loading): elapsed seconds, then the result."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from engine.society.run.heartbeat import with_heartbeat


async def test_beats_tell_the_seconds_so_far_until_the_work_is_done() -> None:
    beats: list[float] = []
    loaded = asyncio.Event()
    clock = itertools.count(100.0, 1.5).__next__  # a clock that moves 1.5 s per reading

    def beat(seconds: float) -> None:
        beats.append(seconds)
        if len(beats) == 3:
            loaded.set()  # the model is ready after the third beat

    async def load() -> str:
        await loaded.wait()
        return "model loaded"

    assert await with_heartbeat(load(), beat, every_s=0, clock=clock) == "model loaded"
    assert beats == [1.5, 3.0, 4.5]


async def test_work_done_before_the_first_beat_is_not_beaten_and_its_error_comes_through() -> None:
    beats: list[float] = []

    async def ready() -> int:
        return 7

    assert await with_heartbeat(ready(), beats.append, every_s=3600) == 7

    async def broken() -> None:
        raise RuntimeError("llama.cpp exited")

    with pytest.raises(RuntimeError, match="llama.cpp exited"):
        await with_heartbeat(broken(), beats.append, every_s=3600)
    assert beats == []


async def test_cancelling_the_wait_cancels_the_work() -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def load() -> None:
        started.set()
        await never.wait()

    work = asyncio.ensure_future(load())
    waiting = asyncio.ensure_future(with_heartbeat(work, lambda seconds: None, every_s=3600))
    await started.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert work.cancelled()
