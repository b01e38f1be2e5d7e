"""Spans record durations, nesting and errors, in sync and async code."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.trace import Span, SpanRef, TraceRecorder, current_span, new_trace_id


def test_span_records_duration_name_and_attrs() -> None:
    rec = TraceRecorder()
    before_ms, outer_start = time.time() * 1000, time.perf_counter()
    with rec.span("tick", step=3) as active:
        time.sleep(0.02)
        active.set(agents=10)
    outer_ms, after_ms = (time.perf_counter() - outer_start) * 1000, time.time() * 1000
    (span,) = rec.spans()
    assert span.name == "tick"
    assert span.status == "ok"
    assert span.parent_id is None
    assert span.attrs == {"step": 3, "agents": 10}
    # Within what the test measured around the span, however long the machine took (time.time may step: 1 ms slack).
    assert 15 <= span.duration_ms <= outer_ms
    assert before_ms - 1 <= span.start_unix_ms <= after_ms + 1
    assert len(span.trace_id) == 32 and len(span.span_id) == 16


def test_nested_spans_get_parent_ids_and_share_the_trace() -> None:
    rec = TraceRecorder()
    with rec.span("tick") as tick:
        with rec.span("batch") as batch, rec.span("llm.call"):
            pass
        with rec.span("env.step"):
            pass
    spans = {s.name: s for s in rec.spans()}
    assert [s.name for s in rec.spans()] == ["llm.call", "batch", "env.step", "tick"]
    assert spans["batch"].parent_id == tick.span_id
    assert spans["llm.call"].parent_id == batch.span_id
    assert spans["env.step"].parent_id == tick.span_id
    assert {s.trace_id for s in spans.values()} == {tick.trace_id}
    assert current_span() is None


def test_error_in_body_is_recorded_and_reraised() -> None:
    rec = TraceRecorder()
    with pytest.raises(KeyError), rec.span("outer"), rec.span("inner", tool="move"):
        raise KeyError("agent-7")
    inner, outer = rec.spans()
    assert inner.status == "error" and outer.status == "error"
    assert inner.attrs == {"tool": "move", "error": "KeyError: 'agent-7'"}
    assert current_span() is None


def test_explicit_parent_ref_and_trace_id() -> None:
    rec = TraceRecorder()
    trace_id = new_trace_id()
    parent = SpanRef(trace_id, "00000000000000aa")
    with rec.span("batch", parent=parent), rec.span("agent"):
        pass
    with rec.span("root", trace_id=trace_id):
        pass
    agent, batch, root = rec.spans()
    assert batch.parent_id == "00000000000000aa" and batch.trace_id == trace_id
    assert agent.parent_id == batch.span_id
    assert root.parent_id is None and root.trace_id == trace_id
    with pytest.raises(ValueError, match="differs"):
        rec.span("x", trace_id=new_trace_id(), parent=parent)


def test_explicit_other_trace_starts_a_new_root_inside_an_open_span() -> None:
    rec = TraceRecorder()
    other = new_trace_id()
    with rec.span("outer"), rec.span("elsewhere", trace_id=other):
        pass
    elsewhere, outer = rec.spans()
    assert elsewhere.trace_id == other and elsewhere.parent_id is None
    assert outer.trace_id != other


async def test_concurrent_async_tasks_keep_their_own_parents() -> None:
    rec = TraceRecorder()

    async def agent(i: int) -> None:
        async with rec.span("agent", i=i):
            await asyncio.sleep(0.01 * (3 - i))
            with rec.span("llm.call", i=i):
                await asyncio.sleep(0.005)

    with rec.span("batch") as batch:
        await asyncio.gather(*(agent(i) for i in range(3)))
    spans = rec.spans()
    agents = {s.attrs["i"]: s for s in spans if s.name == "agent"}
    calls = [s for s in spans if s.name == "llm.call"]
    assert len(calls) == 3
    for call in calls:
        assert call.parent_id == agents[call.attrs["i"]].span_id
    assert all(a.parent_id == batch.span_id for a in agents.values())
    assert all(a.duration_ms >= 5 for a in agents.values())


def test_drain_returns_and_forgets() -> None:
    rec = TraceRecorder()
    with rec.span("a"):
        pass
    drained = rec.drain()
    assert [s.name for s in drained] == ["a"]
    assert rec.spans() == [] and rec.drain() == []


def test_span_dict_round_trip() -> None:
    span = Span("t" * 32, "s" * 16, None, "x", 1.0, 2.0, "ok", {"k": [1]})
    assert Span.from_dict(span.to_dict()) == span
    assert span.ref == SpanRef("t" * 32, "s" * 16)
