"""A population's tier_mix: its members dealt to tiers by share with a seeded draw, and a sweep over mixes, the
comparison of cost against fidelity a researcher runs (each cell's token_telemetry gives its cost)."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from engine.errors import SpecError
from engine.population.spec import PopulationSpec
from engine.run_status import RunStatus
from engine.society.run.sweep import run_spec
from engine.society.shells import InProcessShell
from engine.society.tiered.comparison import (
    compare_tiers,
    mean_tick_distance,
    pairwise_interval,
    replication_interval,
    tvd,
)
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.sweep_layout import SweepCellRecord, SweepManifest

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
    assert tvd({}, {}) is None and tvd({}, {"post": 1}) == 1.0  # no actions on either side: no distance, not 0


def test_ticks_where_neither_cell_acted_are_left_out_of_the_mean_distance() -> None:
    # tick 0 disjoint, tick 1 quiet on both sides: the mean is over tick 0 alone (the old code gave 0.5)
    assert mean_tick_distance([{"post": 1}, {}], [{"like": 2}, {}]) == 1.0
    assert mean_tick_distance([{"post": 1}, {}, {}], [{"post": 1, "like": 1}, {}, {"like": 1}]) == pytest.approx(0.75)
    assert mean_tick_distance([{}, {}], [{}, {}]) is None


def plain_jackknife(distances: np.ndarray) -> tuple[float, float, float]:
    """The jackknife over replications of the mean pairwise distance, from an R x R matrix, with t on R - 1 df."""
    r = len(distances)
    upper = np.triu_indices(r, 1)
    left_out = []
    for k in range(r):
        keep = [i for i in range(r) if i != k]
        sub = distances[np.ix_(keep, keep)]
        left_out.append(sub[np.triu_indices(r - 1, 1)].mean())
    theta = np.array(left_out)
    se = math.sqrt((r - 1) / r * ((theta - theta.mean()) ** 2).sum())
    centre = float(distances[upper].mean())
    half = float(stats.t.ppf(0.975, r - 1)) * se
    return centre, centre - half, centre + half


def test_the_seed_noise_interval_is_the_jackknife_over_replications() -> None:
    rng = np.random.default_rng(5)
    for r in (3, 5, 8):
        x = rng.uniform(size=(r, 4))
        distances = np.abs(x[:, None, :] - x[None, :, :]).mean(-1)
        found = pairwise_interval({(i, j): float(distances[i, j]) for i, j in combinations(range(r), 2)})
        assert found == pytest.approx(plain_jackknife(distances), rel=1e-12)
        # the same variance in closed form: a degree-2 U-statistic's jackknife is 4(R-1)/(R(R-2)^2) sum (h_k - U)^2,
        # h_k the mean distance of replication k to the others
        u = found[0]
        h = distances.sum(1) / (r - 1)
        se = math.sqrt(4 * (r - 1) / (r * (r - 2) ** 2) * ((h - u) ** 2).sum())
        assert found[2] - u == pytest.approx(stats.t.ppf(0.975, r - 1) * se, rel=1e-12)
    # two replications: one pair, a value and no interval; none: nothing
    assert pairwise_interval({(0, 1): 0.3}) == (0.3, None, None) and pairwise_interval({}) == (None, None, None)


def test_the_seed_noise_interval_counts_replications_not_pairs() -> None:
    """The pairs share replications: at R=5 the 10 pairs carry far less than 10 independent observations' worth."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=5)
    pairs = {(i, j): abs(x[i] - x[j]) for i, j in combinations(range(5), 2)}
    centre, low, high = pairwise_interval(pairs)
    naive_centre, naive_low, naive_high = replication_interval(list(pairs.values()))  # the old code's t over pairs
    assert centre == naive_centre and high - centre > 1.3 * (naive_high - naive_centre)  # type: ignore[operator]

    # coverage: |X_i - X_j| over standard normal replications is a U-statistic whose mean, 2/sqrt(pi), is known. Over
    # these 300 seeded sets of 5 replications the t over pairs covers 0.79 and the jackknife 0.92 (over 20,000 sets:
    # 0.78, as issue 51 found, and 0.92); benchmarks/coverage_tiers.py measures the tier comparison's own model
    truth = 2 / math.sqrt(math.pi)
    old = new = 0
    for _ in range(300):
        x = rng.normal(size=5)
        pairs = {(i, j): abs(x[i] - x[j]) for i, j in combinations(range(5), 2)}
        _, naive_low, naive_high = replication_interval(list(pairs.values()))
        _, low, high = pairwise_interval(pairs)
        old += naive_low <= truth <= naive_high  # type: ignore[operator]
        new += low <= truth <= high  # type: ignore[operator]
    assert old / 300 < 0.85 and new / 300 > 0.88, (old / 300, new / 300)


class TablesReader:
    """The two datasets compare_tiers reads, as in-memory tables queried by a real DuckDB."""

    def __init__(self, **tables: list[dict[str, Any]]) -> None:
        self.con = duckdb.connect()
        for name, rows in tables.items():
            self.con.register(name, pa.Table.from_pylist(rows))

    def query(self, sql: str) -> pa.Table:
        return self.con.sql(sql).to_arrow_table()


def test_the_comparison_reads_the_all_llm_row_over_replications_and_leaves_quiet_ticks_out() -> None:
    """Five replications of the all-LLM mix and of one other mix, two ticks with actions and one where nobody acted."""
    key, r, tools = "population.0.tier_mix", 5, ("create_post", "like_post")
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 6, size=(2 * r, 3, 2))
    counts[:, 2, :] = 0  # the third tick: nobody acts
    counts[:, :2, 0] += 1  # every cell acts in the first two ticks
    mixes = [{"llm": 1.0}] * r + [{"llm": 0.5, "archetype": 0.5}] * r
    cells = tuple(SweepCellRecord(index=i, cell_id=f"cell-{i:04d}", replication=i % r, seed=i, params={key: mixes[i]},
                                  status=RunStatus.COMPLETED) for i in range(2 * r))
    telemetry = [{"cell": c, "step": s, "tier": "total", "calls": 4, "prompt_tokens": 10, "completion_tokens": 5,
                  "cost_usd": 0.0, "members": 10} for c in range(2 * r) for s in range(3)]
    calls = [{"cell": c, "step": s, "tool": tools[t], "ok": True}
             for c in range(2 * r) for s in range(3) for t in range(2) for _ in range(int(counts[c, s, t]))]
    manifest = SweepManifest(root=Path("."), params=(key,), cells=cells)
    rows = compare_tiers(manifest, TablesReader(token_telemetry=telemetry, env_tool_calls=calls), tools)  # type: ignore[arg-type]

    # the per-tick TVD, written out with numpy over the two ticks where someone acted
    shares = counts[:, :2, :] / counts[:, :2, :].sum(-1, keepdims=True)
    distance = np.array([[0.5 * np.abs(shares[a] - shares[b]).sum(-1).mean() for b in range(2 * r)] for a in range(2 * r)])
    reference, mix = rows
    assert reference["reference"] and reference["replications"] == r
    expected = plain_jackknife(distance[:r, :r])
    assert (reference["action_tvd"], reference["action_tvd_low"], reference["action_tvd_high"]) == pytest.approx(expected)
    per_replication = [distance[r + i, i] for i in range(r)]
    half = stats.t.ppf(0.975, r - 1) * np.std(per_replication, ddof=1) / math.sqrt(r)
    assert mix["action_tvd"] == pytest.approx(np.mean(per_replication))
    assert mix["action_tvd_high"] - mix["action_tvd"] == pytest.approx(half)


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
