"""AgentSociety used directly, as the seed's users write it: async with, run, questionnaire, resume (in-process shell)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest

from engine.env.actor import EnvRouterConfig
from engine.errors import BudgetExhaustedError
from engine.llm.budget import Allowance
from engine.llm.client import LLMClient
from engine.society import AgentSociety, QuestionItem, Questionnaire
from engine.society.shells import InProcessEnvHost
from engine.storage.reader import ReplayReader

START = datetime(2026, 5, 1, 9, 0)
SPECS = [{"id": i, "type": "PersonAgent", "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 2}} for i in range(5)]


def _society(shell, run_dir, run_id="api", **extra):  # noqa: ANN001, ANN202
    llm = {"default": LLMClient(model="sim/default:api"), "coder": LLMClient(role="coder", model="sim/default:api")}
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", coder=llm["coder"], run_dir=run_dir)
    env = shell.env_host(config, start_t=START, agent_ids=[s["id"] for s in SPECS], run_id=run_id)
    return dict(env=env, llm=llm, shell=shell, run_id=run_id, batch_size=2, **extra)


def _control(society: AgentSociety) -> list[str]:
    """Every control method of the env router the driver calls, in order (each a round trip on a Dask actor)."""
    assert isinstance(society.env, InProcessEnvHost)
    return society.env.calls


async def test_run_questionnaire_and_resume_through_the_society_api(shell, tmp_path):
    run = tmp_path / "run"
    society = AgentSociety(SPECS, start_t=START, run_dir=run, **_society(shell, run))
    async with society:
        await society.run(num_steps=2, tick=1800)
        assert society.step_count == 2 and society.current_time == datetime(2026, 5, 1, 10, 0)
        assert society.agent_ids == [0, 1, 2, 3, 4] and society.agent_specs[3]["profile"] == {"name": "P3"}
        response = await society.run_questionnaire(
            Questionnaire(questionnaire_id="q", questions=(QuestionItem(id="n", prompt="A number 1-3?", response_type="integer", min=1, max=3),)),
            target_agent_ids=[1, 4],
        )
        assert sorted(a.agent_id for a in response.answers) == [1, 4]
        assert society.txn == 3

    resumed = await AgentSociety.from_workspace(run, **_society(shell, run))
    assert (resumed.step_count, resumed.txn, resumed.current_time) == (2, 3, datetime(2026, 5, 1, 10, 0))
    async with resumed:
        await resumed.step(1800)
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT step, count(*) AS n FROM actions GROUP BY step ORDER BY step").to_pylist()
        assert rows == [{"step": 1, "n": 5}, {"step": 2, "n": 5}, {"step": 3, "n": 5}]
        assert reader.count("questionnaire_answers") == 2


@pytest.mark.parametrize("budget", [None, Allowance(calls=100_000)], ids=["unbudgeted", "budgeted"])
async def test_a_tick_an_ask_and_an_intervention_each_cost_the_driver_two_actor_round_trips_at_most(
        shell, tmp_path, budget):
    run = tmp_path / "run"
    async with AgentSociety(SPECS, start_t=START, run_dir=run, **_society(shell, run, f"trips-{budget is None}", budget=budget)) as society:
        steps: list[Callable[[], Awaitable[Any]]] = [
            lambda: society.step(1800), lambda: society.step(1800),
            lambda: society.ask("How many people are there?"), lambda: society.intervene("Tell everyone the park is closed."),
        ]
        per_step = []
        actor_calls = _control(society)  # the driver's control calls (not the agents' and the helper's env requests)
        for step in steps:
            actor_calls.clear()
            await step()
            per_step.append(list(actor_calls))
        assert society.txn == 4
    opened = ["begin_tick"] if budget is not None else []  # a consult without a budget has nothing to open
    assert per_step == [["begin_tick", "end_tick"]] * 2 + [[*opened, "end_consult"]] * 2


async def test_a_tick_the_budget_stops_takes_two_round_trips_and_does_not_step_the_env(shell, tmp_path):
    run = tmp_path / "run"
    async with AgentSociety(SPECS, start_t=START, run_dir=run, **_society(shell, run, "stopped", budget=Allowance(calls=0))) as society:
        actor_calls = _control(society)
        actor_calls.clear()
        with pytest.raises(BudgetExhaustedError, match="agent-steps not run"):
            await society.step(1800)
        assert actor_calls == ["begin_tick", "end_tick"]
        assert (society.txn, society.step_count) == (0, 0)
    assert not (run / "env" / "_snapshots").exists()  # the env did not step: no snapshot staged for the tick
