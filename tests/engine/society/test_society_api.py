"""AgentSociety used directly, as the seed's users write it: async with, run, questionnaire, resume."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest

from engine.env.actor import EnvRouterConfig
from engine.env.detached import DetachedActor
from engine.errors import BudgetExhaustedError
from engine.llm.budget import Allowance
from engine.llm.client import LLMClient
from engine.society import AgentSociety, EnvHost, QuestionItem, Questionnaire
from engine.storage.reader import ReplayReader

START = datetime(2026, 5, 1, 9, 0)
SPECS = [{"id": i, "type": "PersonAgent", "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 2}} for i in range(5)]


def _society(client, run_dir, run_id="api", **extra):  # noqa: ANN001, ANN202
    llm = {"default": LLMClient(model="sim/api"), "coder": LLMClient(role="coder", model="sim/api")}
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", coder=llm["coder"], run_dir=run_dir)
    env = EnvHost(client, config, start_t=START, agent_ids=[s["id"] for s in SPECS], run_id=run_id)
    return dict(env=env, llm=llm, client=client, run_id=run_id, batch_size=2, **extra)


async def test_run_questionnaire_and_resume_through_the_society_api(dask_client, tmp_path):
    run = tmp_path / "run"
    society = AgentSociety(SPECS, start_t=START, run_dir=run, **_society(dask_client, run))
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

    resumed = await AgentSociety.from_workspace(run, **_society(dask_client, run))
    assert (resumed.step_count, resumed.txn, resumed.current_time) == (2, 3, datetime(2026, 5, 1, 10, 0))
    async with resumed:
        await resumed.step(1800)
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT step, count(*) AS n FROM actions GROUP BY step ORDER BY step").to_pylist()
        assert rows == [{"step": 1, "n": 5}, {"step": 2, "n": 5}, {"step": 3, "n": 5}]
        assert reader.count("questionnaire_answers") == 2


@pytest.fixture
def actor_calls(monkeypatch) -> list[str]:  # noqa: ANN001
    """Every env actor method the driver calls, in order: its control of the actor (the agents' and the helper's
    env requests, ``ask_many``, are not control)."""
    calls: list[str] = []
    send = DetachedActor._call

    async def counted(self: DetachedActor, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if method != "ask_many":
            calls.append(method)
        return await send(self, method, args, kwargs)

    monkeypatch.setattr(DetachedActor, "_call", counted)
    return calls


@pytest.mark.parametrize("budget", [None, Allowance(calls=100_000)], ids=["unbudgeted", "budgeted"])
async def test_a_tick_an_ask_and_an_intervention_each_cost_the_driver_two_actor_round_trips_at_most(
        dask_client, tmp_path, actor_calls, budget):
    run = tmp_path / "run"
    async with AgentSociety(SPECS, start_t=START, run_dir=run, **_society(dask_client, run, f"trips-{budget is None}", budget=budget)) as society:
        steps: list[Callable[[], Awaitable[Any]]] = [
            lambda: society.step(1800), lambda: society.step(1800),
            lambda: society.ask("How many people are there?"), lambda: society.intervene("Tell everyone the park is closed."),
        ]
        per_step = []
        for step in steps:
            actor_calls.clear()
            await step()
            per_step.append(list(actor_calls))
        assert society.txn == 4
    opened = ["begin_tick"] if budget is not None else []  # a consult without a budget has nothing to open
    assert per_step == [["begin_tick", "end_tick"]] * 2 + [[*opened, "end_consult"]] * 2


async def test_a_tick_the_budget_stops_takes_two_round_trips_and_does_not_step_the_env(dask_client, tmp_path, actor_calls):
    run = tmp_path / "run"
    async with AgentSociety(SPECS, start_t=START, run_dir=run, **_society(dask_client, run, "stopped", budget=Allowance(calls=0))) as society:
        actor_calls.clear()
        with pytest.raises(BudgetExhaustedError, match="agent-steps not run"):
            await society.step(1800)
        assert actor_calls == ["begin_tick", "end_tick"]
        assert (society.txn, society.step_count) == (0, 0)
    assert not (run / "env" / "_snapshots").exists()  # the env did not step: no snapshot staged for the tick
