"""The engine's loop thread: calls run there, results and errors come back, stop is clean."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engine.engine_loop import EngineLoop
from service.errors import ExperimentBusyError


async def test_calls_run_on_the_engine_thread_and_return_their_results() -> None:
    engine = EngineLoop(name="polis-engine-test")
    try:
        where = await engine.call(lambda: threading.current_thread().name)
        assert where == "polis-engine-test" != threading.current_thread().name

        async def on_its_loop() -> asyncio.AbstractEventLoop:
            return asyncio.get_running_loop()

        assert await engine.run(on_its_loop()) is not asyncio.get_running_loop()
    finally:
        engine.stop()


async def test_an_error_raised_on_the_engine_loop_reaches_the_caller_with_its_type() -> None:
    engine = EngineLoop()

    def busy() -> None:
        raise ExperimentBusyError("e1", "running", "delete")

    try:
        with pytest.raises(ExperimentBusyError, match="cannot delete experiment 'e1'"):
            await engine.call(busy)
    finally:
        engine.stop()


async def test_a_blocking_stretch_on_the_engine_loop_does_not_hold_up_the_callers_loop() -> None:
    engine = EngineLoop()
    release = threading.Event()
    try:
        blocked = asyncio.ensure_future(engine.call(release.wait, 120))  # the engine loop is stuck in a sync wait
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == 5 and not blocked.done()
        release.set()
        assert await blocked is True
    finally:
        engine.stop()
    engine.stop()  # idempotent


def test_stop_closes_the_asynchronous_generators_left_on_the_loop() -> None:
    # What the LLM transport's per-loop keep-alive pool relies on (engine.llm.backends.openai_http).
    closed: list[str] = []

    async def holding():  # noqa: ANN202
        try:
            yield
        finally:
            closed.append("closed on its loop" if threading.current_thread().name == "test-engine" else "elsewhere")

    async def start():  # noqa: ANN202
        generator = holding()
        await generator.__anext__()
        return generator

    loop = EngineLoop(name="test-engine")
    kept = loop.submit(start()).result(timeout=60)
    loop.stop()
    assert closed == ["closed on its loop"]
    del kept
