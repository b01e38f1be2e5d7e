"""SocialMediaSpace publishes at the env step, ranks feeds two ways, searches, refuses bad calls, replays and persists."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.agent.skills.model import parse_skill
from engine.env.modules.social_media import SocialMediaSpace
from engine.errors import SpecError, ToolCallError
from engine.network.graph import Graph

T0 = datetime(2024, 1, 1, 8, 0)
T1 = T0 + timedelta(hours=1)
T2 = T1 + timedelta(hours=1)
T3 = T2 + timedelta(hours=1)


async def call(space: SocialMediaSpace, tool: str, **args: Any) -> Any:
    return await space.call_tool(tool, args)


async def read(space: SocialMediaSpace, tool: str, **args: Any) -> Any:
    return await space.call_tool(tool, args, readonly=True)


async def seeded(**kwargs: Any) -> SocialMediaSpace:
    """Agents 1 and 2 have posted #1 and #2 at T1."""
    space = SocialMediaSpace(**kwargs)
    await space.init(T0)
    await call(space, "create_post", agent_id=2, text="Rain again in the valley")
    await call(space, "create_post", agent_id=1, text="Hello world")
    await space.step(3600, T1)
    return space


async def test_a_post_is_published_only_when_the_step_runs() -> None:
    space = SocialMediaSpace()
    await space.init(T0)
    assert await call(space, "create_post", agent_id=1, text="  first!  ") == "post queued; it will be published at the end of this step"
    assert await read(space, "my_feed", agent_id=2) == "Your feed is empty."
    await space.step(3600, T1)
    assert await read(space, "my_feed", agent_id=2) == (
        "Your feed (chronological, 1 of 1 posts) (you follow nobody yet, so it shows everyone's posts):\n"
        "#1 by agent 1 at 2024-01-01 09:00: first! [0 likes, 0 comments, 0 reposts]"
    )
    assert space.t == T1


async def test_post_ids_follow_agent_order_not_call_order() -> None:
    space = await seeded()
    assert "#1 by agent 1 at 2024-01-01 09:00: Hello world" in await read(space, "view_post", agent_id=3, post_id=1)
    assert "#2 by agent 2 at 2024-01-01 09:00: Rain again" in await read(space, "view_post", agent_id=3, post_id=2)


async def test_own_posts_stay_out_of_the_feed() -> None:
    space = await seeded()
    assert await read(space, "my_feed", agent_id=1) == (
        "Your feed (chronological, 1 of 1 posts) (you follow nobody yet, so it shows everyone's posts):\n"
        "#2 by agent 2 at 2024-01-01 09:00: Rain again in the valley [0 likes, 0 comments, 0 reposts]"
    )


async def test_comments_likes_and_reposts_count_from_the_next_step() -> None:
    space = await seeded()
    assert await call(space, "comment", agent_id=3, post_id=1, text="welcome") == "comment on post #1 queued"
    assert await call(space, "like_post", agent_id=3, post_id=1) == "like of post #1 queued"
    assert await call(space, "like_post", agent_id=3, post_id=1) == "you already like post #1"
    assert await call(space, "repost", agent_id=4, post_id=1, comment="look") == "repost of post #1 queued"
    assert "[0 likes, 0 comments, 0 reposts]" in await read(space, "view_post", agent_id=3, post_id=1)
    await space.step(3600, T2)

    assert await read(space, "view_post", agent_id=3, post_id=1) == (
        "#1 by agent 1 at 2024-01-01 09:00: Hello world [1 likes, 1 comments, 1 reposts] (you like it)\n  - agent 3: welcome"
    )
    assert await read(space, "view_post", agent_id=5, post_id=3) == (
        '#3 agent 4 reposted #1 by agent 1 at 2024-01-01 10:00 ("Hello world"): look [0 likes, 0 comments, 0 reposts]\n'
        "  (no comments yet)"
    )
    assert await call(space, "like_post", agent_id=3, post_id=1) == "you already like post #1"
    # Reposting a repost shares the original.
    assert await call(space, "repost", agent_id=5, post_id=3) == "repost of post #1 (through #3) queued"
    assert await read(space, "social_statistics") == "3 posts (1 reposts), 1 comments, 1 likes, 0 follows"


