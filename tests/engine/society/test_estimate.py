"""``polis estimate`` against the runs it estimates: small versions of the demo, the reference example and a sweep,
each estimated from a smaller sample and then run (in-process shell), land within ±25% of their calls and tokens.

Measured on 2026-12-01 (estimate vs actual, calls / tokens):

    these small versions     demo 60 vs 64 / 27,368 vs 32,744    reference 44 vs 37 / 25,357 vs 21,931
                             sweep 187 vs 184 / 79,599 vs 86,032
    full size, CLI defaults  examples/demo.yaml 100 vs 103 / 45,556 vs 52,582 (-3% / -13%)
    (20 agents, 2 ticks)     examples/reference 37 vs 37 / 21,931 vs 21,931 (its 4 people and 3 ticks: the whole run)
                             the sweep above 194 vs 184 / 83,301 vs 86,032 (+6% / -3%)
Since the prompt layout of 2026-12-06 the reference's sample is 3 of its 4 people: with 2, the two sampled made a
third more calls than the other two (estimate 48 vs 35 calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.reference import load_reference
from engine.society.run.estimate import estimate, estimate_refusal
from engine.society.run.runner import run_experiment
from engine.society.run.sweep import run_sweep
from engine.spec import ExperimentSpec, load_spec, parse_spec
from engine.storage.reader import ReplayReader

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _demo(agents: int) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((EXAMPLES / "demo.yaml").read_text(encoding="utf-8"))
    spec["population"][0]["count"] = agents
    return spec


def small_demo() -> ExperimentSpec:
    """The demo at 12 people (3 ticks, codegen router over a messaging space)."""
    return parse_spec(_demo(12))


def small_reference() -> ExperimentSpec:
    """``examples/reference`` as shipped: 4 people, 2 ticks, a questionnaire, an ask, an intervene, 1 tick."""
    return load_reference(EXAMPLES / "reference" / "init_config.json", EXAMPLES / "reference" / "steps.yaml", name="reference")


def small_sweep() -> ExperimentSpec:
    """The demo at 8 people swept over two routers, two replications each (4 cells)."""
    spec = _demo(8)
    spec["name"] = "demo-sweep"
    spec["sweep"] = {"grid": {"environment.router": ["codegen", "react"]}, "replications": 2}
    return parse_spec(spec)


def _actual(root: Path) -> tuple[int, int]:
    with ReplayReader(root) as reader:
        row = reader.query("SELECT count(*) AS calls, sum(input_tokens + output_tokens)::BIGINT AS tokens FROM llm_calls")
    found = row.to_pylist()[0]
    return found["calls"], found["tokens"]


@pytest.mark.parametrize(("build", "agents"), [(small_demo, 4), (small_reference, 3), (small_sweep, 4)],
                         ids=["demo", "reference", "sweep"])
async def test_the_estimate_lands_within_a_quarter_of_the_runs_calls_and_tokens(build, agents, shell, tmp_path) -> None:
    spec = build()
    found = await estimate(spec, shell, agents=agents, ticks=2)
    if spec.sweep is not None:
        await run_sweep(spec, tmp_path / "run", shell)
    else:
        summary = await run_experiment(spec, tmp_path / "run", shell)
        assert summary.status in ("completed", "completed_with_errors", "failed"), summary.error  # every step ran
        assert summary.agent_steps == len(spec.all_agents()) * spec.total_ticks()
    calls, tokens = _actual(tmp_path / "run")

    figures = (f"{spec.name}: estimate {found.calls.expected:.0f} calls [{found.calls.low:.0f}, {found.calls.high:.0f}], "
               f"{found.tokens.expected:.0f} tokens [{found.tokens.low:.0f}, {found.tokens.high:.0f}]; "
               f"actual {calls} calls, {tokens} tokens")
    print(figures)
    assert abs(found.calls.expected - calls) <= 0.25 * calls, figures
    assert abs(found.tokens.expected - tokens) <= 0.25 * tokens, figures
    assert found.calls.low <= found.calls.expected <= found.calls.high


async def test_the_estimate_covers_every_step_kind_of_the_reference(shell) -> None:
    found = await estimate(small_reference(), shell, agents=2, ticks=1)

    assert set(found.calls_by_kind) >= {"tick", "questionnaire", "ask", "intervene", "once"}
    assert all(found.calls_by_kind[kind].expected > 0 for kind in ("tick", "questionnaire", "ask", "intervene"))
    # the reference's questionnaire asks all 4 people: the projection counts 4, not the sample's 2
    assert found.calls_by_kind["questionnaire"].expected >= 4


async def test_a_priced_client_gets_dollars_and_a_budget_below_the_upper_estimate_is_refused(shell) -> None:
    spec = _demo(4)
    spec["llm"]["default"]["price"] = {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 4.0}
    spec["budget"] = {"max_cost_usd": 1e-6}
    found = await estimate(parse_spec(spec), shell, agents=2, ticks=1)

    assert found.cost_usd is not None
    assert found.cost_usd.expected == pytest.approx(
        (found.input_tokens.expected * 1.0 + found.output_tokens.expected * 4.0) / 1e6)
    reason = estimate_refusal(parse_spec(spec), found)
    assert reason is not None and reason.startswith("budget.max_cost_usd is 1e-06 but the estimate reaches")


def _karate_study(folder: Path) -> ExperimentSpec:
    """Zachary's karate club as a first study does it: 34 people from a table, the club's ties as an edge file, a
    generated follow layer whose degrees list names every member, sim/social, an intervention and a questionnaire."""
    import networkx as nx

    club = nx.karate_club_graph()
    (folder / "people.csv").write_text("id,name,club\n" + "".join(f"{n},P{n},{club.nodes[n]['club']}\n" for n in club),
                                       encoding="utf-8")
    (folder / "edges.csv").write_text("source,target,weight\n" + "".join(f"{u},{v},{d['weight']}\n" for u, v, d in club.edges(data=True)),
                                      encoding="utf-8")
    spec = {
        "name": "karate", "seed": 3,
        "population": [{"from": "people.csv"}],
        "network": {"layers": {"friend": {"from": "edges.csv"},
                               "follow": {"directed": True, "generate": {"model": "configuration",
                                                                         "degrees": [2] * 34}}}},
        "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "friend"}}]},
        "llm": {"default": {"model": "sim/social"}},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600},
                  {"type": "intervene", "calls": [{"tool": "remove_top_nodes", "arguments": {"share": 0.06}},
                                                  {"tool": "seed_post", "arguments": {"text": "club news", "count": 2, "at": "degree"}}]},
                  {"type": "run", "num_steps": 1, "tick": 3600},
                  {"type": "questionnaire", "questionnaire_id": "club", "target_agent_ids": [0, 33],
                   "questions": [{"id": "q", "prompt": "Which club?", "response_type": "choice", "choices": ["Mr. Hi", "Officer"]}]}],
        "budget": {"max_calls": 100_000},
    }
    (folder / "karate.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return load_spec(folder / "karate.yaml")


async def test_the_estimate_samples_the_sub_network_of_an_edge_file_and_of_a_generator_that_does_not_fit(shell, tmp_path) -> None:
    spec = _karate_study(tmp_path)
    found = await estimate(spec, shell, agents=20, ticks=2)
    assert found.sample_agents == 20 and found.agent_steps_total == 34 * 3
    assert found.calls.low <= found.calls.expected <= found.calls.high and found.calls.expected > 34 * 3 * 0.5
    assert set(found.calls_by_kind) >= {"tick", "questionnaire"}
    # the sample's network is the edge file's edges among the 20 sampled members, nothing else
    from engine.society.run.estimate import _sample_network, _sample_spec
    from engine.tiers.plan import deal_members, spec_tier_batches

    llm_agents, light = deal_members(spec, spec.agent_members())
    sample = _sample_spec(spec, llm_agents, spec_tier_batches(spec, light), 20, 2)
    kept = {int(i) for i in sample.agent_ids()}
    network = _sample_network(spec, sample, tmp_path)
    assert network is not None
    cut = (tmp_path / "sample-friend.csv").read_text(encoding="utf-8").splitlines()
    import networkx as nx

    among = {frozenset(e) for e in nx.karate_club_graph().subgraph(kept).edges()}
    assert {frozenset(int(x) for x in line.split(",")[:2]) for line in cut[1:]} == among and len(among) > 0
    assert network.layers["follow"].from_ is not None  # 34 degrees cannot be drawn over 20 agents: cut from the whole graph


@pytest.fixture(scope="module")
def fidelity_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of examples/fidelity with the survey table its prepare.py writes (from statsmodels' copy of it)."""
    import runpy
    import shutil

    folder = tmp_path_factory.mktemp("examples") / "fidelity"
    shutil.copytree(EXAMPLES / "fidelity", folder)
    runpy.run_path(str(folder / "prepare.py"), run_name="__main__")
    return folder


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")) + ["fidelity/fair.yaml",
                                                                                        "fidelity/fair-calibrated.yaml",
                                                                                        "fidelity/fair-rehearsal.yaml"])
async def test_every_example_in_the_repository_is_estimated(example: str, shell, fidelity_examples: Path) -> None:
    folder = fidelity_examples.parent if example.startswith("fidelity/") else EXAMPLES
    found = await estimate(load_spec(folder / example), shell, agents=4, ticks=1)
    assert found.calls.expected > 0 and found.sample_agents >= 1
