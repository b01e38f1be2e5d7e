"""2 agents x 2 ticks against the real offline model (SmolLM2 via llama.cpp) over HTTP, on the cluster."""

from __future__ import annotations

import pytest

from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from tests.engine.llm.local_model_support import why_no_local_model

_MISSING = why_no_local_model()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))


@pytest.mark.timeout(600)
async def test_two_agents_two_ticks_on_the_real_local_model(dask_client, tmp_path):
    spec = parse_spec({
        "name": "local-model",
        "seed": 3,
        "llm": {"default": {"model": "local/smollm2"}},
        "population": [{"count": 2, "profile_template": {"name": "Resident {i}", "occupation": ["nurse", "teacher"]},
                        "config": {"max_react_turns": 2, "tools": ["ask_env"]}}],
        "environment": {"router": "react", "max_router_steps": 1, "modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600}],
    })
    summary = await run_experiment(spec, tmp_path / "run", dask_client)

    assert summary.status == "completed", summary.error
    assert summary.provider_calls > 0
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT agent_id, step, status FROM actions").to_pylist()
        models = {r["model"] for r in reader.query("SELECT DISTINCT model FROM llm_calls WHERE status = 'ok'").to_pylist()}
    assert len(rows) == 4 and len({(r["agent_id"], r["step"]) for r in rows}) == 4
    # The grammar keeps the 135M model's decisions schema-valid: agents finish or run out of turns;
    # any parse failure is recorded as llm_error, never replaced by an invented decision.
    assert {r["status"] for r in rows} <= {"finished", "turn_limit", "llm_error"}
    assert any(r["status"] == "finished" for r in rows)
    assert models == {"openai/smollm2"}  # local/smollm2 was served as an OpenAI-compatible endpoint