async def test_chronological_feed_shows_followed_agents_newest_first() -> None:
    space = await seeded()
    assert await call(space, "follow", agent_id=3, target_agent_id=2) == "you will follow agent 2 from the next step"
    assert await call(space, "follow", agent_id=3, target_agent_id=2) == "you already follow agent 2"
    await call(space, "create_post", agent_id=2, text="Sun at last")
    await space.step(3600, T2)

    assert await read(space, "my_feed", agent_id=3) == (
        "Your feed (chronological, 2 of 2 posts):\n"
        "#3 by agent 2 at 2024-01-01 10:00: Sun at last [0 likes, 0 comments, 0 reposts]\n"
        "#2 by agent 2 at 2024-01-01 09:00: Rain again in the valley [0 likes, 0 comments, 0 reposts]"
    )
    assert await read(space, "my_profile", agent_id=2) == (
        "You follow 0 agents; 1 agents follow you; you have published 2 posts (latest #3)."
    )
    assert await call(space, "unfollow", agent_id=3, target_agent_id=2) == "you will stop following agent 2 from the next step"
    assert await call(space, "unfollow", agent_id=3, target_agent_id=2) == "you do not follow agent 2"
    await space.step(3600, T3)
    assert "you follow nobody yet" in await read(space, "my_feed", agent_id=3)


async def test_engagement_feed_ranks_by_likes_comments_and_reposts() -> None:
    space = await seeded(feed_algorithm="engagement")
    for fan in (3, 4):
        await call(space, "like_post", agent_id=fan, post_id=2)
    await space.step(3600, T2)
    await call(space, "create_post", agent_id=5, text="brand new")
    await space.step(3600, T3)

    feed = await read(space, "my_feed", agent_id=6)
    assert feed.splitlines()[0] == "Your feed (engagement, 3 of 3 posts):"
    assert [line.split()[0] for line in feed.splitlines()[1:]] == ["#2", "#3", "#1"]
    # The per-call override and limit.
    chrono = await read(space, "view_feed", agent_id=6, algorithm="chronological", limit=1)
    assert chrono.splitlines()[0].startswith("Your feed (chronological, 1 of 3 posts)")
    assert chrono.splitlines()[1].startswith("#3 by agent 5")


async def test_engagement_feed_boosts_followed_authors_and_fades_old_posts() -> None:
    space = await seeded(engagement_half_life_hours=1.0, follow_boost=5.0)
    await call(space, "follow", agent_id=6, target_agent_id=1)
    await space.step(3600, T2)
    ranked = await read(space, "view_feed", agent_id=6, algorithm="engagement")
    assert [line.split()[0] for line in ranked.splitlines()[1:]] == ["#1", "#2"]

    await call(space, "like_post", agent_id=3, post_id=2)
    await space.step(3600, T3)
    await call(space, "create_post", agent_id=4, text="fresh")
    await space.step(3600, T3 + timedelta(hours=1))
    # Three hours at a one-hour half-life leave the boosted post below the fresh one.
    ranked = await read(space, "view_feed", agent_id=6, algorithm="engagement")
    assert ranked.splitlines()[1].startswith("#3 by agent 4")


async def test_search_ranks_posts_by_matching_words_then_recency() -> None:
    space = await seeded()
    await call(space, "create_post", agent_id=3, text="rain, rain and more RAIN in the world")
    await space.step(3600, T2)
    result = await read(space, "search_posts", agent_id=9, query="Rain world!")
    assert result.splitlines()[0] == "3 posts match 'Rain world!':"
    # #3 matches both words; #2 and #1 one each, the newer first.
    assert [line.split()[0] for line in result.splitlines()[1:]] == ["#3", "#2", "#1"]
    assert await read(space, "search_posts", agent_id=9, query="snow") == "No post matches 'snow'."
    assert (await read(space, "search_posts", agent_id=9, query="rain", limit=1)).count("\n") == 1


