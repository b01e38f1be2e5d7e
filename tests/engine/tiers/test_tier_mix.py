"""A population's tier_mix: its members dealt to tiers by share with a seeded draw, and a sweep over mixes, the
comparison of cost against fidelity a researcher runs (each cell's token_telemetry gives its cost)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from engine.errors import SpecError
from engine.population.spec import PopulationSpec
from engine.society.run.sweep import run_spec
from engine.society.shells import InProcessShell
from engine.society.tiered.comparison import tvd
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

ARCHETYPE = {"key": ["party"], "group_size": 10, "options": [
    {"name": "post", "tool": "create_post", "arguments": {"text": "{text}"}}, {"name": "idle"}]}


def test_members_are_dealt_to_tiers_by_share_with_a_seeded_draw() -> None:
    population = PopulationSpec(count=101, profile_template={"party": ["a", "b"]}, tier_mix={"llm": 0.1, "archetype": 0.6, "rule": 0.3},
                                archetype=ARCHETYPE, rule={"policy": "social_poster"})
    dealt = population.member_tiers(seed=7, index=0)
    assert Counter(dealt) == {"archetype": 61, "rule": 30, "llm": 10}  # 10.1, 60.6, 30.3: the largest remainder rounds up
    assert dealt == population.member_tiers(seed=7, index=0) != population.member_tiers(seed=8, index=0)
    assert PopulationSpec(count=5).member_tiers(seed=1, index=0) == ["llm"] * 5


def mix_error(**population: object) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "m", "population": [{"count": 10, "profile_template": {"party": ["a"]}, **population}],
                    "steps": [{"type": "run", "num_steps": 1}]})
    return caught.value


def test_a_mix_is_checked_at_its_field() -> None:
    assert mix_error(tier_mix={"llm": 0.5, "archetype": 0.4}, archetype=ARCHETYPE).path == "population.0.tier_mix"
    assert "needs 'archetype'" in str(mix_error(tier_mix={"llm": 0.5, "archetype": 0.5}))
    assert "not both" in str(mix_error(tier="rule", tier_mix={"rule": 1.0}, rule={"policy": "social_poster"}))
    # a tier's settings may stay at share 0: the all-LLM cell of a sweep over mixes keeps them
    parse_spec({"name": "m", "population": [{"count": 10, "profile_template": {"party": ["a"]}, "tier_mix": {"llm": 1.0},
                                             "archetype": ARCHETYPE}],
                "steps": [{"type": "run", "num_steps": 1}]})


def test_tvd_of_action_counts() -> None:
    assert tvd({"post": 3, "like": 1}, {"post": 3, "like": 1}) == 0.0
    assert tvd({"post": 1}, {"like": 5}) == 1.0
    assert tvd({"post": 1, "like": 1}, {"post": 3, "like": 1}) == 0.25
    assert tvd({}, {}) == 0.0 and tvd({}, {"post": 1}) == 1.0


@pytest.fixture(scope="module")
def mixes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep over three mixes of one 40-member population, two replications each."""
    root = tmp_path_factory.mktemp("mixes") / "sweep"
    spec = parse_spec({
        "name": "mixes", "seed": 3, "llm": {"default": {"model": "sim/social"}},
        "population": [{"count": 40, "profile_template": {"party": ["a", "b"]}, "tier_mix": {"llm": 1.0}, "archetype": ARCHETYPE}],
        "environment": {"modules": [{"type": "SocialMediaSpace"}]},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600}],
        "sweep": {"grid": {"population.0.tier_mix": [{"llm": 1.0}, {"llm": 0.25, "archetype": 0.75}, {"archetype": 1.0}]},
                  "replications": 2},
    })
    summary = asyncio.run(run_spec(spec, root, InProcessShell()))
    assert summary.status == "completed", summary.error
    return root


def test_a_sweep_over_mixes_costs_fewer_calls_as_the_llm_share_falls(mixes: Path) -> None:
    with ReplayReader(mixes) as reader:
        rows = reader.query("SELECT cell, tier, sum(members) AS members, sum(calls) AS calls FROM token_telemetry "
                            "WHERE tier IN ('llm', 'archetype') GROUP BY ALL ORDER BY ALL").to_pylist()
        compared = reader.query("SELECT * FROM tier_comparison").to_pylist()
    found = {(r["cell"], r["tier"]): (r["members"], r["calls"]) for r in rows}
    assert found[(0, "llm")][0] == 80 and (0, "archetype") not in found  # cells 0 and 1: the all-LLM mix's replications
    assert found[(2, "llm")][0] == 20 and found[(2, "archetype")][0] == 60
    assert found[(4, "archetype")][0] == 80 and (4, "llm") not in found

    # the dataset: one row per mix, in grid order, cost falling with the LLM share, each figure with its interval
    assert [r["mix"] for r in compared] == ["llm 100%", "llm 25% + archetype 75%", "archetype 100%"]
    assert [r["replications"] for r in compared] == [2, 2, 2] and [r["reference"] for r in compared] == [True, False, False]
    calls = [r["calls_per_tick"] for r in compared]
    assert calls[0] > calls[1] > calls[2] > 0
    for row in compared:
        for figure in ("calls_per_tick", "tokens_per_tick", *(("action_tvd",) if not row["reference"] else ())):
            assert row[f"{figure}_low"] <= row[figure] <= row[f"{figure}_high"], (row["mix"], figure)
        assert 0 <= row["action_tvd"] <= 1
    # the all-LLM row's distance is between its two replications (one pair: no interval), the seed noise the others
    # are read against
    assert compared[0]["action_tvd_low"] is None and compared[2]["action_rate_ratio"] > 0


def test_the_sweeps_results_page_has_the_cost_against_fidelity_table(mixes: Path) -> None:
    from engine.results.report import load_report
    from service.report.page import standalone_page

    page = standalone_page(load_report(mixes))
    table = page.split('id="polis-tier-comparison"')[1].split("</table>")[0]
    assert table.count("<tr>") == 4 and "llm 100% (reference)" in table and "archetype 100%" in table
    assert "Prompt share a prefix cache can reuse" in page
