"""step_agent_batch in-process: journals, isolation, and how a batch ends when an agent-step crashes."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta

import pyarrow.parquet as pq
import pytest

from engine.agent.journal import StepJournal
from engine.agent.person import PersonAgent
from engine.agent.registry import register_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import workspace_path
from engine.env.actor import EnvRouterConfig, build_router
from engine.errors import RunError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel
from engine.society.batch import step_agent_batch
from engine.society.workspaces.common import BatchJob
from engine.storage.run_layout import run_store
from engine.storage.staging import commit_staged

T0 = datetime(2026, 1, 1, 8, 0)


class CrashingPerson(PersonAgent):
    """A person whose step hits a bug (not an agent error the batch isolates)."""

    async def step(self, tick: int, t: datetime):  # noqa: ANN201
        raise RuntimeError("bug in a custom agent")


register_agent(CrashingPerson)


class DiskFullPerson(PersonAgent):
    """A person whose workspace write fails halfway (after the step's records were appended)."""

    async def to_workspace(self, workspace_path=None) -> None:  # noqa: ANN001
        await super().to_workspace(workspace_path)
        raise OSError("No space left on device")


register_agent(DiskFullPerson)


class RememberingPerson(PersonAgent):
    """A person whose model adds a todo, then finishes with a memory (two calls per step)."""

    def _bind_services(self, service_proxy):  # noqa: ANN001, ANN202
        super()._bind_services(service_proxy)
        step = self._step_count + 1
        self._dispatcher = MeteredModel(ScriptedModel([
            {"thought": "plan", "action": {"tool": "todo_add", "arguments": {"title": f"errand {step}"}}, "finish": False},
            {"thought": "done", "action": {"tool": "finish", "arguments": {
                "summary": "ok", "memories": [{"kind": "fact", "text": f"step {step} happened"}]}}, "finish": True},
        ]), self.meter, caller=f"agent:{self.id}")


register_agent(RememberingPerson)


async def _setup(tmp_path, types):  # noqa: ANN001, ANN202
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react",
                                          coder=LLMClient(role="coder", model="sim/default:batch")))
    await router.init(T0, list(range(len(types))))
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:batch")}, run_dir=tmp_path, run_id="b")
    for agent_id, cls in enumerate(types):
        cls.create(workspace_path(tmp_path / "agents", agent_id), agent_id=agent_id, profile={"name": f"P{agent_id}"}, config={})
    return proxy


def _job(proxy, ids, step=1, attempt="a1", text_allowance=None):  # noqa: ANN001, ANN202
    return BatchJob(tuple(ids), step, 0, 3600, T0 + timedelta(hours=step), proxy, None, step, attempt,
                    text_allowance=text_allowance)


def _rows(run, keys, dataset):  # noqa: ANN001, ANN202
    (key,) = [k for k in keys if f"/{dataset}/" in k]
    return pq.read_table(io.BytesIO(run_store(run).get(key))).to_pylist()


async def test_a_batch_journals_commits_and_replays_only_within_its_attempt(tmp_path):
    proxy = await _setup(tmp_path, [PersonAgent, PersonAgent])
    first = await step_agent_batch(_job(proxy, [0, 1]))
    assert first.agents == 2 and first.replayed == 0 and first.staged
    assert all(StepJournal(workspace_path(tmp_path / "agents", i)).has(1) for i in (0, 1))

    again = await step_agent_batch(_job(proxy, [0, 1]))  # Dask retried the task: same attempt
    assert again.replayed == 2 and again.rolled_back == 0

    rerun = await step_agent_batch(_job(proxy, [0, 1], attempt="a2"))  # the tick re-run on restored state
    assert rerun.replayed == 0 and rerun.rolled_back == 2
    commit_staged(run_store(tmp_path), rerun.staged)

    await step_agent_batch(_job(proxy, [0, 1], step=2, attempt="b1"))  # tick 1 committed: its journals go
    assert StepJournal(workspace_path(tmp_path / "agents", 0)).steps() == [2]


async def test_an_agent_step_that_crashes_ends_the_batch_with_its_traceback(tmp_path):
    proxy = await _setup(tmp_path, [PersonAgent, CrashingPerson])
    with pytest.raises(RunError, match="RuntimeError: bug in a custom agent") as caught:
        await step_agent_batch(_job(proxy, [0, 1]))
    assert "CrashingPerson" in str(caught.value) or "test_batch.py" in str(caught.value)
    assert not list(tmp_path.rglob("*.staged-*"))  # the batch wrote no shard


async def test_a_step_whose_workspace_write_fails_is_undone_and_recorded_as_an_error(tmp_path):
    proxy = await _setup(tmp_path, [DiskFullPerson])
    ws = workspace_path(tmp_path / "agents", 0)
    before = {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*") if p.is_file() and not p.is_symlink()}
    result = await step_agent_batch(_job(proxy, [0]))
    assert result.statuses == {"error": 1}
    after = {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*")
             if p.is_file() and not p.is_symlink() and ".runtime/txn" not in str(p)}
    assert after == before  # the half-written step is gone: the agent simply missed the tick


async def test_memory_and_transcript_rows_of_a_step_are_re_emitted_unchanged_by_a_retried_batch(tmp_path):
    proxy = await _setup(tmp_path, [RememberingPerson, RememberingPerson])
    first = await step_agent_batch(_job(proxy, [0, 1], text_allowance=10**6))
    memory = _rows(tmp_path, first.staged, "agent_memory")
    assert [(r["agent_id"], r["step"]) for r in memory] == [(0, 1), (1, 1)]
    (episode,) = json.loads(memory[0]["episodes"])
    assert (episode["kind"], episode["text"], episode["step"]) == ("fact", "step 1 happened", 1)
    assert [item["title"] for item in json.loads(memory[0]["todo"])["items"]] == ["errand 1"]
    transcripts = _rows(tmp_path, first.staged, "transcripts")
    assert [r["call_id"] for r in transcripts] == ["1/tick/agent:0/0", "1/tick/agent:0/1", "1/tick/agent:1/0", "1/tick/agent:1/1"]
    assert [r["tool"] for r in transcripts] == ["todo_add", "finish"] * 2
    assert first.transcripts.rows == 4 and first.transcripts.dropped == 0

    again = await step_agent_batch(_job(proxy, [0, 1], text_allowance=10**6))  # Dask retried the task: same attempt
    assert again.replayed == 2
    for dataset in ("agent_memory", "transcripts", "llm_calls"):
        assert _rows(tmp_path, again.staged, dataset) == _rows(tmp_path, first.staged, dataset), dataset
    rerun = await step_agent_batch(_job(proxy, [0, 1], attempt="a2", text_allowance=10**6))  # the tick re-run
    assert rerun.rolled_back == 2
    assert [r["call_id"] for r in _rows(tmp_path, rerun.staged, "llm_calls")] == [r["call_id"] for r in transcripts]
    assert _rows(tmp_path, rerun.staged, "agent_memory") == memory  # the undone step's episodes and todo are not kept twice
    commit_staged(run_store(tmp_path), rerun.staged)

    second = await step_agent_batch(_job(proxy, [0, 1], step=2, attempt="b1", text_allowance=10**6))
    memory = _rows(tmp_path, second.staged, "agent_memory")
    assert [e["text"] for e in json.loads(memory[0]["episodes"])] == ["step 2 happened"]  # only the step's own
    assert [item["title"] for item in json.loads(memory[0]["todo"])["items"]] == ["errand 1", "errand 2"]