async def test_refusals_are_clear_tool_call_errors() -> None:
    space = await seeded(max_length=30)
    space.bind_agents([1, 2, 3])
    cases = [
        ("create_post", {"agent_id": 1}, "bad arguments for SocialMediaSpace.create_post: Field required"),
        ("create_post", {"agent_id": "one", "text": "x"}, "bad arguments.*valid integer"),
        ("create_post", {"agent_id": 1, "text": "   "}, "an empty text cannot be published"),
        ("create_post", {"agent_id": 1, "text": "x" * 31}, "text longer than 30 characters"),
        ("create_post", {"agent_id": 9, "text": "hi"}, "there is no agent 9"),
        ("comment", {"agent_id": 1, "post_id": 7, "text": "hi"}, r"there is no post #7"),
        ("like_post", {"agent_id": 1, "post_id": 7}, r"there is no post #7"),
        ("repost", {"agent_id": 1, "post_id": 7}, r"there is no post #7"),
        ("follow", {"agent_id": 1, "target_agent_id": 1}, "you cannot follow yourself"),
        ("follow", {"agent_id": 1, "target_agent_id": 8}, "there is no agent 8"),
        ("view_feed", {"agent_id": 1, "algorithm": "random"}, "bad arguments for SocialMediaSpace.view_feed"),
        ("view_feed", {"agent_id": 1, "limit": -1}, "limit cannot be negative"),
        ("search_posts", {"agent_id": 1, "query": "?!"}, "the search query has no words"),
        ("view_post", {"agent_id": 1, "post_id": 99}, r"there is no post #99"),
    ]
    for tool, args, message in cases:
        with pytest.raises(ToolCallError, match=message):
            await space.call_tool(tool, args)
    assert space.updates.all() == []
    with pytest.raises(ToolCallError, match="changes state and this ask is readonly"):
        await space.call_tool("create_post", {"agent_id": 1, "text": "x"}, readonly=True)


def test_bad_constructor_kwargs_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="feed_algorithm must be one of chronological, engagement"):
        SocialMediaSpace(feed_algorithm="viral")
    with pytest.raises(SpecError, match="must be positive"):
        SocialMediaSpace(feed_limit=0)


async def test_a_step_applies_queued_actions_in_agent_order_whatever_the_call_order() -> None:
    calls = [
        ("create_post", {"agent_id": 3, "text": "c"}),
        ("follow", {"agent_id": 1, "target_agent_id": 2}),
        ("like_post", {"agent_id": 2, "post_id": 1}),
        ("create_post", {"agent_id": 1, "text": "a"}),
        ("comment", {"agent_id": 3, "post_id": 2, "text": "nice"}),
        ("repost", {"agent_id": 2, "post_id": 1}),
        ("create_post", {"agent_id": 2, "text": "b"}),
    ]
    # The second order interleaves agents differently but keeps each agent's own calls in order (a stable sort).
    states = []
    for order in (calls, sorted(calls, key=lambda c: -c[1]["agent_id"])):
        space = await seeded()
        for tool, args in order:
            await space.call_tool(tool, args)
        await space.step(3600, T2)
        states.append(space.dump_state())
        rows = space.replay_rows(2, T2)
        assert [(r["kind"], r["agent_id"], r["post_id"]) for r in rows["social_actions"]] == [
            ("follow", 1, None), ("post", 1, 3), ("like", 2, 1), ("repost", 2, 4), ("post", 2, 5), ("post", 3, 6), ("comment", 3, 2),
        ]
    assert states[0] == states[1]


