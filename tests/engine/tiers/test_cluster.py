"""engine.tiers.cluster: archetype groups by a seeded k-means of persona fields; its spec, its traits, its groups."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest
from pydantic import ValidationError

from engine.errors import SpecError
from engine.spec import parse_spec
from engine.tiers.cluster import _features, cluster_members, cluster_traits
from engine.tiers.plan import TierMember, cluster_seed, group_members, plan_tier_batches
from engine.tiers.spec import ArchetypeSpec, ClusterSpec

OPTIONS = [{"name": "idle"}]


def separated(n: int, seed: int = 0) -> tuple[list[dict], list[tuple[bool, str]]]:
    """Members of four clearly separated populations (two age bands × two regions), interleaved; and each one's."""
    draw = random.Random(seed)
    profiles, truth = [], []
    for _ in range(n):
        old, region = draw.random() < 0.5, draw.choice(["north", "south"])
        profiles.append({"age": draw.randint(70, 75) if old else draw.randint(20, 25), "region": region,
                         "income": draw.randint(30_000, 31_000)})  # a field not clustered on
        truth.append((old, region))
    return profiles, truth


def by_label(labels: list[int]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = defaultdict(list)
    for member, label in enumerate(labels):
        found[label].append(member)
    return found


def assert_valid(labels: list[int], members: int) -> None:
    """Labels count from 0, every one used, in order of each cluster's first member."""
    assert len(labels) == members and all(isinstance(label, int) for label in labels)
    firsts = [labels.index(label) for label in range(max(labels) + 1)]
    assert firsts == sorted(firsts) and set(labels) == set(range(max(labels) + 1))


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_clearly_separated_populations_are_recovered_as_clusters(seed: int) -> None:
    profiles, truth = separated(400, seed)
    labels = cluster_members(profiles, ClusterSpec(fields=["age", "region"], count=4), seed)
    assert_valid(labels, 400)
    clusters = by_label(labels)
    assert len(clusters) == 4
    assert all(len({truth[m] for m in members}) == 1 for members in clusters.values()), "every cluster is pure"


def test_the_same_seed_gives_the_same_labels_and_the_fit_uses_a_seeded_sample() -> None:
    profiles, _ = separated(3000)
    spec = ClusterSpec(fields=["age", "region", "income"], count=25, sample=500)
    first = cluster_members(profiles, spec, 7)
    assert cluster_members(profiles, spec, 7) == first
    assert_valid(first, 3000)
    assert 1 < max(first) + 1 <= 25
    assert cluster_members(profiles, spec, 8) != first  # another sample and other k-means++ draws
    assert cluster_seed(5, 1) == cluster_seed(5, 1) != cluster_seed(5, 2) and cluster_seed(-(2**63), 0) >= 0


def test_a_count_over_the_distinct_members_gives_one_cluster_per_distinct_value() -> None:
    profiles = [{"party": party, "age": 30} for party in ["red", "blue", "green"] * 10]
    labels = cluster_members(profiles, ClusterSpec(fields=["party", "age"], count=50), 0)
    assert labels == [0, 1, 2] * 10
    assert cluster_members(profiles[:1], ClusterSpec(fields=["party"], count=3), 0) == [0]
    assert cluster_members([], ClusterSpec(fields=["party"], count=3), 0) == []


def test_mixed_numeric_categorical_and_missing_values() -> None:
    # A: young, tag x, members; B: old, tag y, not members. Their age is scaled (sd 1), so a member missing its age
    # (the mean: halfway) and tagged y is nearer B (one sd away) than A (one sd and a different tag).
    profiles = ([{"age": 20, "tag": "x", "member": True, "score": 1} for _ in range(20)]
                + [{"age": 80, "tag": "y", "member": False, "score": 2.5} for _ in range(20)]
                + [{"tag": "y", "member": False, "score": None}, {"age": None, "tag": None, "member": None, "score": 2.5}])
    fields = ["age", "tag", "member", "score"]
    labels = cluster_members(profiles, ClusterSpec(fields=fields, count=2), 3)
    assert_valid(labels, 42)
    assert labels[:40] == [0] * 20 + [1] * 20 and labels[40] == 1
    traits = cluster_traits(profiles, labels, fields)
    assert traits[0] == {"cluster": 0, "age": 20, "tag": "x", "member": True, "score": 1}
    assert traits[1]["age"] == 80  # the missing ages are not counted
    assert traits[1]["member"].startswith("False (") and traits[1]["tag"].startswith("y (")  # a bool is a category
    # every value missing: numeric, 0 for everyone
    assert cluster_members([{"x": None}, {"y": 1}, {"x": None}], ClusterSpec(fields=["x"], count=3), 0) == [0, 0, 0]


def test_representative_traits_give_the_mean_and_range_and_the_most_common_value_with_its_share() -> None:
    profiles = [{"age": 20, "gender": "female", "income": 52_000.4}, {"age": 21, "gender": "male", "income": 52_691.2},
                {"age": 22, "gender": "female", "income": 52_345.6}, {"age": 30, "gender": "female", "income": 52_345.6},
                {"age": 50, "gender": "male", "income": 0.012345}, {"age": 50, "gender": "female", "income": 0.012345}]
    traits = cluster_traits(profiles, [0, 0, 0, 0, 1, 1], ["age", "gender", "income"])
    assert traits == [
        {"cluster": 0, "age": "23.2 on average (20 to 30)", "gender": "female (75%)", "income": "52300 on average (52000 to 52700)"},
        {"cluster": 1, "age": 50, "gender": "male (50%)", "income": 0.0123},  # a tie: the value seen first
    ]


def test_groups_are_clusters_split_into_groups_of_at_most_group_size_in_id_order() -> None:
    profiles, truth = separated(60)
    members = [TierMember(100 + i, 2, profile, "archetype") for i, profile in enumerate(profiles)]
    spec = ArchetypeSpec(cluster=ClusterSpec(fields=["age", "region"], count=4), group_size=7, options=OPTIONS)
    groups = group_members(2, spec, members, 11)
    assert [g.id for g in groups] == [f"2.{n}" for n in range(len(groups))]
    assert all(1 <= len(g.members) <= 7 and list(g.members) == sorted(g.members) for g in groups)
    assert sorted(i for g in groups for i in g.members) == [m.agent_id for m in members]
    clusters = [g.key["cluster"] for g in groups]
    assert clusters == sorted(clusters) and set(clusters) == {0, 1, 2, 3}  # in order of each cluster's first member
    for n in range(4):
        mine = [g for g in groups if g.key["cluster"] == n]
        ids = [i for g in mine for i in g.members]
        assert [len(g.members) for g in mine[:-1]] == [7] * (len(mine) - 1) and ids == sorted(ids)
        assert len({truth[i - 100] for i in ids}) == 1 and set(mine[0].key) == {"cluster", "age", "region"}
    assert group_members(2, spec, members, 11) == groups
    batches = plan_tier_batches([(None, None), (None, None), (spec, None)], members, batch_size=20, seed=11)
    assert [g for b in batches for g in b.groups] == groups  # the run's seed reaches the clustering


def test_cluster_spec_checks() -> None:
    with pytest.raises(ValidationError, match="give 'key' or 'cluster', not both"):
        ArchetypeSpec(key=["age"], cluster=ClusterSpec(fields=["age"], count=2), options=OPTIONS)
    with pytest.raises(ValidationError, match="'age' is twice in the fields"):
        ClusterSpec(fields=["age", "age"], count=2)
    for bad in ({"fields": [], "count": 2}, {"fields": ["a"], "count": 0}, {"fields": ["a"], "count": 100_001},
                {"fields": ["a"], "count": 2, "sample": 99}, {"fields": ["a"], "count": 2, "iterations": 201},
                {"fields": ["a"], "count": 2, "seed": 1}):
        with pytest.raises(ValidationError):
            ClusterSpec.model_validate(bad)
    assert "cluster" not in ArchetypeSpec(options=OPTIONS).model_dump(exclude_unset=False)  # stored specs keep their hash


def census(n: int, seed: int) -> list[dict]:
    """Issue 51's example: age 18 to 90, a balanced gender and four balanced regions, independent of each other."""
    draw = random.Random(seed)
    return [{"age": draw.randint(18, 90), "gender": draw.choice(["female", "male"]),
             "region": draw.choice(["north", "south", "east", "west"])} for _ in range(n)]


def block_variances(profiles: list[dict], fields: list[str], weights: dict[str, float] | None = None) -> dict[str, float]:
    """Each field's total variance over the members in the clustering's feature space (one-hot blocks built out)."""
    features = _features(profiles, fields, weights)
    numeric = iter(features.numeric.T)
    categorical = iter(zip(features.codes, features.widths, features.scales, strict=True))
    found = {}
    for name in fields:
        if isinstance(profiles[0][name], str):
            codes, width, scale = next(categorical)
            found[name] = float((np.eye(width)[codes] * scale).var(axis=0).sum())
        else:
            found[name] = float(next(numeric).var())
    return found


def test_every_field_adds_the_same_variance_whatever_its_kind() -> None:
    # Before, age added 1, gender (two columns of 1/sqrt 2) 0.25 and region 0.375: k=2 split on age alone.
    profiles = census(2000, 0)
    assert block_variances(profiles, ["age", "gender", "region"]) == pytest.approx({"age": 1, "gender": 1, "region": 1})
    skewed = [{"tag": "a" if i % 10 else "b"} for i in range(100)]  # 90% a: scaled up, not down to its spread
    assert block_variances(skewed, ["tag"]) == pytest.approx({"tag": 1})
    weighted = block_variances(profiles, ["age", "gender", "region"], {"gender": 2, "age": 0.5})
    assert weighted == pytest.approx({"age": 0.5, "gender": 2, "region": 1})


def test_a_binary_field_and_a_numeric_one_that_separate_as_well_both_split_the_clusters() -> None:
    # score: two modes at -1.2 and 1.2, each of sd 1; gender: balanced, independent of it. With k=4 the clusters are
    # the four (gender, mode) cells; before, the numeric field took 3 of 4 splits on 8 of 10 seeds.
    for seed in range(6):
        draw = random.Random(seed)
        profiles = [{"score": draw.choice([-1.2, 1.2]) + draw.gauss(0, 1), "gender": draw.choice(["female", "male"])}
                    for _ in range(2000)]
        labels = np.array(cluster_members(profiles, ClusterSpec(fields=["score", "gender"], count=4), seed))
        female = np.array([p["gender"] == "female" for p in profiles])
        score = np.array([p["score"] for p in profiles])
        assert sorted(female[labels == c].mean() for c in range(4)) == [0, 0, 1, 1]  # each cluster one gender
        for gender in (True, False):
            means = sorted(score[(labels == c) & (female == gender)].mean() for c in set(labels[female == gender]))
            assert len(means) == 2 and means[0] < -0.5 and means[1] > 0.5  # and one of its modes


def test_the_census_example_splits_on_gender_once_gender_weighs_more() -> None:
    # Issue 51: age, gender and region with k=2 split on age alone (51% and 52% female). Each field now adds
    # variance 1 (a split on gender lowers the within-cluster variance by 1, one on age by 0.75, but k-means may stop
    # at either); a weight of 2 on gender makes the gender split the only stable one.
    for seed in range(4):
        profiles = census(2000, seed)
        spec = ClusterSpec(fields=["age", "gender", "region"], count=2, weights={"gender": 2})
        labels = np.array(cluster_members(profiles, spec, seed))
        female = np.array([p["gender"] == "female" for p in profiles])
        assert sorted(female[labels == c].mean() for c in range(2)) == [0, 1]


def test_cluster_weights_name_clustered_fields_and_are_above_zero() -> None:
    with pytest.raises(ValidationError, match=r"weights.income: not one of the fields clustered on \(age, gender\)"):
        ClusterSpec(fields=["age", "gender"], count=2, weights={"income": 2})
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="is not a weight above 0"):
            ClusterSpec(fields=["age"], count=2, weights={"age": bad})
    assert "weights" not in ClusterSpec(fields=["age"], count=2).model_dump()  # stored specs keep their hash


