"""Issue 38's tiers in one society, offline: LLM agents, archetype groups and rule members share the env and the
datasets; an archetype makes one call per group per tick; a policy that raises and an archetype whose every answer is
malformed are recorded per member, and nothing is invented for them."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving_app
from engine.llm.sim.server import create_app
from engine.society.fork.run import fork_experiment
from engine.society.run.estimate import estimate
from engine.society.run.runner import run_experiment
from engine.society.shells import InProcessShell
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.tiers.plan import count_llm_callers
from engine.tiers.policies import POLICIES, Act, Observation, register_policy

ARCHETYPE = {"key": ["party"], "group_size": 7, "observations": "common", "options": [
    {"name": "post", "tool": "create_post", "arguments": {"text": "{text}"}, "description": "write a post"},
    {"name": "idle", "description": "do nothing"}]}
SPEC = {
    "name": "tiers", "seed": 5, "llm": {"default": {"model": "sim/social"}},
    "population": [
        {"count": 4},
        {"count": 40, "profile_template": {"party": ["red", "blue", "green"]}, "tier": "archetype", "archetype": ARCHETYPE},
        {"count": 30, "tier": "rule", "rule": {"policy": "bounded_confidence", "params": {"epsilon": 0.4}}},
        {"count": 30, "tier": "rule", "rule": {"policy": "social_poster", "params": {"post_probability": 0.5}}},
    ],
    "environment": {"modules": [{"type": "SocialMediaSpace", "kwargs": {"feed_limit": 100}}]},
    "steps": [{"type": "run", "num_steps": 3, "tick": 3600}],
}


def rows(run: Path, sql: str) -> list[dict]:
    with ReplayReader(run) as reader:
        return reader.query(sql).to_pylist()


@pytest.fixture(scope="module")
def three_tiers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("tiers") / "run"
    summary = asyncio.run(run_experiment(parse_spec(SPEC), run, InProcessShell()))
    assert summary.status == "completed", summary.error
    return run


def test_every_member_has_a_row_per_tick_with_its_tier(three_tiers: Path) -> None:
    found = rows(three_tiers, "SELECT tier, step, count(*) AS n, count(*) FILTER (status = 'finished') AS ok FROM actions "
                              "GROUP BY ALL ORDER BY ALL")
    assert {(r["tier"], r["step"]): (r["n"], r["ok"]) for r in found} == {
        (tier, step): (n, n) for tier, n in (("llm", 4), ("archetype", 40), ("rule", 60)) for step in (1, 2, 3)}
    types = rows(three_tiers, "SELECT DISTINCT tier, agent_type FROM actions ORDER BY ALL")
    assert [(r["tier"], r["agent_type"]) for r in types] == [
        ("archetype", "archetype"), ("llm", "PersonAgent"), ("rule", "rule:bounded_confidence"), ("rule", "rule:social_poster")]


def test_an_archetype_makes_one_call_per_group_per_tick_and_its_members_carry_its_call_id(three_tiers: Path) -> None:
    groups = rows(three_tiers, "SELECT step, count(DISTINCT group_id) AS groups, count(DISTINCT call_id) AS ids FROM actions "
                               "WHERE tier = 'archetype' GROUP BY step ORDER BY step")
    parties = rows(three_tiers, "SELECT profile->>'party' AS party, count(*) AS n FROM agent_profiles WHERE population = 1 GROUP BY ALL")
    expected = sum(-(-p["n"] // 7) for p in parties)  # each party's members in groups of at most 7
    assert len(parties) == 3 and expected >= 6
    assert [(g["groups"], g["ids"]) for g in groups] == [(expected, expected)] * 3
    calls = rows(three_tiers, "SELECT step, count(*) AS n FROM llm_calls WHERE caller LIKE 'archetype:%' GROUP BY step ORDER BY step")
    assert [c["n"] for c in calls] == [expected] * 3  # the calls counted: one per group per tick
    joined = rows(three_tiers, "SELECT a.agent_id, c.caller, c.status FROM actions a JOIN llm_calls c USING (call_id) "
                               "WHERE a.tier = 'archetype'")
    assert len(joined) == 120 and all(r["caller"].startswith("archetype:") and r["status"] == "ok" for r in joined)
    assert rows(three_tiers, "SELECT count(*) AS n FROM actions WHERE tier != 'archetype' AND call_id IS NOT NULL")[0]["n"] == 0


def test_members_draw_individually_and_their_draws_reach_the_shared_env(three_tiers: Path) -> None:
    draws = rows(three_tiers, "SELECT group_id, step, count(DISTINCT tools_called) AS kinds, count(*) AS n FROM actions "
                              "WHERE tier = 'archetype' GROUP BY ALL")
    assert any(d["kinds"] > 1 for d in draws), "members of one group drew differently somewhere"
    posts = rows(three_tiers, "SELECT a.tier, count(*) AS n FROM social_actions s JOIN actions a ON a.agent_id = s.agent_id "
                              "AND a.step = s.step WHERE s.kind = 'post' GROUP BY ALL ORDER BY ALL")
    assert {p["tier"] for p in posts} >= {"archetype", "rule"}  # one env: every tier's posts are in it
    drawn = rows(three_tiers, "SELECT count(*) AS n FROM actions WHERE tier = 'archetype' AND list_contains(tools_called, 'create_post')")
    archetype_posts = next(p["n"] for p in posts if p["tier"] == "archetype")
    assert drawn[0]["n"] == archetype_posts


def test_rule_members_keep_their_state_across_ticks(three_tiers: Path) -> None:
    opinions = rows(three_tiers, "SELECT agent_id, step, json_extract(state, '$.opinion')::DOUBLE AS x FROM agent_state "
                                 "WHERE tier = 'rule' AND json_extract(state, '$.opinion') IS NOT NULL ORDER BY agent_id, step")
    assert len(opinions) == 90
    moved = {r["agent_id"] for r in rows(three_tiers, "SELECT agent_id FROM agent_state WHERE step = 3 "
                                                      "AND json_extract(state, '$.moved')::INT > 0")}
    assert moved, "bounded-confidence members heard opinions close to theirs and moved"
    counts = rows(three_tiers, "SELECT state FROM agent_state WHERE step = 3 AND state LIKE '%counts%' AND tier = 'rule'")
    assert len(counts) == 30  # the poster's counts, carried over three ticks


def test_an_archetype_grouped_by_a_clustering_makes_one_call_per_group_per_tick(tmp_path: Path) -> None:
    spec = parse_spec({
        "name": "clustered", "seed": 3, "llm": {"default": {"model": "sim/social"}},
        "population": [{"count": 30, "profile_template": {"party": ["red", "blue"], "age": [20, 45, 70]}, "tier": "archetype",
                        "archetype": {**ARCHETYPE, "key": [], "cluster": {"fields": ["party", "age"], "count": 4}, "group_size": 4}}],
        "environment": {"modules": [{"type": "SocialMediaSpace"}]},
        "steps": [{"type": "run", "num_steps": 2}],
    })
    _, groups = count_llm_callers(spec)
    assert groups >= 8  # 4 clusters of 30 members, in groups of at most 4
    summary = asyncio.run(run_experiment(spec, tmp_path / "run", InProcessShell()))
    assert summary.status == "completed", summary.error
    calls = rows(tmp_path / "run", "SELECT step, count(*) AS n FROM llm_calls WHERE caller LIKE 'archetype:%' GROUP BY step ORDER BY step")
    assert [c["n"] for c in calls] == [groups] * 2
    decided = rows(tmp_path / "run", "SELECT DISTINCT group_id, json_extract(key, '$.cluster')::INT AS cluster, "
                                     "json_extract_string(key, '$.party') AS party FROM archetype_decisions")
    assert len(decided) == groups and {d["cluster"] for d in decided} == {0, 1, 2, 3} and all(d["party"] for d in decided)
    members = rows(tmp_path / "run", "SELECT count(DISTINCT agent_id) AS n FROM actions WHERE tier = 'archetype' AND status = 'finished'")
    assert members[0]["n"] == 30
    projected = asyncio.run(estimate(spec, InProcessShell()))  # its sample is one cluster's first group: one call a tick
    assert projected.calls_by_kind["archetype"].expected == groups * 2


def test_a_policy_that_raises_is_that_members_error_and_the_tick_goes_on(tmp_path: Path) -> None:
    def fragile(observation: Observation, state: dict, rng: random.Random) -> list[Act]:
        state["seen"] = state.get("seen", 0) + 1
        if observation.agent_id % 4 == 0 and observation.step == 2:
            raise ZeroDivisionError("the policy broke")
        return [Act("create_post", {"text": "still here"})]

    register_policy(fragile)
    try:
        spec = parse_spec({"name": "fragile", "population": [{"count": 12, "tier": "rule", "rule": {"policy": "fragile"}}],
                           "environment": {"modules": [{"type": "SocialMediaSpace"}]}, "max_error_rate": 0.5,
                           "steps": [{"type": "run", "num_steps": 3}]})
        summary = asyncio.run(run_experiment(spec, tmp_path / "run", InProcessShell()))
    finally:
        POLICIES.unregister("fragile")
    assert summary.status == "completed_with_errors" and summary.errors == 3
    failed = rows(tmp_path / "run", "SELECT agent_id, step, error FROM actions WHERE status = 'error' ORDER BY agent_id")
    assert [(r["agent_id"], r["step"]) for r in failed] == [(0, 2), (4, 2), (8, 2)]
    assert all("ZeroDivisionError: the policy broke" in r["error"] for r in failed)
    seen = {r["agent_id"]: r["seen"] for r in rows(tmp_path / "run", "SELECT agent_id, json_extract(state, '$.seen')::INT AS seen "
                                                                       "FROM agent_state WHERE step = 3")}
    assert seen[0] == 2 and seen[1] == 3  # the failed step's state change was not kept
    posted = rows(tmp_path / "run", "SELECT count(*) AS n FROM social_actions WHERE kind = 'post'")
    assert posted[0]["n"] == 36 - 3


def test_an_archetype_whose_every_answer_is_malformed_fails_each_member_and_invents_nothing(tmp_path: Path) -> None:
    with serving_app(create_app(SimLLM(name="all-malformed", seed=5), SimFaults(rate_malformed=1.0))) as url:
        spec = parse_spec({
            "name": "malformed", "llm_check": False,
            "llm": {"default": {"model": "openai/sim", "base_url": f"{url}/v1"}},
            "population": [{"count": 10, "tier": "archetype", "archetype": {**ARCHETYPE, "key": [], "group_size": 5}}],
            "environment": {"modules": [{"type": "SocialMediaSpace"}]},
            "steps": [{"type": "run", "num_steps": 1}],
        })
        summary = asyncio.run(run_experiment(spec, tmp_path / "run", InProcessShell()))
    assert summary.status == "failed" and summary.errors == 10
    members = rows(tmp_path / "run", "SELECT status, error, call_id, tools_called FROM actions")
    assert len(members) == 10 and all(m["status"] == "llm_error" and m["tools_called"] == [] for m in members)
    assert all("the archetype call of group" in m["error"] for m in members)
    calls = rows(tmp_path / "run", "SELECT DISTINCT call_id, status FROM llm_calls")
    assert {m["call_id"] for m in members} <= {c["call_id"] for c in calls} and {c["status"] for c in calls} == {"error"}
    assert rows(tmp_path / "run", "SELECT count(*) AS n FROM social_actions")[0]["n"] == 0
    states = rows(tmp_path / "run", "SELECT state FROM agent_state")
    assert len(states) == 10 and all(s["state"] == "{}" for s in states)


async def test_a_fork_continues_the_members_from_the_tick_it_forks(three_tiers: Path, tmp_path: Path) -> None:
    _, forked = await fork_experiment(three_tiers, 2, tmp_path / "fork", InProcessShell(),
                                      patch={"steps": [{"type": "run", "num_steps": 4, "tick": 3600}]})
    assert forked.status == "completed", forked.error
    parent = {r["agent_id"]: r["state"] for r in rows(three_tiers, "SELECT agent_id, state FROM agent_state WHERE step = 2")}
    copied = {r["agent_id"]: r["state"] for r in rows(tmp_path / "fork", "SELECT agent_id, state FROM agent_state WHERE step = 2")}
    assert copied == parent  # ticks 1-2 are the parent's
    later = rows(tmp_path / "fork", "SELECT step, tier, count(*) AS n FROM actions WHERE step > 2 GROUP BY ALL ORDER BY ALL")
    assert [(r["step"], r["tier"], r["n"]) for r in later] == [
        (step, tier, n) for step in (3, 4) for tier, n in (("archetype", 40), ("llm", 4), ("rule", 60))]
    counts = rows(tmp_path / "fork", "SELECT json_extract(state, '$.counts.like_post')::INT + "
                                     "coalesce(json_extract(state, '$.counts.create_post')::INT, 0) AS n FROM agent_state "
                                     "WHERE step = 4 AND state LIKE '%counts%'")
    assert counts  # the posters' counts carried on from the parent's tick 2