async def test_replay_rows_give_one_state_row_per_step_and_the_applied_actions() -> None:
    space = await seeded()
    step1 = space.replay_rows(1, T1)
    assert step1["social_state"] == [{
        "step": 1, "t": T1, "actions": 2, "active_agents": 2, "posts_total": 2, "reposts_total": 0,
        "comments_total": 0, "likes_total": 0, "follows_total": 0,
    }]
    assert step1["social_actions"] == [
        {"step": 1, "t": T1, "kind": "post", "agent_id": 1, "post_id": 1, "ref_post_id": None, "target_agent_id": None, "text": "Hello world",
         "parent_post_id": None, "intervention": False},
        {"step": 1, "t": T1, "kind": "post", "agent_id": 2, "post_id": 2, "ref_post_id": None, "target_agent_id": None,
         "text": "Rain again in the valley", "parent_post_id": None, "intervention": False},
    ]
    await call(space, "like_post", agent_id=1, post_id=2)
    await call(space, "follow", agent_id=1, target_agent_id=2)
    await space.step(3600, T2)
    step2 = space.replay_rows(2, T2)
    assert step2["social_state"] == [{
        "step": 2, "t": T2, "actions": 2, "active_agents": 1, "posts_total": 2, "reposts_total": 0,
        "comments_total": 0, "likes_total": 1, "follows_total": 1,
    }]
    await space.step(3600, T3)
    assert space.replay_rows(3, T3)["social_actions"] == []


async def test_replay_rows_fit_the_declared_datasets() -> None:
    space = SocialMediaSpace(follows=Graph.from_adjacency({2: [1]}, layer="follow"))
    space.bind_agents([1, 2, 3])
    await space.init(T0)
    await call(space, "create_post", agent_id=1, text="Hello world")
    await space.step(3600, T1)
    await call(space, "repost", agent_id=3, post_id=1, comment="yes")
    await call(space, "follow", agent_id=3, target_agent_id=1)
    await space.step(3600, T2)
    schemas = {s.name: s for s in SocialMediaSpace.replay_datasets()}
    assert set(schemas) == {"social_state", "social_actions", "social_cascades", "network_edges", "network_measures"}
    rows = space.replay_rows(2, T2)
    assert set(rows) == set(schemas)
    measures = rows["network_measures"][0]  # 2 -> 1 and 3 -> 1: two edges, none mutual; 1 followed by both
    assert (measures["edges"], measures["in_degree_max"], measures["reciprocity"], measures["clustering"]) == (2, 2, 0, 0)
    for name, schema in schemas.items():
        assert rows[name], name
        columns = [c.name for c in schema.columns if c.name != "run"]  # the engine stamps the run id
        for row in rows[name]:
            assert list(row) == columns
        stamped = [{"run": "r", **row} for row in rows[name]] if schema.columns[0].name == "run" else rows[name]
        assert schema.to_table(stamped).num_rows == len(rows[name])


async def test_state_survives_to_workspace_and_from_workspace_including_queued_actions(tmp_path: Path) -> None:
    space = await seeded(feed_algorithm="engagement")
    space.bind_workspace(tmp_path)
    await call(space, "comment", agent_id=3, post_id=1, text="saved")
    await space.step(3600, T2)
    await call(space, "like_post", agent_id=3, post_id=2)
    await call(space, "create_post", agent_id=4, text="still queued")
    await space.to_workspace()

    fresh = await SocialMediaSpace.from_workspace(tmp_path, feed_algorithm="engagement")
    assert isinstance(fresh, SocialMediaSpace)
    assert fresh.t == T2
    assert fresh.dump_state() == space.dump_state()
    assert await read(fresh, "my_feed", agent_id=5) == await read(space, "my_feed", agent_id=5)
    assert await call(fresh, "like_post", agent_id=3, post_id=2) == "you already like post #2"

    await fresh.step(3600, T3)
    await space.step(3600, T3)
    assert fresh.dump_state() == space.dump_state()
    assert fresh.replay_rows(3, T3) == space.replay_rows(3, T3)
    assert "#3 by agent 4 at 2024-01-01 11:00: still queued" in await read(fresh, "my_feed", agent_id=5)


