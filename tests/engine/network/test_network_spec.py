"""Networks in a spec: edge files checked when the spec is loaded (file, row, column and id named), generator
parameters checked against the agents, and a run's network_edges equal to its file exactly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from engine.errors import NetworkFileError, SpecError
from engine.network.edges import MAX_EDGE_BYTES
from engine.society.run.runner import run_experiment
from engine.spec import load_spec, parse_spec
from engine.storage.reader import ReplayReader

AGENTS = [{"id": i, "profile": {"name": f"A{i}", "party": "left" if i < 3 else "right"}} for i in range(6)]
STEPS = [{"type": "run", "num_steps": 1, "tick": 600}]


def spec_file(folder, layers: dict, **changes) -> str:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "net", "agents": AGENTS, "steps": STEPS, "network": {"layers": layers},
                                    **changes}))
    return str(path)


EDGES = "source,target,weight,type\n0,1,1.5,friend\n1,2,0.5,friend\n2,0,2,family\n3,4,1,friend\n"


@pytest.mark.parametrize(("text", "says", "row", "column"), [
    ("source,target\n0,1\n1,9\n", "row 2, column 'target': 9 is no agent's id", 2, "target"),
    ("source,target\n0,1\nx,2\n", "row 2, column 'source': 'x' is not an agent id", 2, "source"),
    ("source,target\n0,1\n2,2\n", "row 2: a self-loop (2 to itself)", 2, None),
    ("source,target\n0,1\n1,0\n", "row 2: the edge 1 -> 0 is there twice (in an undirected layer", 2, None),
    ("source,target,weight\n0,1,1\n1,2,heavy\n", "row 2, column 'weight': 'heavy' is not a number", 2, "weight"),
    ("from,to\n0,1\n", "has no 'source' column; its columns: from, to", None, "source"),
])
def test_an_edge_file_that_cannot_be_used_is_refused_at_load_naming_where(tmp_path, text, says, row, column):
    (tmp_path / "edges.csv").write_text(text)
    with pytest.raises(NetworkFileError) as caught:
        load_spec(spec_file(tmp_path, {"friend": {"from": "edges.csv"}}))
    assert says in str(caught.value) and "'edges.csv'" in str(caught.value)
    assert (caught.value.path, caught.value.row, caught.value.column) == ("network.layers.friend.from", row, column)


def test_a_directed_layer_allows_both_directions_and_a_missing_file_is_named(tmp_path):
    (tmp_path / "edges.csv").write_text("source,target\n0,1\n1,0\n")
    assert load_spec(spec_file(tmp_path, {"follow": {"from": "edges.csv", "directed": True}})).network is not None
    with pytest.raises(NetworkFileError, match="'nope.csv': is not a file"):
        load_spec(spec_file(tmp_path, {"follow": {"from": "nope.csv"}}))


def test_an_edge_file_whose_type_dictionary_would_decode_past_the_bound_is_refused_before_it_is(tmp_path):
    kind = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1500, dtype=np.int32)), pa.array(["x" * 2**20]))
    pq.write_table(pa.table({"source": range(1500), "target": range(1, 1501), "type": kind}), tmp_path / "edges.parquet",
                   compression="zstd")  # a few kB on disk; its type column 1.5 GB decoded
    with pytest.raises(NetworkFileError) as caught:
        load_spec(spec_file(tmp_path, {"friend": {"from": "edges.parquet"}}, agents=[{"id": i} for i in range(1501)]))
    assert "'edges.parquet': decodes to 1572" in str(caught.value) and f"at most {MAX_EDGE_BYTES} are allowed" in str(caught.value)
    assert caught.value.path == "network.layers.friend.from"


@pytest.mark.parametrize(("generate", "path", "says"), [
    ({"model": "barabasi_albert", "m": 6}, "network.layers.friend.generate", "m = 6 needs more agents than m; there are 6"),
    ({"model": "erdos_renyi", "p": 1.5}, "network.layers.friend.generate.erdos_renyi.p", "less than or equal to 1"),
    ({"model": "watts_strogatz", "k": 3, "p": 0.1}, "network.layers.friend.generate.watts_strogatz", "k must be even"),
    ({"model": "barabasi", "m": 2}, "network.layers.friend.generate", "barabasi_albert"),
    ({"model": "configuration", "degrees": [1, 1]}, "network.layers.friend.generate", "degrees lists 2 degrees, one per agent"),
    ({"model": "configuration", "distribution": {"1": 0.5, "9": 0.5}}, "network.layers.friend.generate",
     "a degree of 9 needs more agents"),
    ({"model": "configuration", "distribution": {"1": 0.5}}, "network.layers.friend.generate.configuration",
     "shares sum to 0.5, not 1"),
    ({"model": "block", "attribute": "party", "mean_degree": 2, "homophily": 1.2},
     "network.layers.friend.generate.block.homophily", "less than or equal to 1"),
    ({"model": "block", "attribute": "pary", "mean_degree": 2, "homophily": 0.5},
     "network.layers.friend.generate.attribute", "no agent has a persona field 'pary'; did you mean 'party'?"),
    ({"model": "block", "attribute": "party", "mean_degree": 4, "homophily": 1.0}, "network.layers.friend.generate",
     "edge probabilities of 2 within groups"),  # groups of 3 cannot give each member 4 edges inside
])
def test_a_generator_parameter_out_of_range_is_refused_at_its_field(generate, path, says):
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "net", "agents": AGENTS, "steps": STEPS, "network": {"layers": {"friend": {"generate": generate}}}})
    assert caught.value.path == path and says in str(caught.value), (caught.value.path, str(caught.value))



@pytest.mark.parametrize(("generate", "edges"), [
    ({"model": "erdos_renyi", "p": 1.0}, "71,994,000"),
    ({"model": "configuration", "distribution": {"11999": 1.0}}, "71,994,000"),
    ({"model": "block", "attribute": "name", "mean_degree": 9_000, "homophily": 0.0}, "54,000,000"),
])
def test_a_generator_expecting_more_edges_than_any_layer_may_have_is_refused_at_load(generate, edges):
    # Issue 50: no quota bounds the CLI, so the engine bounds every generated layer (engine.network.spec.MAX_LAYER_EDGES).
    data = {"name": "net", "population": [{"count": 12_000}], "steps": STEPS, "network": {"layers": {"kin": {"generate": generate}}}}
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.path == "network.layers.kin.generate"
    assert f"expects {edges} edges" in str(caught.value) and "at most 50,000,000" in str(caught.value)
    parse_spec({**data, "network": {"layers": {"kin": {"generate": {"model": "erdos_renyi", "p": 0.5}}}}})  # 36 million: allowed

async def test_a_runs_network_edges_equal_its_file_and_a_generator_is_seeded(tmp_path, shell):
    (tmp_path / "edges.csv").write_text(EDGES)
    spec = load_spec(spec_file(tmp_path, {"friend": {"from": "edges.csv"},
                                          "follow": {"generate": {"model": "barabasi_albert", "m": 2}, "directed": True}}))
    summary = await run_experiment(spec, tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(tmp_path / "run") as reader:
        friend = reader.query("SELECT source, target, weight, type, step, change FROM network_edges WHERE layer = 'friend'").to_pylist()
        follow = reader.query("SELECT source, target, directed FROM network_edges WHERE layer = 'follow' "
                              "ORDER BY source, target").to_pylist()
    assert [(r["source"], r["target"], r["weight"], r["type"]) for r in friend] == [
        (0, 1, 1.5, "friend"), (1, 2, 0.5, "friend"), (2, 0, 2.0, "family"), (3, 4, 1.0, "friend")]
    assert {(r["step"], r["change"]) for r in friend} == {(0, "initial")}
    pairs = {(r["source"], r["target"]) for r in follow}
    # Price's model: each agent after the first three follows older ones, none back (issue 51: it was each edge both ways)
    assert all(a > b and (b, a) not in pairs for a, b in pairs) and all(r["directed"] for r in follow)
    await run_experiment(spec, tmp_path / "again", shell)
    with ReplayReader(tmp_path / "again") as reader:
        again = reader.query("SELECT source, target FROM network_edges WHERE layer = 'follow' ORDER BY source, target").to_pylist()
    assert [(r["source"], r["target"]) for r in again] == sorted(pairs)  # the same seed, the same graph


async def test_a_run_reports_how_its_generated_layers_fit_their_models(shell, tmp_path):
    spec = parse_spec({
        "name": "fit", "steps": STEPS, "seed": 3,
        "population": [{"count": 400, "profile_template": {"party": ["left", "right"]}}],
        "network": {"layers": {"friend": {"generate": {"model": "block", "attribute": "party", "mean_degree": 6, "homophily": 0.8}},
                               "follow": {"generate": {"model": "configuration", "distribution": {"2": 0.5, "6": 0.5}},
                                          "directed": True, "mutual": True}}}})
    summary = await run_experiment(spec, tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(tmp_path / "run") as reader:
        fit = {(r["layer"], r["measure"]): r for r in reader.query("SELECT * FROM network_fit").to_pylist()}
        inside = reader.query(
            "SELECT avg(CASE WHEN a.profile->>'party' = b.profile->>'party' THEN 1 ELSE 0 END) AS share FROM network_edges e "
            "JOIN agent_profiles a ON a.agent_id = e.source JOIN agent_profiles b ON b.agent_id = e.target "
            "WHERE e.layer = 'friend'").to_pylist()[0]["share"]
        follow_edges = reader.query("SELECT count(*) AS n FROM network_edges WHERE layer = 'follow'").to_pylist()[0]["n"]
        sizes = [r["n"] for r in reader.query("SELECT count(*) AS n FROM agent_profiles GROUP BY profile->>'party'").to_pylist()]
    homophily = fit[("friend", "coleman_index_pooled")]
    assert homophily["model"] == "block" and homophily["target"] == 0.8
    s0 = sum(k * (k - 1) for k in sizes) / (400 * 399)  # the share of pairs inside a party
    assert homophily["achieved"] == pytest.approx((inside - s0) / (1 - s0), abs=0.02)  # the edges say the same
    assert homophily["achieved"] == pytest.approx(0.8, abs=0.1)
    assert fit[("follow", "edges")]["achieved"] == follow_edges / 2  # a mutual layer holds each edge both ways
    assert fit[("follow", "degree_p50")]["target"] in (2.0, 6.0) and fit[("follow", "ends_kept")]["achieved"] > 0.95
