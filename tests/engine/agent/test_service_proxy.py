"""ServiceProxy carries the trace and replay handles; agents bind the trace in ``_bind_services``."""

from __future__ import annotations

import pickle
from datetime import datetime
from pathlib import Path

import cloudpickle

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import workspace_path
from engine.env.actor import EnvRouterConfig, build_router
from engine.llm.client import LLMClient
from engine.storage.replay import ReplayWriter
from engine.trace import TraceHandle, read_trace_shard

T1 = datetime(2024, 1, 1, 8, 15)


def _proxy(run_dir: Path | None) -> ServiceProxy:
    # react: its tool calls run in this process (codegen would start a sandbox process for the agent's ask_env)
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    return ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:test", seed=3)}, run_dir=run_dir)


def test_a_proxy_with_a_run_directory_has_trace_and_replay_handles_under_it(tmp_path: Path) -> None:
    proxy = _proxy(tmp_path)
    assert proxy.trace == TraceHandle(tmp_path)
    assert isinstance(proxy.replay, ReplayWriter) and proxy.replay.run == tmp_path
    assert proxy.replay.in_txn(4).txn == 4 and proxy.replay.txn is None
    assert _proxy(None).trace is None and _proxy(None).replay is None


def test_a_pickled_proxy_carries_the_directories_and_none_of_the_spans(tmp_path: Path) -> None:
    proxy = ServiceProxy(env=None, run_dir=tmp_path)
    assert proxy.trace is not None
    with proxy.trace.recorder.span("driver.work"):
        pass
    for dumps in (pickle.dumps, cloudpickle.dumps):
        copy: ServiceProxy = pickle.loads(dumps(proxy))
        assert copy.trace is not None and copy.replay is not None
        assert copy.trace.run == tmp_path and copy.replay.run == tmp_path
        assert copy.trace.recorder.spans() == [] and copy.trace.recorder is not proxy.trace.recorder
    assert [s.name for s in proxy.trace.recorder.spans()] == ["driver.work"]


def test_each_task_records_and_writes_its_own_spans(tmp_path: Path) -> None:
    proxy = ServiceProxy(env=None, run_dir=tmp_path)
    first, second = proxy.for_task(), proxy.for_task()
    assert first.trace is not None and second.trace is not None
    with first.trace.recorder.span("batch.a"):
        pass
    key = first.trace.write("step_000001-part_0000", txn=1)
    assert key == "trace/step_000001-part_0000.jsonl.staged-000001"
    assert [s.name for s in read_trace_shard(tmp_path, key)] == ["batch.a"]
    assert first.trace.recorder.spans() == []  # written spans are forgotten
    assert second.trace.write("step_000001-part_0001", txn=1) is None  # it recorded nothing
    assert TraceHandle().write("step_000001-part_0002") is None  # no directory: nothing is written


async def test_an_agent_binds_the_proxys_trace_and_records_its_llm_calls_there(tmp_path: Path) -> None:
    path = workspace_path(tmp_path / "agents", 7)
    PersonAgent.create(path, agent_id=7, profile={"name": "Ada"}, config={"max_react_turns": 2, "tools": ["ask_env"]})
    proxy = _proxy(tmp_path).for_task()
    assert proxy.trace is not None

    agent = await PersonAgent.from_workspace(path, proxy)
    assert agent._trace is proxy.trace.recorder
    outcome = await agent.step(900, T1)

    names = [s.name for s in proxy.trace.recorder.spans()]
    assert outcome.turns >= 1 and names.count("llm.completion") == agent.meter.calls >= 1
    untraced = await PersonAgent.from_workspace(path, _proxy(None))
    assert untraced._trace is None
