"""examples/tiers.yaml, the 3-tier society, from the two front doors a researcher uses besides REST
(tests/service/test_tier_telemetry.py): the polis command and the Python API."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import polis
from engine.society.run.estimate import estimate
from engine.society.shells import InProcessShell
from engine.spec import load_spec
from engine.tiers.plan import count_llm_callers
from tests.engine.test_cli import IN_PROCESS_ENV

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"
TIERS = "SELECT tier, count(*) AS n, count(call_id) AS with_call FROM actions GROUP BY tier ORDER BY tier"


def test_the_cli_runs_three_tiers_and_queries_their_telemetry(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(EXAMPLE), "--run-dir", str(run)],
                          capture_output=True, text=True, timeout=600, env=IN_PROCESS_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    query = subprocess.run([sys.executable, "-m", "engine.cli", "query", str(run), TIERS],
                           capture_output=True, text=True, timeout=120, env=IN_PROCESS_ENV)
    assert query.returncode == 0, query.stderr
    rows = [line.replace("|", " ").split() for line in query.stdout.splitlines() if line.split()[:1] in (["archetype"], ["llm"], ["rule"])]
    assert rows == [["archetype", "900", "900"], ["llm", "60", "0"], ["rule", "900", "0"]], query.stdout


def test_the_python_api_runs_three_tiers(tmp_path: Path) -> None:
    with polis.Session(scheduler="in-process") as session:
        run = session.run(str(EXAMPLE), tmp_path / "run", progress=False)
    assert run.status == "completed"
    telemetry = run.df("token_telemetry")
    archetype = telemetry[telemetry.tier == "archetype"]
    groups = run.sql("SELECT step, count(DISTINCT group_id) AS n FROM actions WHERE tier = 'archetype' GROUP BY step").to_pandas()
    assert sorted(archetype.calls) == sorted(groups.n) and set(archetype.calls) <= set(range(6, 13))  # 4 keys, groups of 50
    assert (telemetry[telemetry.tier == "llm"].prompt_p95 <= 1.1 * 1500).all()  # the spec's context budget


def test_the_estimate_counts_llm_agents_and_archetype_groups_not_members() -> None:
    spec = load_spec(EXAMPLE)
    agents, groups = count_llm_callers(spec)
    assert agents == 20 and 4 <= groups <= 12  # four keys, groups of at most 50 of the 300 members
    found = asyncio.run(estimate(spec, InProcessShell()))
    assert found.calls_by_kind["archetype"].expected == groups * 3  # one call per group per tick, 3 ticks
    assert found.calls.high < 2 * (agents + groups) * 3  # before tiers it projected every member as an LLM agent: ~2,000
