"""Issue 37's done-when, offline: 2,000 agents on a Barabási–Albert follow graph, on the social simulated LLM,
make cascades that a direct recount from ``social_actions`` agrees with; a fork that removes the top 1% of nodes
by degree changes the cascade figures against its parent; every edge change is in ``network_edges``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.society.shells import InProcessShell
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

AGENTS = 2000
RUN = {"type": "run", "num_steps": 1, "tick": 3600}
SPEC = {
    "name": "cascades", "seed": 11, "population": [{"count": AGENTS}],
    "llm": {"default": {"model": "sim/social", "extra": {"social": {"post": 0.15, "repost": 0.45, "like": 0.1}}}},
    "network": {"layers": {"follow": {"generate": {"model": "barabasi_albert", "m": 3}}}},
    "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "follow"}}]},
    "steps": [RUN, RUN, RUN],
}
#: Each original post's tree, recounted from the actions: a repost's parent is the post it was reposted from.
RECOUNT = """
WITH RECURSIVE tree(root, node, depth) AS (
    SELECT post_id, post_id, 0 FROM social_actions WHERE kind = 'post'
    UNION ALL
    SELECT tree.root, a.post_id, tree.depth + 1 FROM tree JOIN social_actions a ON a.kind = 'repost' AND a.parent_post_id = tree.node
), levels AS (SELECT root, depth, count(*) AS n FROM tree GROUP BY root, depth)
SELECT root AS root_post_id, sum(n) AS size, max(depth) AS depth, max(n) AS max_breadth FROM levels GROUP BY root ORDER BY root
"""
LATEST = """
SELECT root_post_id, size, depth, max_breadth FROM social_cascades
QUALIFY row_number() OVER (PARTITION BY root_post_id ORDER BY step DESC) = 1 ORDER BY root_post_id
"""
FIGURES = "SELECT count(*) AS cascades, sum(size) AS posts, max(size) AS largest, max(depth) AS deepest FROM ({})"


def rows(run: Path, sql: str) -> list[dict]:
    with ReplayReader(run) as reader:
        return reader.query(sql).to_pylist()


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("cascades") / "parent"
    summary = asyncio.run(run_experiment(parse_spec(SPEC), run, InProcessShell()))
    assert summary.status == "completed", summary.error
    return run


async def test_the_cascades_agree_with_a_recount_from_the_actions(parent: Path) -> None:
    cascades = rows(parent, LATEST)
    assert cascades == rows(parent, RECOUNT)
    figures = rows(parent, FIGURES.format(LATEST))[0]
    assert figures["largest"] > 10 and figures["deepest"] >= 2, figures  # trees, not only lone posts
    # the virality of a two-post cascade is 1 (one pair, one step apart); a lone post has none
    pairs = rows(parent, "SELECT size, structural_virality AS v FROM social_cascades WHERE size <= 2")
    assert {(r["size"], r["v"]) for r in pairs} <= {(1, None), (2, 1.0)}


async def test_every_edge_change_is_in_network_edges_at_its_tick(parent: Path) -> None:
    changes = rows(parent, "SELECT step, change, source, target FROM network_edges WHERE step > 0 ORDER BY ALL")
    assert changes, "the social simulated LLM follows and unfollows"
    # each is a follow or unfollow that changed the graph: the first follow of an edge not there, ...
    followed = rows(parent, """
        SELECT step, CASE kind WHEN 'follow' THEN 'added' ELSE 'removed' END AS change, agent_id AS source,
               target_agent_id AS target FROM social_actions WHERE kind IN ('follow', 'unfollow') ORDER BY ALL""")
    assert set(map(tuple, (c.values() for c in changes))) <= set(map(tuple, (f.values() for f in followed)))
    totals = rows(parent, "SELECT step, follows_total FROM social_state ORDER BY step")
    initial = rows(parent, "SELECT count(*) AS n FROM network_edges WHERE step = 0")[0]["n"] * 2  # undirected: both ways
    for row in totals:
        net = sum((1 if c["change"] == "added" else -1) for c in changes if c["step"] <= row["step"])
        assert row["follows_total"] == initial + net
    measures = rows(parent, "SELECT step, edges, reciprocity FROM network_measures ORDER BY step")
    assert [(m["step"], m["edges"]) for m in measures] == [(t["step"], t["follows_total"]) for t in totals]
    assert all(0.9 < m["reciprocity"] < 1 for m in measures[1:])  # mutual at the start; one-way follows since


async def test_removing_the_top_percent_by_degree_changes_a_forks_cascades(parent: Path, tmp_path: Path) -> None:
    intervention = {"type": "intervene", "calls": [{"tool": "remove_top_nodes", "arguments": {"share": 0.01}}]}
    cut = {"steps": [RUN, intervention, RUN, RUN]}
    _, forked = await fork_experiment(parent, 1, tmp_path / "cut", InProcessShell(), patch=cut)
    assert forked.status == "completed", forked.error
    # (a fork with the parent's own steps ends as the parent did: tests/engine/society/fork)
    before, after = rows(parent, FIGURES.format(LATEST))[0], rows(tmp_path / "cut", FIGURES.format(LATEST))[0]
    print("cascades of the parent:", before, "and of the fork without the top 1%:", after)
    assert after != before
    # the 20 hubs lost every follow, in and out, at the tick after the intervention
    removed = rows(tmp_path / "cut", "SELECT count(*) AS n, count(DISTINCT source) AS s FROM network_edges "
                   "WHERE change = 'removed' AND step = 2")[0]
    hubs = rows(parent, """
        WITH ends AS (SELECT source AS a FROM network_edges WHERE step = 0 UNION ALL SELECT target FROM network_edges WHERE step = 0)
        SELECT a, count(*) AS degree FROM ends GROUP BY a ORDER BY degree DESC, a LIMIT 20""")
    assert removed["n"] >= 2 * sum(h["degree"] for h in hubs) - 2 * 20 * 20  # both ways, less edges between hubs
    query = rows(tmp_path / "cut", "SELECT kind, status, text FROM society_queries")
    assert query == [{"kind": "intervene", "status": "ok", "text": "remove_top_nodes(share=0.01)"}]
