"""A whole run whose coder answers with a top-level ``return`` for 30% of requests still completes.

Agents talk to the simulated LLM; the router's coder is a scripted OpenAI-compatible server on
127.0.0.1 (a real uvicorn server, written here). Before the sandbox refused compile-time errors,
``send_message(...)\\nreturn results`` crashed the agent-step's batch with a SyntaxError and failed
the run; now the refusal is fed back to the coder, which answers with working code.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest
from fastapi import FastAPI, Request

from engine.llm.sim import SimLLM
from engine.llm.sim.background import serving, serving_app
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

AGENTS = 16
TICKS = 2
_AGENT = re.compile(r"\bagent (\d+)\b")
_INSTRUCTION = re.compile(r"Instruction from agent (\d+): (.*)", re.S)


class ScriptedCoder:
    """Answers CodeGen requests: working code, with ``return results`` appended to 3 of every 10 first tries."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first_tries = 0
        self.bad = 0
        self.feedback: list[str] = []  #: the feedback messages of retries, as the coder saw them

    def code(self, messages: list[dict[str, Any]]) -> str:
        system, user = messages[0]["content"], messages[1]["content"]
        match = _INSTRUCTION.search(user)
        caller, instruction = (int(match.group(1)), match.group(2)) if match else (0, user)
        lines = [f"results['answer'] = {('done: ' + instruction[:60])!r}"]
        target = next((int(n) for n in _AGENT.findall(instruction) if int(n) < AGENTS and int(n) != caller), None)
        if "READ-ONLY" not in system and target is not None:
            lines.insert(0, f"send_message(to_agent_id={target}, content='hi from {caller}')")
        with self.lock:
            if len(messages) > 2:  # a retry: the last message is the router's feedback
                self.feedback.append(messages[-1]["content"])
                return "\n".join(lines)
            self.first_tries += 1
            bad = self.first_tries % 10 in (1, 4, 7)
            self.bad += bad
        return "\n".join([*lines, "return results"] if bad else lines)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict[str, Any]:
            body = await request.json()
            content = json.dumps({"thought": "scripted", "code": self.code(body["messages"])})
            return {
                "id": "scripted", "object": "chat.completion", "model": "x", "created": int(time.time()),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }  # fmt: skip

        return app


@pytest.fixture(scope="module")
def sim_url():
    with serving(SimLLM(name="codegen-hostile", seed=7)) as url:
        yield url


async def test_a_coder_that_often_writes_a_top_level_return_still_yields_a_completed_run(shell, tmp_path, sim_url):
    coder = ScriptedCoder()
    with serving_app(coder.app()) as coder_url:
        spec = parse_spec({
            "name": "codegen-hostile",
            "seed": 3,
            "llm": {"default": {"model": "openai/sim", "base_url": f"{sim_url}/v1"},
                    "coder": {"model": "openai/x", "base_url": f"{coder_url}/v1"}},
            "population": [{"count": AGENTS, "profile_template": {"name": "P{i}"},
                            "config": {"tools": ["ask_env"], "max_react_turns": 2, "env_template_mode": False}}],
            "environment": {"modules": [{"type": "MessagingSpace"}], "router": "codegen"},
            "steps": [{"type": "run", "num_steps": TICKS, "tick": 600}],
            "batch_size": 8,
            "llm_check": False,  # the scripted coder answers code requests only, not the preflight's "Reply with OK."
        })  # fmt: skip
        summary = await run_experiment(spec, tmp_path / "run", shell)

    assert summary.status == "completed", (summary.status, summary.error, summary.first_error)
    with ReplayReader(tmp_path / "run") as reader:
        steps = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY agent_id, step").to_pylist()
        asks = reader.query(
            "SELECT sum(len(list_filter(tools_called, lambda x: x = 'ask_env')))::BIGINT AS n FROM actions"
        ).to_pylist()[0]["n"]
        coder_calls = reader.query(
            "SELECT step, agent_id, count(*) AS n FROM llm_calls WHERE caller = 'router' AND role = 'coder' "
            "AND prompt_name <> 'env.world_description' GROUP BY step, agent_id"
        ).to_pylist()
    # every agent stepped exactly once per tick
    assert sorted((r["agent_id"], r["step"]) for r in steps) == [(a, s) for a in range(AGENTS) for s in range(1, TICKS + 1)]
    assert all(r["n"] == 1 for r in steps)

    print(f"\nasks {asks}, coder first tries {coder.first_tries}, bad {coder.bad}, retries {len(coder.feedback)}")
    assert coder.first_tries == asks >= 10 and coder.bad >= 3
    # every bad answer was refused and fed back once, and the retry is an llm_calls row of the same ask
    assert len(coder.feedback) == coder.bad
    assert all("Your code was refused by the sandbox:" in f and "'return' outside function" in f for f in coder.feedback)
    assert sum(r["n"] for r in coder_calls) == coder.first_tries + coder.bad
    assert sum(r["n"] - 1 for r in coder_calls if r["n"] > 1) >= 1
