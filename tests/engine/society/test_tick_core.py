"""The tick transaction as pure event sequences: a tick, a resumed run's next tick, budget stops, env loss."""

from __future__ import annotations

from datetime import datetime, timedelta

from engine.env.control import BeginTick, EndTick
from engine.llm.budget import Allowance, Usage
from engine.run_progress import RunPhase
from engine.run_status import RunStatus
from engine.society.tick_core import (
    MAX_ENV_RECOVERIES,
    BatchesRan,
    BeginEnv,
    Commit,
    Committed,
    Done,
    EndEnv,
    EnvEnded,
    EnvLost,
    Report,
    Restart,
    Restarted,
    Started,
    Stop,
    TickCore,
    TickState,
)

T0 = datetime(2026, 1, 1, 8)
AGENTS = tuple(range(40))


def core(state: TickState | None = None, **changes) -> TickCore:
    options = {"tick": 600, "agent_ids": AGENTS, "batch_size": 16, "run_id": "r", **changes}
    return TickCore(state or TickState(txn=0, step_count=0, current_time=T0), **options)


def kinds(commands) -> list[str]:
    return [type(c).__name__ for c in commands]


def test_a_tick_begins_the_env_runs_the_batches_ends_the_env_and_commits():
    tick = core()
    first = tick.handle(Started(slots=2, attempt="a1"))
    assert kinds(first) == ["Report", "BeginEnv", "RunBatches"]
    assert first[0] == Report(first[0].phase) and first[0].phase.name is RunPhase.TICK
    assert first[1] == BeginEnv(BeginTick(T0, None))
    plan = first[2].plan
    assert (plan.txn, plan.step, plan.t_end, plan.attempt) == (1, 1, T0 + timedelta(seconds=600), "a1")
    assert [len(b) for b in plan.batches] == [14, 13, 13] and sum(plan.batches, ()) == AGENTS
    assert plan.allowances == (None, None, None)

    ended = tick.handle(BatchesRan(agents=40, budget_stopped=0))
    assert kinds(ended) == ["Report", "EndEnv"] and ended[0].phase.name is RunPhase.COMMITTING
    assert ended[1] == EndEnv(EndTick(1, 600, plan.t_end, 1, "r", stopped=0))

    [commit] = tick.handle(EnvEnded(refused=0, snapshot="txn_000001"))
    after = TickState(txn=1, step_count=1, current_time=plan.t_end, agent_steps_done=40, env_snapshot="txn_000001")
    assert commit == Commit(after, plan)
    assert tick.handle(Committed()) == [Done(after)]


def test_a_resumed_run_numbers_its_next_tick_after_what_it_committed():
    # Three ticks and two questionnaires committed: the next tick is transaction 6 and society step 4.
    state = TickState(txn=5, step_count=3, current_time=T0 + timedelta(hours=3), agent_steps_done=120, env_snapshot="txn_000005")
    tick = core(state, tick=3600)
    plan = tick.handle(Started(slots=1, attempt="b"))[2].plan
    assert (plan.txn, plan.step, plan.t_end) == (6, 4, T0 + timedelta(hours=4))
    tick.handle(BatchesRan(agents=40, budget_stopped=0))
    [commit] = tick.handle(EnvEnded(refused=0, snapshot="txn_000006"))
    assert commit.state == TickState(6, 4, T0 + timedelta(hours=4), 160, "txn_000006")


def test_the_budget_left_is_shared_over_the_batches_and_the_router_and_a_stop_commits_nothing():
    tick = core(budget=Allowance(calls=10))
    started = tick.handle(Started(slots=1, attempt="c", usage=Usage(calls=4)))
    # 6 calls left over 3 batches and the router: no holder can spend another's share.
    assert [a.calls for a in started[2].plan.allowances] == [2, 2, 1]
    assert started[1] == BeginEnv(BeginTick(T0, Allowance(calls=1)))
    assert tick.handle(BatchesRan(agents=37, budget_stopped=3))[1].end.stopped == 3
    [stop] = tick.handle(EnvEnded(refused=0, snapshot=None))
    assert stop == Stop(RunStatus.BUDGET_EXHAUSTED, "3 agent-steps and 0 router calls of step 1 wait for more budget",
                        "budget exhausted during step 1: 3 agent-steps not run, 0 router calls refused", budget=True)


def test_router_calls_the_budget_refused_stop_the_tick_too():
    tick = core(budget=Allowance(calls=100))
    tick.handle(Started(slots=1, attempt="d", usage=Usage()))
    tick.handle(BatchesRan(agents=40, budget_stopped=0))
    [stop] = tick.handle(EnvEnded(refused=2, snapshot=None))
    assert isinstance(stop, Stop) and stop.budget and stop.status is RunStatus.BUDGET_EXHAUSTED


def test_a_lost_env_restarts_from_the_committed_snapshot_and_the_tick_runs_again_as_the_same_transaction():
    state = TickState(txn=2, step_count=2, current_time=T0, env_snapshot="txn_000002")
    tick = core(state, batch_size=40)
    first = tick.handle(Started(slots=2, attempt="e1"))[2].plan
    assert tick.handle(EnvLost("worker died")) == [Restart("txn_000002")]
    again = tick.handle(Restarted(slots=1, attempt="e2"))
    second = again[2].plan
    assert (second.txn, second.step, second.attempt) == (first.txn, first.step, "e2")
    assert len(first.batches) == 2 and len(second.batches) == 1  # planned for the cluster as it is now
    tick.handle(BatchesRan(agents=40, budget_stopped=0))
    [commit] = tick.handle(EnvEnded(refused=0, snapshot="txn_000003"))
    assert commit.state.txn == 3 and commit.state.agent_steps_done == 40  # the lost attempt's agents count once


def test_a_lost_env_during_the_env_step_also_restarts():
    tick = core()
    tick.handle(Started(slots=1, attempt="f1"))
    tick.handle(BatchesRan(agents=25, budget_stopped=0))
    assert tick.handle(EnvLost("gone at end_tick")) == [Restart(None)]
    tick.handle(Restarted(slots=1, attempt="f2"))
    tick.handle(BatchesRan(agents=40, budget_stopped=0))
    assert tick.handle(EnvEnded(refused=0, snapshot="s"))[0].state.agent_steps_done == 40


def test_the_run_fails_once_the_env_is_lost_more_often_than_recoveries_allow():
    tick = core()
    tick.handle(Started(slots=1, attempt="g0"))
    for attempt in range(MAX_ENV_RECOVERIES):
        assert kinds(tick.handle(EnvLost("again"))) == ["Restart"]
        tick.handle(Restarted(slots=1, attempt=f"g{attempt + 1}"))
    [stop] = tick.handle(EnvLost("again"))
    assert stop == Stop(None, None, f"the env actor was lost {MAX_ENV_RECOVERIES + 1} times in one transaction: again")
    assert tick.recoveries == MAX_ENV_RECOVERIES


def test_every_command_sequence_ends_in_done_or_stop():
    for budget_stopped, refused, ending in ((0, 0, Done), (1, 0, Stop), (0, 1, Stop)):
        tick = core(budget=Allowance(calls=50))
        commands = tick.handle(Started(slots=2, attempt="h", usage=Usage()))
        events = [BatchesRan(40 - budget_stopped, budget_stopped), EnvEnded(refused, "s"), Committed()]
        while not isinstance(commands[-1], Done | Stop):
            commands = tick.handle(events.pop(0))
        assert isinstance(commands[-1], ending)
