"""The fork's spec: a JSON merge patch over the parent's, checked against the past the two share (sans-IO)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import SpecError
from engine.society.fork.plan import completed_steps_at, fork_spec, merge_patch
from engine.spec import parse_spec

QUESTIONNAIRE = {"type": "questionnaire", "questionnaire_id": "mood",
                 "questions": [{"id": "happy", "prompt": "Happy (1-5)?", "response_type": "integer"}]}


def parent(**changes: Any) -> dict[str, Any]:
    return {
        "name": "p", "seed": 3, "start_time": "2026-03-02T08:00:00",
        "population": [{"count": 4, "profile_template": {"name": "R{i}"}}],
        "environment": {"router": "codegen", "modules": [{"type": "MessagingSpace", "kwargs": {"groups": {"g": [0, 1]}}}]},
        "steps": [{"type": "run", "num_steps": 2}, QUESTIONNAIRE, {"type": "run", "num_steps": 2}],
        **changes,
    }


@pytest.mark.parametrize(("target", "patch", "merged"), [
    # RFC 7386's own examples
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, merged: Any) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == merged
    assert repr(target) == before  # the target is not changed


@pytest.mark.parametrize(("ticks", "done"), [(0, 0), (1, 0), (2, 1), (3, 2), (4, 3)])
def test_completed_steps_count_run_steps_whose_ticks_came_and_steps_before_the_last_of_them(ticks: int, done: int) -> None:
    # steps: run 2, questionnaire, run 2. After tick 2 the questionnaire is still to do: the fork starts
    # right after tick 2's commit, before anything the parent did next.
    assert completed_steps_at(parse_spec(parent()), ticks) == done


def test_no_patch_forks_the_same_spec_and_starts_after_the_ticks() -> None:
    fork = fork_spec(parse_spec(parent()), 3, 4)
    assert fork.spec == parse_spec(parent()) and fork.at_step == 3 and fork.completed_steps == 2


def test_a_patch_may_insert_an_intervention_at_the_fork_tick_and_change_the_future() -> None:
    patch = {"steps": [{"type": "run", "num_steps": 2}, {"type": "intervene", "instruction": "Close the park."},
                       {"type": "run", "num_steps": 3}],
             "environment": {"modules": [{"type": "MessagingSpace", "kwargs": {"groups": {"g": [0, 1, 2]}}}]},
             "llm": {"default": {"options": {"temperature": 0.9}}}, "budget": {"max_calls": 500}}
    fork = fork_spec(parse_spec(parent()), 2, 4, patch)
    assert [s.type for s in fork.spec.steps] == ["run", "intervene", "run"]
    assert fork.completed_steps == 1  # the intervention runs first
    assert fork.spec.environment.modules[0].kwargs == {"groups": {"g": [0, 1, 2]}}
    assert fork.spec.llm.default.options == {"temperature": 0.9} and fork.spec.budget is not None and fork.spec.budget.max_calls == 500
    assert fork.spec.name == "p" and fork.spec.seed == 3  # what the patch does not name stays


@pytest.mark.parametrize(("at_step", "ticks_done", "patch", "path"), [
    (5, 4, None, "at_step"),
    (-1, 4, None, "at_step"),
    (3, 2, None, "at_step"),  # past what the parent committed
    (2, 4, {"population": [{"count": 5}]}, "population"),
    (2, 4, {"environment": {"modules": [{"type": "EconomySpace"}]}}, "environment.modules"),
    (2, 4, {"environment": {"router": "react"}}, "environment.router"),
    (2, 4, {"network": {"layers": {"follow": {"generate": {"model": "erdos_renyi", "p": 0.5}}}}}, "network"),
    (2, 4, {"start_time": "2026-03-03T08:00:00"}, "start_time"),
    (2, 4, {"steps": [{"type": "run", "num_steps": 1}]}, "steps"),  # fewer ticks than the fork starts after
    (3, 4, {"steps": [{"type": "run", "num_steps": 4}]}, "steps"),  # drops the questionnaire the parent ran after tick 2
    (2, 4, {"steps": [{"type": "run", "num_steps": 2, "tick": 60}, {"type": "run", "num_steps": 2}]}, "steps"),  # tick length
    (2, 4, {"steps": [{"type": "nope"}]}, "steps.0"),
    (2, 4, {"sweep": {"grid": {"batch_size": [1, 2]}}}, "sweep"),
])
def test_a_patch_that_rewrites_the_past_or_breaks_the_spec_is_refused_with_its_path(
        at_step: int, ticks_done: int, patch: dict[str, Any] | None, path: str) -> None:
    with pytest.raises(SpecError) as caught:
        fork_spec(parse_spec(parent()), at_step, ticks_done, patch)
    assert caught.value.path.startswith(path), (caught.value.path, str(caught.value))


def test_the_same_past_in_other_words_is_accepted() -> None:
    # run 4 split as run 2 + run 2 around nothing: the same ticks with the same lengths
    spec = parse_spec(parent(steps=[{"type": "run", "num_steps": 4}]))
    fork = fork_spec(spec, 2, 4, {"steps": [{"type": "run", "num_steps": 2}, {"type": "run", "num_steps": 2}]})
    assert fork.completed_steps == 1


def test_a_sweep_root_cannot_be_forked() -> None:
    with pytest.raises(SpecError, match="fork one of its cells"):
        fork_spec(parse_spec(parent(sweep={"grid": {"batch_size": [1, 2]}})), 1, 2)
