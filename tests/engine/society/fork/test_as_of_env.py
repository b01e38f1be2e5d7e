"""An as-of ask's env (in this process; the Dask actor path is the same ``EnvHost`` code): a second env actor restores a kept tick's snapshot into a scratch copy of ``env/``."""

from __future__ import annotations

from pathlib import Path

from engine.env.actor import EnvRouterConfig
from engine.llm.client import LLMClient
from engine.society.fork.as_of import AsOfAgents, find_as_of, start_as_of_env
from engine.society.run.runner import run_experiment
from engine.society.shells import InProcessShell
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout, env_snapshot_kept, run_store
from tests.engine.society.fork.fork_support import AGENTS, file_hashes, fork_parent_spec


def statistics_line(run: Path, step: int) -> str:
    """What MessagingSpace's ``message_statistics`` said at the end of ``step``, from ``env_messaging``."""
    with ReplayReader(run) as reader:
        row = reader.query(f"SELECT messages_total, group_posts_total, groups FROM env_messaging WHERE step = {step}").to_pylist()[0]
    return f"{row['messages_total']} direct messages and {row['group_posts_total']} group posts delivered; {row['groups']} groups"


async def test_the_as_of_env_answers_as_the_tick_left_it_and_the_run_stays_as_it_was(shell: InProcessShell, tmp_path: Path) -> None:
    spec = parse_spec({**fork_parent_spec(), "seed": 7})  # a seed whose simulated agents message after tick 1
    run = tmp_path / "run"
    summary = await run_experiment(spec, run, shell)
    assert summary.status == "completed", summary.error
    then, now = statistics_line(run, 1), statistics_line(run, 4)
    assert then != now  # the agents messaged after tick 1
    module = spec.environment.modules[0]
    config = EnvRouterConfig(modules=((module.type, dict(module.kwargs)),), router=spec.environment.router,
                             coder=LLMClient(role="coder", seed=spec.seed), run_dir=run)
    host = shell.env_host(config, start_t=spec.start_time, agent_ids=list(range(AGENTS)), run_id="as-of-test")
    before = file_hashes(run)

    at = find_as_of(run, 1, ticks_done=4, through_txn=4, agent_ids=[0])
    with AsOfAgents(run, at, txn=5) as as_of:
        temporary = await start_as_of_env(host, as_of)
        try:
            assert await temporary.live_proxy.call_tool("message_statistics", {}, readonly=True) == then
            assert env_snapshot_kept(run_store(as_of.scratch), str(at.env_snapshot))
            assert temporary.key.endswith("-as-of-test-as-of-1")  # its own task key, beside the run's env actor
        finally:
            await temporary.release()
    assert not RunLayout(run).scratch.exists()
    assert file_hashes(run) == before

    with AsOfAgents(run, find_as_of(run, 4, ticks_done=4, through_txn=4, agent_ids=[0]), txn=5) as as_of:
        current = await start_as_of_env(host, as_of)
        try:
            assert await current.live_proxy.call_tool("message_statistics", {}, readonly=True) == now
        finally:
            await current.release()
    assert file_hashes(run) == before
