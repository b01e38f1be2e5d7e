"""SchemaMatcher's ``pattern`` checks: schemas come with requests, so their patterns run on RE2."""

from __future__ import annotations

import threading

import pytest

from engine.llm.sim.schema_match import SchemaMatcher, pattern_found


def test_a_catastrophic_pattern_is_checked_in_linear_time() -> None:
    matcher = SchemaMatcher(None)
    answers: list[bool] = []

    def check() -> None:
        answers.append(matcher.ok("a" * 26, {"type": "string", "pattern": "(a|a)*b"}))
        answers.append(matcher.ok("a" * 120, {"type": "string", "pattern": "a*a*a*a*a*a*a*b"}))
        answers.append(matcher.ok({"x" * 200: 1}, {"type": "object", "patternProperties": {"(x+x+)+y": False}}))

    # On a backtracking engine (Python's re) the second takes past 120 s and the third longer than the universe's
    # age, so they never answer within the bound, which only turns that into a failure instead of a hang. (RE2's
    # answer in well under a second is a speed goal: benchmarks/.)
    checking = threading.Thread(target=check, daemon=True)
    checking.start()
    checking.join(timeout=60)
    assert answers == [False, False, True]


def test_patterns_search_unanchored_like_json_schema() -> None:
    assert pattern_found("b+", "abbbc") and not pattern_found("^b", "abc")
    assert pattern_found("é", "café") and pattern_found("^a.c$", "a\ud800c")  # a lone surrogate from JSON


def test_a_pattern_re2_cannot_run_is_a_value_error_the_server_answers_as_invalid() -> None:
    with pytest.raises(ValueError, match="lookahead and lookbehind"):
        SchemaMatcher(None).ok("abc", {"type": "string", "pattern": "(?=a)abc"})
