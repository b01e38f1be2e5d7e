"""Env modules take a layer of the network as a kwarg (``network: {follows: follow}``): SocialMediaSpace's follows
come from the follow layer, and a layer, kwarg or clash that cannot be is refused at its field."""

from __future__ import annotations

import pytest
import yaml

from engine.errors import SpecError
from engine.society.run.network import SpecNetwork
from engine.society.run.runner import run_experiment
from engine.spec import load_spec, parse_spec
from engine.storage.reader import ReplayReader

AGENTS = [{"id": i, "profile": {"name": f"A{i}"}} for i in range(5)]


def social_spec(network: dict, module: dict | None = None) -> dict:
    return {"name": "social", "agents": AGENTS, "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
            "network": network,
            "environment": {"modules": [module or {"type": "SocialMediaSpace", "network": {"follows": "follow"}}]}}


def test_the_adjacency_of_a_directed_and_an_undirected_layer(tmp_path):
    (tmp_path / "follow.csv").write_text("source,target\n0,1\n0,2\n3,0\n")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(social_spec(
        {"layers": {"follow": {"from": "follow.csv", "directed": True}, "friend": {"from": "follow.csv"}}})))
    network = SpecNetwork(load_spec(tmp_path / "spec.yaml"))
    follow, friend = network.graph("follow"), network.graph("friend")
    assert {a: follow.successors(a) for a in range(5)} == {0: [1, 2], 1: [], 2: [], 3: [0], 4: []}
    assert {a: friend.successors(a) for a in range(5)} == {0: [1, 2, 3], 1: [0], 2: [0], 3: [0], 4: []}
    assert follow.predecessors(0) == [3] and follow.layer == "follow"


async def test_social_media_follows_come_from_the_follow_layer(tmp_path, shell):
    (tmp_path / "follow.csv").write_text("source,target\n0,1\n0,2\n3,0\n4,3\n")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(social_spec({"layers": {"follow": {"from": "follow.csv", "directed": True}}})))
    summary = await run_experiment(load_spec(tmp_path / "spec.yaml"), tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(tmp_path / "run") as reader:
        state = reader.query("SELECT follows_total, actions FROM social_state WHERE step = 1").to_pylist()[0]
        follows = reader.query("SELECT count(*) AS n FROM social_actions WHERE kind IN ('follow', 'unfollow')").column("n")[0].as_py()
    # the file's 4 follows, and whatever the agents changed in tick 1 (the simulated LLM may follow or unfollow)
    assert state["follows_total"] - 4 in range(-follows, follows + 1)
    if follows == 0:
        assert state["follows_total"] == 4


@pytest.mark.parametrize(("module", "path", "says"), [
    ({"type": "SocialMediaSpace", "network": {"follows": "friends"}}, "environment.modules.0.network.follows",
     "no layer 'friends' in the spec's network (its layers: follow)"),
    ({"type": "SocialMediaSpace", "network": {"folows": "follow"}}, "environment.modules.0.network.folows",
     "SocialMediaSpace takes no kwarg 'folows'"),
    ({"type": "SocialMediaSpace", "network": {"follows": "follow"}, "kwargs": {"follows": {"0": [1]}}},
     "environment.modules.0.network.follows", "follows comes from the network layer follow: leave it out of kwargs"),
])
def test_a_module_network_that_cannot_be_is_refused_at_its_field(module, path, says):
    with pytest.raises(SpecError) as caught:
        parse_spec(social_spec({"layers": {"follow": {"generate": {"model": "erdos_renyi", "p": 0.5}}}}, module))
    assert caught.value.path == path and says in str(caught.value), (caught.value.path, str(caught.value))


async def test_messaging_reach_comes_from_the_contacts_layer(tmp_path):
    from datetime import datetime

    from engine.env.modules.messaging import MessagingSpace
    from engine.errors import ToolCallError

    (tmp_path / "friend.csv").write_text("source,target\n0,1\n1,2\n")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(social_spec(
        {"layers": {"friend": {"from": "friend.csv"}}}, {"type": "MessagingSpace", "network": {"contacts": "friend"}})))
    spec = load_spec(tmp_path / "spec.yaml")
    (module,) = spec.environment.modules
    space = MessagingSpace(**SpecNetwork(spec).module_kwargs(module))
    space.bind_agents(list(range(5)))
    await space.init(datetime(2026, 1, 1))
    assert "queued" in await space.call_tool("send_message", {"agent_id": 2, "to_agent_id": 1, "content": "hi"})
    with pytest.raises(ToolCallError, match="agent 2 is not one of your contacts; your 1 contacts: agent 1"):
        await space.call_tool("send_message", {"agent_id": 0, "to_agent_id": 2, "content": "hi"})
    with pytest.raises(ToolCallError, match="agent 0 is not one of your contacts; you have none"):
        await space.call_tool("send_message", {"agent_id": 4, "to_agent_id": 0, "content": "hi"})
    everyone = MessagingSpace()
    assert "queued" in await everyone.call_tool("send_message", {"agent_id": 4, "to_agent_id": 0, "content": "hi"})
    inline = MessagingSpace(contacts={0: [1]})  # a spec may also give contacts inline: agent id -> ids
    with pytest.raises(ToolCallError, match="your 1 contacts: agent 1"):
        await inline.call_tool("send_message", {"agent_id": 0, "to_agent_id": 2, "content": "hi"})