def test_the_module_ships_a_valid_agent_skill() -> None:
    (skills_dir,) = SocialMediaSpace.skill_dirs()
    assert [parse_skill(d, "env:SocialMediaSpace").name for d in sorted(skills_dir.iterdir())] == ["social-media"]


async def network_space() -> SocialMediaSpace:
    """A follow layer over agents 0-5: 0 is the hub (0 <-> 1..4), 5 follows 1."""
    pairs = [(0, a) for a in range(1, 5)] + [(a, 0) for a in range(1, 5)] + [(5, 1)]
    space = SocialMediaSpace(follows=Graph.from_adjacency({a: [b for x, b in pairs if x == a] for a in range(6)}, layer="follow"))
    space.bind_agents(list(range(6)))
    await space.init(T0)
    return space


async def test_interventions_remove_rewire_seed_and_change_the_feed_rule_from_the_next_step() -> None:
    space = await network_space()
    with pytest.raises(ToolCallError, match="only the experimenter"):
        await call(space, "remove_top_nodes", agent_id=1, share=0.2)
    said = await call(space, "remove_top_nodes", agent_id=-1, share=0.1)
    assert said == "8 follows of the top 1 agents by degree (0.1 of 6 is 0.6, rounded up) will be removed: [0]"
    assert await read(space, "my_profile", agent_id=0) == "You follow 4 agents (1, 2, 3, 4); 4 agents follow you; you have published 0 posts."
    said = await call(space, "seed_post", agent_id=-1, text="Breaking news", count=2, at="degree")
    assert said == "2 posts will be published by agents [1, 2]"  # 0, removed by the same intervention, is not chosen
    await call(space, "set_feed_rule", agent_id=-1, algorithm="engagement")
    space.apply_pending()  # an intervention settles at once
    await space.step(3600, T1)
    assert await read(space, "my_profile", agent_id=0) == "You follow 0 agents; 0 agents follow you; you have published 0 posts."
    assert await read(space, "my_feed", agent_id=5) == (  # engagement now: the seeded posts, 1's (followed) first
        "Your feed (engagement, 2 of 2 posts):\n"
        "#1 by agent 1 at 2024-01-01 08:00: Breaking news [0 likes, 0 comments, 0 reposts]\n"
        "#2 by agent 2 at 2024-01-01 08:00: Breaking news [0 likes, 0 comments, 0 reposts]")
    rows = space.replay_rows(1, T1)
    assert {(r["kind"], r["intervention"]) for r in rows["social_actions"]} == {("unfollow", True), ("post", True), ("feed_rule", True)}
    assert sorted((r["change"], r["source"], r["target"]) for r in rows["network_edges"])[:2] == [("removed", 0, 1), ("removed", 0, 2)]
    assert len(rows["network_edges"]) == 8 and space.metrics()["posts"] == 0  # interventions are not the agents' activity
    said = await call(space, "rewire_follows", agent_id=-1, fraction=1.0, seed=3)
    assert said == "1 follows will be removed and 1 made to random agents"
    space.apply_pending()
    await space.step(3600, T2)
    assert [(r["change"], r["source"]) for r in space.replay_rows(2, T2)["network_edges"]] == [("removed", 5), ("added", 5)]


