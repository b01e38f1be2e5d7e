"""Progress from the first second, on a real LocalCluster: LLM calls counted while a batch runs, answers as they come.

The per-call test holds the simulated LLM (over HTTP) at its gate: once tick 1 has begun, every chat call after the
first waits until the driver has reported a call of tick 1. That can only come from a live count, since the tick's
one batch cannot end while its agents' calls are held; so the test shows the live path without asking how fast
anything is.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.server import create_app
from engine.run_progress import RunPhase, RunProgress
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

#: How long a held call waits for the gate before it goes on anyway (a broken live path fails the test, not hangs it).
GATE_TIMEOUT_S = 60.0


class GatedSim:
    """The simulated LLM's app: once :attr:`armed`, it holds every chat call after the first until :attr:`gate` opens
    (before, calls pass: the env router describes the environment as it starts)."""

    def __init__(self) -> None:
        self.app = create_app(SimLLM(name="gated", seed=5), SimFaults())
        self.armed = threading.Event()
        self.gate = threading.Event()
        self.calls = 0  #: chat calls since it was armed
        self.timed_out = 0  #: held calls that went on because the gate never opened

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions") and self.armed.is_set():
            self.calls += 1
            if self.calls > 1 and not await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, GATE_TIMEOUT_S):
                self.timed_out += 1
        await self.app(scope, receive, send)


@pytest.fixture
def gated() -> Iterator[tuple[GatedSim, str]]:
    """A :class:`GatedSim` on a real uvicorn server in a background thread, and its base URL."""
    app = GatedSim()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_keep_alive=60))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    started = threading.Event()
    while not server.started:
        assert thread.is_alive(), "the gated server did not start"
        started.wait(0.01)
    try:
        yield app, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        app.gate.set()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def spec(llm: dict[str, Any], steps: list[dict[str, Any]], agents: int = 3) -> Any:
    return parse_spec({
        "name": "live-progress", "seed": 2,
        "population": [{"count": agents, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "llm": {"default": llm}, "steps": steps,
    })


def increases(reports: list[RunProgress]) -> int:
    return sum(1 for before, after in zip(reports, reports[1:], strict=False) if after.llm_calls > before.llm_calls)


async def test_llm_calls_are_reported_as_they_happen_not_once_per_batch(dask_client, gated, tmp_path: Path) -> None:
    sim, url = gated
    reports: list[RunProgress] = []

    def on_progress(report: RunProgress) -> None:
        reports.append(report)
        if report.phase == RunPhase.TICK and report.ticks_done == 0:
            sim.armed.set()  # reported before the tick's batch is submitted: its agents' calls meet the gate
            if report.llm_calls > 0:
                sim.gate.set()  # a call of tick 1 reached the driver while its batch is held

    # 3 agents are one batch (engine.society.tick_core.MIN_SPREAD), so a per-batch count would move once in tick 1.
    summary = await run_experiment(spec({"model": "openai/sim", "base_url": url}, [{"type": "run", "num_steps": 2, "tick": 600}]),
                                   tmp_path / "run", dask_client, on_progress=on_progress)

    assert summary.status == "completed", summary.error
    assert sim.gate.is_set() and sim.timed_out == 0
    tick_1 = [r for r in reports if r.ticks_done == 0 and r.phase == RunPhase.TICK]
    assert increases(tick_1) >= 2  # the live count (during the batch), then the rest (later messages or the result)
    calls = [r.llm_calls for r in reports]
    assert calls == sorted(calls)  # the batch result replaced the live estimate: the count never went back
    with ReplayReader(tmp_path / "run") as reader:
        agent_calls = reader.query("SELECT sum(llm_calls) AS n FROM actions").column("n")[0].as_py()
    assert reports[-1].llm_calls == agent_calls  # and never counted a call twice


async def test_a_questionnaire_reports_its_answers_as_they_come(dask_client, tmp_path: Path) -> None:
    questions = [{"id": "happy", "prompt": "How happy are you?", "response_type": "integer", "min": 1, "max": 7},
                 {"id": "mood", "prompt": "Your mood?", "response_type": "text"}]
    steps = [{"type": "run", "num_steps": 1, "tick": 600},
             {"type": "questionnaire", "questionnaire_id": "wellbeing", "questions": questions}]
    reports: list[RunProgress] = []

    summary = await run_experiment(spec({"model": "sim/default"}, steps, agents=20), tmp_path / "run", dask_client,
                                   on_progress=reports.append)

    assert summary.status == "completed", summary.error
    asked = [r for r in reports if r.phase == RunPhase.QUESTIONNAIRE]
    assert asked[0].phase_done == 0 and {r.phase_total for r in asked} == {40}  # 20 agents x 2 questions
    assert asked[-1].phase_done == 40
    done = [r.phase_done or 0 for r in asked]
    assert done == sorted(done)
    assert asked[-1].llm_calls >= asked[0].llm_calls + 20  # the answers' calls count too
    first = [r.phase for r in reports if r.phase is not None]
    assert first[:3] == [RunPhase.CHECKING_WORKERS, RunPhase.CREATING_WORKSPACES, RunPhase.CREATING_WORKSPACES]
    assert RunPhase.COMMITTING in first and first[-1] == RunPhase.FINISHING and reports[-1].phase is None