@pytest.mark.parametrize(("persona", "kwargs", "path", "says"), [
    ({"grups": "party"}, {}, "environment.modules.0.persona.grups", "SocialMediaSpace takes no kwarg 'grups' to fill from"),
    ({"groups": "parti"}, {}, "environment.modules.0.persona.groups",
     "no agent has a persona field 'parti'; did you mean 'party'? (the persona fields: party)"),
    ({"groups": "party"}, {"groups": {"0": "x"}}, "environment.modules.0.persona.groups", "leave it out of kwargs"),
])
def test_a_persona_kwarg_that_cannot_be_filled_is_refused_at_its_field(persona, kwargs, path, says):
    agents = [{"id": i, "profile": {"party": "left"}} for i in range(3)]
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "p", "agents": agents, "steps": [{"type": "run", "num_steps": 1}],
                    "environment": {"modules": [{"type": "SocialMediaSpace", "persona": persona, "kwargs": kwargs}]}})
    assert caught.value.path == path and says in str(caught.value), (caught.value.path, str(caught.value))


async def test_groups_from_a_persona_field_give_the_e_i_index_and_seed_posts_in_a_group(tmp_path, shell):
    spec = parse_spec({
        "name": "groups", "seed": 2, "population": [{"count": 120, "profile_template": {"party": ["left", "right", "centre"]}}],
        "llm": {"default": {"model": "sim/social", "extra": {"social": {"follow": 0, "unfollow": 0}}}},
        "network": {"layers": {"follow": {"generate": {"model": "block", "attribute": "party", "mean_degree": 6,
                                                       "homophily": 0.6}, "directed": True}}},
        "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "follow"}, "persona": {"groups": "party"}}]},
        "steps": [{"type": "run", "num_steps": 1, "tick": 3600},
                  {"type": "intervene", "calls": [{"tool": "seed_post", "arguments": {"text": "Vote!", "count": 5, "at": "group",
                                                                                      "group": "centre"}}]},
                  {"type": "run", "num_steps": 1, "tick": 3600}]})
    summary = await run_experiment(spec, tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(tmp_path / "run") as reader:
        measured = reader.query("SELECT step, ei_index FROM network_measures ORDER BY step").to_pylist()
        recount = reader.query("""
            SELECT (count(*) FILTER (WHERE a.profile->>'party' <> b.profile->>'party')
                    - count(*) FILTER (WHERE a.profile->>'party' = b.profile->>'party')) / count(*) AS ei
            FROM network_edges e JOIN agent_profiles a ON a.agent_id = e.source JOIN agent_profiles b ON b.agent_id = e.target
            WHERE e.step = 0""").to_pylist()[0]["ei"]
        seeded = reader.query("SELECT DISTINCT a.profile->>'party' AS party FROM social_actions s "
                              "JOIN agent_profiles a ON a.agent_id = s.agent_id WHERE s.intervention").to_pylist()
    assert [m["step"] for m in measured] == [1, 2]
    assert all(m["ei_index"] == pytest.approx(recount) for m in measured)  # no follow changes: the start's graph
    assert recount < 0  # homophily 0.6: more edges inside parties than between
    assert seeded == [{"party": "centre"}]
    # the results page plots the E-I index, and names the directed layer's degree as its in-degree
    from engine.results.report import load_report

    panels = {panel.key: panel for panel in load_report(tmp_path / "run").panels}
    (ei,) = panels["network.ei_index"].lines
    assert panels["network.ei_index"].title.startswith("E-I index") and ei.y == pytest.approx([recount, recount])
    assert [line.label for line in panels["network.degrees"].lines] == ["follow (in-degree)"]
