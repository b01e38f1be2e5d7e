"""The LLM test call before tick 0: one per distinct model; a missing key variable or a failing model stops the
run before any agent-step, and ``llm_check: false`` skips it."""

from __future__ import annotations

import pytest

from engine.errors import PreflightError
from engine.llm.client import LLMClient
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving_app
from engine.llm.sim.server import create_app
from engine.run_progress import RunPhase
from engine.society.run.preflight import check_llms, models_to_check
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


def test_each_distinct_model_is_checked_once_with_the_roles_that_use_it():
    shared = LLMClient(role="default", model="openai/a", base_url="http://127.0.0.1:1/v1")
    clients = {"default": shared, "coder": shared.model_copy(update={"role": "coder"}),
               "judge": LLMClient(role="judge", model="openai/b", base_url="http://127.0.0.1:1/v1"),
               "sim": LLMClient(role="sim", model="sim/default")}
    checked = [(client.model, roles) for client, roles in models_to_check(clients)]
    assert checked == [("openai/a", ("default", "coder")), ("openai/b", ("judge",))]


async def test_a_missing_key_variable_is_named_without_a_call(monkeypatch):
    monkeypatch.delenv("POLIS_TEST_NO_SUCH_KEY", raising=False)
    client = LLMClient(model="openai/gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key_env="POLIS_TEST_NO_SUCH_KEY")
    with pytest.raises(PreflightError) as caught:
        await check_llms({"default": client})
    assert "openai/gpt-4o-mini at http://127.0.0.1:9/v1 (role default)" in str(caught.value)
    assert "POLIS_TEST_NO_SUCH_KEY" in str(caught.value) and "llm_check: false" in str(caught.value)


def _spec(url: str, **changes) -> dict:
    return {
        "name": "llm-check",
        "llm": {"default": {"model": "openai/sim", "base_url": f"{url}/v1"}},
        "agents": [{"id": i, "profile": {"name": f"A{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}} for i in range(2)],
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
        **changes,
    }


async def test_a_model_that_answers_only_errors_stops_the_run_before_tick_1(shell, tmp_path):
    phases = []
    with serving_app(create_app(SimLLM(name="down", seed=1), SimFaults(rate_500=1.0))) as url:
        summary = await run_experiment(parse_spec(_spec(url)), tmp_path / "run", shell,
                                       on_progress=lambda p: phases.append(p.phase))
    assert summary.status == "failed" and summary.agent_steps == 0
    assert "preflight: the LLM test call failed" in summary.error and "openai/sim at http" in summary.error
    assert RunPhase.CHECKING_LLMS in phases
    assert not (tmp_path / "run" / "replay" / "actions").exists()


class _Counted:
    """An ASGI app that counts the requests it passes on."""

    def __init__(self, app) -> None:
        self.app, self.requests = app, 0

    async def __call__(self, scope, receive, send) -> None:
        self.requests += scope["type"] == "http"
        await self.app(scope, receive, send)


async def test_a_working_model_passes_and_llm_check_false_skips_the_call(shell, tmp_path):
    served = _Counted(create_app(SimLLM(name="up", seed=1), SimFaults()))
    phases: dict[str, list] = {"checked": [], "skipped": []}
    summaries, requests = {}, {}
    with serving_app(served) as url:
        for name, changes in (("checked", {}), ("skipped", {"llm_check": False})):
            before = served.requests
            summaries[name] = await run_experiment(parse_spec(_spec(url, **changes)), tmp_path / name, shell,
                                                   on_progress=lambda p, name=name: phases[name].append(p.phase))
            requests[name] = served.requests - before
    assert summaries["checked"].status == summaries["skipped"].status == "completed"
    assert summaries["checked"].provider_calls == summaries["skipped"].provider_calls > 0
    assert requests["checked"] == requests["skipped"] + 1  # the test call, and nothing else, is the difference
    assert RunPhase.CHECKING_LLMS in phases["checked"] and RunPhase.CHECKING_LLMS not in phases["skipped"]
    with ReplayReader(tmp_path / "checked") as reader:  # the test call is not an agent's: no row of it
        assert "Reply with OK." not in str(reader.query("SELECT messages FROM transcripts").to_pylist())


async def test_a_fork_a_rerun_and_a_resume_served_from_the_cache_make_no_provider_call(shell, tmp_path):
    from engine.society.fork.run import fork_experiment

    served = _Counted(create_app(SimLLM(name="up", seed=1), SimFaults()))
    phases: list = []
    with serving_app(served) as url:
        spec = parse_spec(_spec(url, seed=5, steps=[{"type": "run", "num_steps": 3, "tick": 600}]))
        parent = await run_experiment(spec, tmp_path / "parent", shell)
        assert parent.status == "completed" and served.requests == parent.provider_calls + 1  # its calls and the test call

        before = served.requests
        _, fork = await fork_experiment(tmp_path / "parent", 2, tmp_path / "fork", shell,
                                        on_progress=lambda p: phases.append(p.phase))
        assert fork.status == "completed" and served.requests == before  # the shared past and the rest: all cached
        assert RunPhase.CHECKING_LLMS not in phases

        before = served.requests
        rerun = await run_experiment(spec, tmp_path / "rerun", shell, llm_cache_dir=tmp_path / "parent" / "llm_cache")
        assert rerun.status == "completed" and rerun.provider_calls == 0 and served.requests == before

        # a resume that makes new calls makes those alone: its model answered into its cache before
        longer = parse_spec(_spec(url, seed=5, steps=[{"type": "run", "num_steps": 3, "tick": 600},
                                                      {"type": "run", "num_steps": 1, "tick": 600}]))
        before = served.requests
        resumed = await run_experiment(longer, tmp_path / "parent", shell, resume=True, force=True,
                                       on_progress=lambda p: phases.append(("resume", p.phase)))
        assert resumed.status == "completed" and resumed.ticks_done == 4
        assert served.requests - before == resumed.provider_calls - parent.provider_calls > 0
        assert ("resume", RunPhase.CHECKING_LLMS) not in phases

        # a fresh cache still gets the test call: nothing vouches for the model there
        before = served.requests
        fresh = await run_experiment(spec, tmp_path / "fresh", shell)
        assert served.requests - before == fresh.provider_calls + 1
