"""engine.tiers.plan: groups by key and size, fixed batches of whole groups, seeded member rngs."""

from __future__ import annotations

from engine.tiers.plan import TierMember, group_members, member_rng, plan_tier_batches
from engine.tiers.spec import ArchetypeSpec, RuleSpec

OPTIONS = [{"name": "act", "tool": "create_post", "arguments": {"text": "{text}"}}, {"name": "idle"}]


def members(n: int, population: int = 0, start: int = 0, tier: str = "archetype") -> list[TierMember]:
    return [TierMember(start + i, population, {"party": "red" if i % 3 else "blue", "age": 20 + i % 2}, tier)  # type: ignore[arg-type]
            for i in range(n)]


def test_members_with_the_same_key_share_groups_of_at_most_group_size_in_id_order() -> None:
    spec = ArchetypeSpec(key=["party"], group_size=4, options=OPTIONS)
    groups = group_members(1, spec, members(12), 0)
    # blue: ids 0, 3, 6, 9 (one group); red: the other 8 (two groups); ordered by each key's first member
    assert [(g.id, g.key, g.members) for g in groups] == [
        ("1.0", {"party": "blue"}, (0, 3, 6, 9)),
        ("1.1", {"party": "red"}, (1, 2, 4, 5)),
        ("1.2", {"party": "red"}, (7, 8, 10, 11)),
    ]


def test_a_key_of_two_fields_and_no_key() -> None:
    two = group_members(0, ArchetypeSpec(key=["party", "age"], group_size=100, options=OPTIONS), members(12), 0)
    assert sorted(len(g.members) for g in two) == [2, 2, 4, 4]
    assert all(len({(m % 3 == 0, m % 2) for m in g.members}) == 1 for g in two)
    none = group_members(0, ArchetypeSpec(group_size=5, options=OPTIONS), members(12), 0)
    assert [g.members for g in none] == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (10, 11)] and none[0].key == {}


def test_archetype_batches_hold_whole_groups_and_rule_batches_split_by_size() -> None:
    arche = ArchetypeSpec(key=["party"], group_size=3, options=OPTIONS)
    rule = RuleSpec(policy="social_poster")
    found = members(12, population=1) + members(7, population=2, start=100, tier="rule")
    batches = plan_tier_batches([(None, None), (arche, None), (None, rule)], found, batch_size=5, seed=9)
    arche_batches = [b for b in batches if b.tier == "archetype"]
    # groups of 3 (blue 0,3,6 / 9; red 1,2,4 / 5,7,8 / 10,11), packed in order while a batch stays within 5
    assert [[g.members for g in b.groups] for b in arche_batches] == [
        [(0, 3, 6), (9,)], [(1, 2, 4)], [(5, 7, 8), (10, 11)]]
    assert all(b.agent_ids == tuple(i for g in b.groups for i in g.members) for b in arche_batches)
    assert [b.agent_ids for b in batches if b.tier == "rule"] == [(100, 101, 102, 103, 104), (105, 106)]
    assert [b.name for b in batches] == [f"tier{i:05d}" for i in range(len(batches))]
    assert batches[0].profiles[0] == {"party": "blue", "age": 20} and batches[0].seed == 9


def test_member_rngs_repeat_for_the_same_agent_and_step_only() -> None:
    draw = [member_rng(5, 7, 2).random() for _ in range(2)]
    assert draw[0] == draw[1]
    assert len({member_rng(5, 7, 2).random(), member_rng(5, 8, 2).random(), member_rng(5, 7, 3).random(),
                member_rng(6, 7, 2).random()}) == 4
