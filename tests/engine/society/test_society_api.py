"""AgentSociety used directly, as the seed's users write it: async with, run, questionnaire, resume."""

from __future__ import annotations

from datetime import datetime

from engine.env.actor import EnvRouterConfig
from engine.llm.client import LLMClient
from engine.society import AgentSociety, EnvHost, QuestionItem, Questionnaire
from engine.storage.reader import ReplayReader

START = datetime(2026, 5, 1, 9, 0)
SPECS = [{"id": i, "type": "PersonAgent", "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 2}} for i in range(5)]


def _society(client, run_dir, **extra):  # noqa: ANN001, ANN202
    llm = {"default": LLMClient(model="sim/api"), "coder": LLMClient(role="coder", model="sim/api")}
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", coder=llm["coder"], run_dir=run_dir)
    env = EnvHost(client, config, start_t=START, agent_ids=[s["id"] for s in SPECS], run_id="api")
    return dict(env=env, llm=llm, client=client, run_id="api", batch_size=2, **extra)


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
