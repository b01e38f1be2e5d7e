"""Counting a raw spec before validation: agents, agent-steps and cells, sweeps of the counted fields included."""

from __future__ import annotations

from typing import Any

import pytest

from service.admission.spec_counts import SpecCounts, count_spec


def spec(**fields: Any) -> dict[str, Any]:
    return {"name": "n", "agents": [{"id": 0}, {"id": 1}], "steps": [{"type": "run", "num_steps": 3}], **fields}


def test_agents_are_the_explicit_list_plus_every_population_count_and_ticks_the_run_steps() -> None:
    counts = count_spec(spec(population=[{"count": 10}, {"count": "5"}], steps=[
        {"type": "run", "num_steps": 2}, {"type": "ask", "question": "q"}, {"type": "run", "num_steps": 4.0},
    ]), max_cells=100)
    assert counts == SpecCounts(agents=17, agent_steps=17 * 6, explicit_agents=2, populations=(10, 5))
    assert counts.agents_path(11) == "population.0.count"
    assert counts.agents_path(12) == "population.1.count"
    assert counts.agents_path(1) == "agents"


@pytest.mark.parametrize("data", [None, [], "x", {"agents": "many", "population": [{"count": "lots"}, 7], "steps": 3}])
def test_malformed_data_counts_as_nothing(data: Any) -> None:
    counts = count_spec(data, max_cells=100)
    assert (counts.agents, counts.agent_steps, counts.cells) == (0, 0, 1)


def test_a_number_too_long_to_parse_counts_as_more_than_any_quota() -> None:
    assert count_spec(spec(steps=[{"type": "run", "num_steps": "9" * 5000}]), max_cells=10).agent_steps >= 2 * 10**18


def test_a_sweep_multiplies_agent_steps_by_its_cells() -> None:
    counts = count_spec(spec(sweep={"grid": {"llm.default.options.temperature": [0.1, 0.5, 0.9]}, "replications": 2}), 100)
    assert (counts.agents, counts.agent_steps, counts.cells) == (2, 2 * 3 * 6, 6)


def test_replications_alone_make_cells_and_multiply_agent_steps() -> None:
    # issue 33: {"sweep": {"replications": 10000}} counted as one cell, past max_agent_steps and any cell quota
    assert count_spec(spec(sweep={"replications": 10_000}), 100).cells == 10_000
    counts = count_spec(spec(sweep={"replications": 5}), 100)
    assert (counts.agents, counts.agent_steps, counts.cells) == (2, 2 * 3 * 5, 5)


def test_a_sweep_of_the_counted_fields_counts_each_cell_exactly() -> None:
    data = spec(population=[{"count": 10}], sweep={"grid": {
        "population.0.count": [1, 1000], "steps.*.num_steps": [1, 2], "seedless.key": [0, 1, 2],
    }})
    counts = count_spec(data, max_cells=100)
    # agents per cell: 3 or 1002; ticks: 1 or 2; each (count, ticks) pair in 3 cells.
    assert counts.agents == 1002
    assert counts.agent_steps == 3 * (3 * 1 + 3 * 2 + 1002 * 1 + 1002 * 2)
    assert counts.cells == 12
    assert counts.agents_path(500) == "sweep.grid.population.0.count"


def test_whole_lists_swept_are_counted_by_their_own_members() -> None:
    data = spec(sweep={"grid": {"population": [[{"count": 50}, {"count": 50}]], "agents": [[], [{"id": 9}] * 7]}})
    counts = count_spec(data, max_cells=100)
    assert counts.agents == 107
    assert counts.agent_steps == 3 * (100 + 107)


def test_a_sweep_past_the_cell_limit_is_counted_without_enumerating_it() -> None:
    grid = {f"llm.default.options.k{i}": list(range(10)) for i in range(12)}
    counts = count_spec(spec(sweep={"grid": grid}), max_cells=10_000)
    assert counts.cells == 10**12
    assert counts.agent_steps == 2 * 3 * 10**12