def population_error(archetype: dict, population: dict | None = None) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "s", "population": [{"count": 4, "tier": "archetype", "archetype": {"options": OPTIONS, **archetype},
                                                 **(population or {"profile_template": {"party": ["a", "b"], "age": [20, 70]}})}],
                    "steps": [{"type": "run", "num_steps": 1}]})
    return caught.value


def test_a_cluster_field_naming_an_unknown_field_is_refused_at_its_path() -> None:
    error = population_error({"cluster": {"fields": ["partyy", "age"], "count": 2}})
    assert error.path == "population.0.archetype.cluster.fields.0" and "did you mean 'party'?" in str(error)
    table = population_error({"cluster": {"fields": ["region", "income"], "count": 2}}, {"rows": [{"region": "n"}] * 4})
    assert table.path == "population.0.archetype.cluster.fields.1" and "its fields: region" in str(table)
    both = population_error({"key": ["party"], "cluster": {"fields": ["age"], "count": 2}})
    assert "give 'key' or 'cluster', not both" in str(both) and both.path.startswith("population.0.archetype")
    spec = parse_spec({"name": "s", "population": [{"count": 4, "profile_template": {"party": ["a", "b"]}, "tier": "archetype",
                                                    "archetype": {"options": OPTIONS, "cluster": {"fields": ["party"], "count": 2}}}],
                       "steps": [{"type": "run", "num_steps": 1}]})
    assert spec.population[0].archetype is not None and spec.population[0].archetype.cluster == ClusterSpec(fields=["party"], count=2)