async def test_removed_agents_are_skipped_by_later_choices_and_silenced_ones_cannot_act_after_a_reload() -> None:
    space = await network_space()
    said = await call(space, "remove_top_nodes", agent_id=-1, share=0.5, silence=True)
    assert said == "9 follows of the top 3 agents by degree will be removed and the agents silenced: [0, 1, 2]"  # 3 of 6: exact
    await call(space, "create_post", agent_id=1, text="queued before the removal settles")  # from the next step on
    space.apply_pending()
    await space.step(3600, T1)
    again = await network_space()
    again.load_state(space.dump_state())  # the removal survives a resume and a fork
    for module in (space, again):
        with pytest.raises(ToolCallError, match="agent 1 was removed from the platform by the experimenter and cannot post"):
            await call(module, "create_post", agent_id=1, text="still here?")
        with pytest.raises(ToolCallError, match="cannot follow"):
            await call(module, "follow", agent_id=0, target_agent_id=5)
        await call(module, "create_post", agent_id=3, text="not removed")  # the others act as before
        assert await call(module, "seed_post", agent_id=-1, text="x", count=3, at="degree") == "3 posts will be published by agents [3, 4, 5]"
        assert "by agents [0, 1, 2]" in await call(module, "seed_post", agent_id=-1, text="x", count=3, at="degree",
                                                   include_removed=True)
        with pytest.raises(ToolCallError, match="count must be between 1 and the 3 agents"):
            await call(module, "seed_post", agent_id=-1, text="x", count=4)
        assert (await call(module, "remove_top_nodes", agent_id=-1, share=0.2)).endswith("(0.2 of 3 is 0.6, rounded up) will be removed: [3]")
    unsilenced = await network_space()
    await call(unsilenced, "remove_follows", agent_id=-1, nodes=[0])
    unsilenced.apply_pending()
    await unsilenced.step(3600, T1)
    await call(unsilenced, "create_post", agent_id=0, text="removed, not silenced: still posts")


async def test_follow_changes_are_saved_as_the_overlay_and_load_on_the_same_base() -> None:
    space = await network_space()
    await call(space, "follow", agent_id=5, target_agent_id=2)
    await call(space, "unfollow", agent_id=1, target_agent_id=0)
    await space.step(3600, T1)
    state = space.dump_state()
    assert state["follow_changes"] == {"added": [[5, 2]], "removed": [[1, 0]]}
    again = await network_space()
    again.load_state(state)
    assert [await read(again, "my_profile", agent_id=a) for a in range(6)] == [await read(space, "my_profile", agent_id=a) for a in range(6)]
    # a state saved whole (an engine before the overlay) loads as its difference from the base
    legacy = {**state, "follows": {"0": [1, 2, 3, 4], "2": [0], "3": [0], "4": [0], "5": [1, 2]}}
    del legacy["follow_changes"]
    older = await network_space()
    older.load_state(legacy)
    assert older.dump_state()["follow_changes"] == {"added": [[5, 2]], "removed": [[1, 0]]}


async def test_a_hubs_profile_lists_the_first_agents_it_follows_and_counts_the_rest() -> None:
    space = SocialMediaSpace(follows=Graph.from_adjacency({0: list(range(1, 1001))}, layer="follow"))
    space.bind_agents(list(range(1001)))
    await space.init(T0)
    assert await read(space, "my_profile", agent_id=0) == (
        f"You follow 1000 agents ({', '.join(map(str, range(1, 21)))} and 980 more); 0 agents follow you; "
        "you have published 0 posts.")


async def test_follow_suggestions_come_from_the_follow_graph() -> None:
    # 0 follows 1 and 2; both follow 3, and 2 follows 4 and 0: 3 first (two of 0's followees), then 4; never 0 itself
    space = SocialMediaSpace(follows=Graph.from_adjacency({0: [1, 2], 1: [3], 2: [3, 4, 0]}, layer="follow"))
    space.bind_agents(list(range(6)))
    await space.init(T0)
    assert await read(space, "suggest_follows", agent_id=0) == (
        "Suggested: agent 3 (followed by 2 you follow), agent 4 (followed by 1 you follow).")
    assert await read(space, "suggest_follows", agent_id=0, limit=1) == "Suggested: agent 3 (followed by 2 you follow)."
    assert await read(space, "suggest_follows", agent_id=5) == "No suggestions: follow someone first."
    await call(space, "follow", agent_id=0, target_agent_id=3)
    await call(space, "follow", agent_id=0, target_agent_id=4)
    await space.step(3600, T1)
    assert await read(space, "suggest_follows", agent_id=0) == "No suggestions: you follow all they follow."
