"""The CodeGen template cache in a real run: agents over HTTP to the simulated LLM (in-process shell)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.llm.sim import SimLLM
from engine.llm.sim.background import serving
from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import agent_workspace
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

AGENTS = 30
_SEND = re.compile(r"^send a message to agent (\d+) saying '(.*)'$")


@pytest.fixture(scope="module")
def sim_url():
    with serving(SimLLM(name="codegen-cache", seed=5)) as url:
        yield url


def codegen_spec(url: str, **config):
    return parse_spec({
        "name": "codegen-cache",
        "seed": 11,
        "llm": {"default": {"model": "openai/sim", "base_url": f"{url}/v1"}},
        "population": [{"count": AGENTS, "profile_template": {"name": "P{i}"},
                        "config": {"tools": ["ask_env"], "max_react_turns": 2, **config}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "router": "codegen"},
        "steps": [{"type": "run", "num_steps": 3, "tick": 600}],
        "batch_size": 8,
    })


def ask_env_calls(run: Path, step_t: dict[int, str]) -> list[dict]:
    """Every ask_env the agents made, from their tool logs: agent, step, instruction, result."""
    calls = []
    for agent_id in range(AGENTS):
        workspace = agent_workspace(run, agent_id)  # packed or a folder
        assert workspace is not None
        for entry in workspace.read_jsonl(".runtime/logs/tool_calls.jsonl"):
            if entry["tool"] == "ask_env":
                step = next(s for s, t in step_t.items() if t == entry["t"])
                calls.append({"agent": agent_id, "step": step, **entry})
    return calls


async def test_the_template_cache_answers_later_ticks_without_coder_calls(shell, tmp_path, sim_url):
    run = tmp_path / "run"
    summary = await run_experiment(codegen_spec(sim_url), run, shell)
    assert summary.status == "completed", summary.error

    with ReplayReader(run) as reader:
        asks = {r["step"]: r["n"] for r in reader.query(
            "SELECT step, sum(len(list_filter(tools_called, lambda x: x = 'ask_env')))::BIGINT AS n FROM actions GROUP BY step"
        ).to_pylist()}
        coder = {r["step"]: r["n"] for r in reader.query(
            "SELECT step, count(*) AS n FROM llm_calls WHERE caller = 'router' AND role = 'coder' GROUP BY step"
        ).to_pylist()}
        cache = {r["step"]: r for r in reader.query("SELECT * FROM codegen_cache ORDER BY step").to_pylist()}
        step_t = {r["step"]: r["t"].isoformat() for r in reader.query("SELECT DISTINCT step, t FROM actions").to_pylist()}
        delivered = reader.query("SELECT step, sender, recipient, content FROM messages WHERE kind = 'direct'").to_pylist()
        # each coder call names the agent whose ask_env it served, an agent that asked in that step
        # (the world description, asked once at the start, serves no agent)
        orphans = reader.query(
            "SELECT count(*) AS n FROM llm_calls c WHERE caller = 'router' AND prompt_name <> 'env.world_description' "
            "AND NOT EXISTS (SELECT 1 FROM actions a "
            "WHERE a.step = c.step AND a.agent_id = c.agent_id AND list_contains(a.tools_called, 'ask_env'))"
        ).to_pylist()[0]["n"]
    assert orphans == 0

    later_asks = asks.get(2, 0) + asks.get(3, 0)
    later_coder = coder.get(2, 0) + coder.get(3, 0)
    print(f"\nask_env per tick {asks}, coder calls per tick {coder}")
    print("codegen_cache rows:", [{k: v for k, v in r.items() if k != "t"} for r in cache.values()])
    assert asks.get(1, 0) >= 10 and later_asks >= 20
    assert later_coder <= 0.05 * later_asks
    assert coder.get(1, 0) >= 1  # tick 1 filled the cache

    # Every template-mode ask reached the cache, and the rows add up to the run's totals.
    assert sorted(cache) == [1, 2, 3]
    assert [cache[s]["requests"] for s in (1, 2, 3)] == [asks.get(s, 0) for s in (1, 2, 3)]
    assert sum(cache[s]["hits_exact"] + cache[s]["hits_similar"] for s in (2, 3)) >= later_asks - later_coder
    assert cache[1]["generations"] >= 1
    # tick 3 is served from the cache; hit_rate is cumulative, so tick 1's misses weigh on it for good
    assert cache[3]["hits_exact"] + cache[3]["hits_similar"] >= 0.95 * cache[3]["requests"]
    hits = sum(r["hits_exact"] + r["hits_similar"] for r in cache.values())
    assert cache[3]["hit_rate"] == pytest.approx(hits / sum(r["requests"] for r in cache.values()))
    totals = summary.env["codegen_cache"]
    assert totals["requests"] == sum(asks.values())
    assert totals["generations"] == sum(r["generations"] for r in cache.values())

    # A hit ran with the asking agent's own values: each message went where, and said what, its sender asked.
    wanted = sorted(
        (c["step"], c["agent"], int(m.group(1)), m.group(2))
        for c in ask_env_calls(run, step_t)
        if (m := _SEND.match(c["arguments"]["instruction"])) and c["result"].startswith("[success]")
    )
    sent = sorted((d["step"], d["sender"], d["recipient"], d["content"]) for d in delivered)
    print("direct messages per tick:", {s: sum(1 for m in sent if m[0] == s) for s in (1, 2, 3)})
    assert sent == wanted
    assert len({(recipient, content) for _, _, recipient, content in sent}) >= 2  # not one agent's values replayed
    assert any(step > 1 for step, *_ in sent)
