"""How a tick's agents are split into batch futures: the plan (sans-IO), then a run's batching in process (the
in-process shell's slots). A cluster's task slots and a run spread over its workers are in ``tests/engine/society/shells/test_on_dask.py``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.society.run.runner import run_experiment
from engine.society.tick_core import MIN_SPREAD, plan_batches
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

# ---- plan_batches (sans-IO) ----------------------------------------------------------------------------


def sizes(batches):
    return [len(b) for b in batches]


def test_a_run_smaller_than_a_batch_gets_one_batch_per_task_slot():
    assert sizes(plan_batches(list(range(200)), 256, slots=4)) == [50, 50, 50, 50]


def test_without_spare_slots_the_count_is_n_over_batch_size_and_the_sizes_are_even():
    assert sizes(plan_batches(list(range(1000)), 256)) == [250, 250, 250, 250]
    assert sizes(plan_batches(list(range(1000)), 256, slots=2)) == [250, 250, 250, 250]
    assert sizes(plan_batches(list(range(7)), 3)) == [3, 2, 2]


def test_spreading_stops_at_min_spread_agents_a_batch():
    assert sizes(plan_batches(list(range(MIN_SPREAD * 2 - 1)), 256, slots=4)) == [MIN_SPREAD * 2 - 1]
    assert sizes(plan_batches(list(range(MIN_SPREAD * 2)), 256, slots=4)) == [MIN_SPREAD, MIN_SPREAD]
    # a small batch_size asked for by the spec is kept: the floor only limits spreading
    assert sizes(plan_batches(list(range(6)), 2, slots=8)) == [2, 2, 2]


def test_no_agents_no_batches():
    assert plan_batches([], 256, slots=4) == []


@settings(deadline=None)  # hypothesis's 200 ms per example is a speed bound: a busy machine stalls past it at random
@given(n=st.integers(0, 3000), batch_size=st.integers(1, 400), slots=st.integers(1, 64))
def test_every_plan_keeps_order_bounds_and_balance(n, batch_size, slots):
    ids = [i * 3 + 1 for i in range(n)]
    batches = plan_batches(ids, batch_size, slots)
    assert [i for batch in batches for i in batch] == ids
    assert all(0 < len(b) <= batch_size for b in batches)
    assert max(sizes(batches), default=0) - min(sizes(batches), default=0) <= 1
    assert len(batches) == (max(-(-n // batch_size), min(slots, n // MIN_SPREAD)) if n else 0)


# ---- a run's batching ----------------------------------------------------------------------------------


def spread_spec(**changes):
    spec = {
        "name": "spread",
        "seed": 5,
        "population": [{"count": 64, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "max_router_steps": 1},
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
    }
    spec.update(changes)
    return parse_spec(spec)


async def test_max_workers_caps_the_spread_and_the_replay_is_the_same_whatever_the_batching(shell, tmp_path):
    assert await shell.slots() > 1  # room to spread
    runs = {}
    for name, changes in {"spread": {}, "one": {"max_workers": 1}}.items():
        summary = await run_experiment(spread_spec(**changes), tmp_path / name, shell)
        assert summary.status == "completed", summary.error
        with ReplayReader(tmp_path / name) as reader:
            runs[name] = reader.query("SELECT agent_id, step, status, tools_called, summary, llm_calls FROM actions "
                                      "ORDER BY step, agent_id").to_pylist()
    assert len(list((tmp_path / "one" / "replay" / "actions").glob("step_000001-*.parquet"))) == 1
    assert len(list((tmp_path / "spread" / "replay" / "actions").glob("step_000001-*.parquet"))) > 1
    assert len(runs["one"]) == 128
    assert runs["spread"] == runs["one"]
