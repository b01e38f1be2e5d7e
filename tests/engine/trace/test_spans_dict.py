"""Span.to_dict: every field, attributes copied (a nested value is not shared with the span)."""

from __future__ import annotations

import dataclasses

from engine.trace.spans import Span


def test_to_dict_is_asdict_with_its_own_copy_of_the_attributes() -> None:
    nested = Span("t", "s", None, "env.ask", 1.5, 2.5, "ok", {"agent_id": 3, "tools": ["a"], "ctx": {"k": [1]}})
    flat = Span("t", "s2", "s", "llm.call", 1.0, 0.5, "error", {"error": "x"})
    for span in (nested, flat):
        found = span.to_dict()
        assert found == dataclasses.asdict(span) and found["attrs"] is not span.attrs
    copied = nested.to_dict()
    copied["attrs"]["ctx"]["k"].append(2)
    assert nested.attrs["ctx"]["k"] == [1]