def test_a_table_population_counts_its_count_or_else_every_row() -> None:
    rows = [{"name": f"P{i}"} for i in range(24)]
    counts = count_spec(spec(population=[{"from": "people.csv", "rows": rows}, {"from": "people.csv", "rows": rows, "count": 5}]), 100)
    assert (counts.agents, counts.populations, counts.agent_steps) == (2 + 24 + 5, (24, 5), (2 + 24 + 5) * 3)
    assert counts.agents_path(20) == "population.0.count"
    swept = count_spec(spec(population=[{"rows": rows}], sweep={"grid": {"population.0.count": [4, 12]}}), 100)
    assert swept.agent_steps == (2 + 4) * 3 + (2 + 12) * 3  # each cell's count, against the table's 24 rows
    assert swept.agents >= 2 + 12


def _network(**layers: Any) -> dict[str, Any]:
    return {"layers": {name: {"generate": generate} for name, generate in layers.items()}}


@pytest.mark.parametrize(("generate", "edges"), [
    ({"model": "erdos_renyi", "p": 1.0}, 3000 * 2999 // 2),  # issue 50's wedge
    ({"model": "erdos_renyi", "p": "0.5"}, 3000 * 2999 // 4),  # a numeric string, as lax validation reads it
    ({"model": "barabasi_albert", "m": 1500}, 1500 + 1499 * 1500),
    ({"model": "watts_strogatz", "k": 2998, "p": 0.1}, 3000 * 1499),
    ({"model": "configuration", "distribution": {"2999": 1.0}}, 3000 * 2999 // 2),
    ({"model": "configuration", "degrees": [2999] * 3000}, 3000 * 2999 // 2),
    ({"model": "block", "attribute": "party", "mean_degree": 2000, "homophily": 0.5}, 3000 * 1000),
    ({"model": "erdos_renyi", "p": 2.0}, 0),  # refused by validation anyway
    ({"model": "small_world"}, 0),
])
def test_each_generator_counts_the_edges_it_expects_over_the_agents(generate: dict[str, Any], edges: int) -> None:
    counts = count_spec(spec(population=[{"count": 2998}], network=_network(friend=generate)), max_cells=100)
    assert counts.agents == 3000 and counts.edges == edges and counts.layer_edges == (("friend", edges),)
    if edges:
        assert counts.edges_path(edges - 1) == "network.layers.friend.generate"


def test_the_edges_of_all_generated_layers_add_up_and_the_layer_that_passes_the_limit_is_named() -> None:
    network = _network(a={"model": "watts_strogatz", "k": 4, "p": 0.1}, b={"model": "erdos_renyi", "p": 0.1})
    network["layers"]["file"] = {"from": "edges.csv"}  # bounded by its file, not counted here
    counts = count_spec(spec(population=[{"count": 998}], network=network), max_cells=100)
    assert counts.layer_edges == (("a", 2000), ("b", 49950)) and counts.edges == 51950
    assert counts.edges_path(1999) == "network.layers.a.generate"
    assert counts.edges_path(2000) == counts.edges_path(50_000) == "network.layers.b.generate"


def test_a_sweep_of_the_network_or_the_agents_counts_the_largest_cells_edges() -> None:
    base = spec(population=[{"count": 98}], network=_network(friend={"model": "erdos_renyi", "p": 0.01}))
    by_p = count_spec({**base, "sweep": {"grid": {"network.layers.friend.generate.p": [0.1, 1.0, 0.5]}}}, 100)
    assert (by_p.edges, by_p.edges_key) == (100 * 99 // 2, "network.layers.friend.generate.p")
    assert by_p.edges_path(1000) == "sweep.grid.network.layers.friend.generate.p"
    whole = {"kin": {"generate": {"model": "barabasi_albert", "m": 10}}}
    by_layers = count_spec({**base, "sweep": {"grid": {"network.layers": [whole], "seed": [1, 2]}}}, 100)
    assert (by_layers.edges, by_layers.layer_edges, by_layers.edges_key) == (10 + 89 * 10, (("kin", 900),), "network.layers")
    by_agents = count_spec({**base, "sweep": {"grid": {"population.0.count": [8, 998]}}}, 100)
    assert (by_agents.agents, by_agents.edges) == (1000, round(0.01 * 1000 * 999 / 2))
    assert by_agents.edges_path(100) == "network.layers.friend.generate"
    both = count_spec({**base, "sweep": {"grid": {"population.0.count": [8, 998], "network.layers.friend.generate.p": [0.0, 0.2]}}}, 100)
    assert both.edges == round(0.2 * 1000 * 999 / 2) and both.edges_path(100) == "sweep.grid.network.layers.friend.generate.p"
