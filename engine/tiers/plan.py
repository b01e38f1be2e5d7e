"""Which batches the ``archetype`` and ``rule`` tiers step in, and an archetype population's groups (no I/O).

Tier batches are fixed for a run: the same members in the same batch every tick, so a batch finds its members'
state where its previous tick left it (the ``agent_state`` shard named after the batch). An archetype batch holds
whole groups. Groups are made per population: members with the same values of the key fields, or with ``cluster``
the members of one cluster (:mod:`engine.tiers.cluster`, seeded by the run's seed and the population's index), in
order of their first member's id, each split into groups of at most ``group_size`` members in id order. A key's
group shows its key values as the members' shared traits, a cluster's group its cluster's representative traits.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.tiers.cluster import cluster_members, cluster_traits
from engine.tiers.spec import ArchetypeSpec, RuleSpec, Tier

if TYPE_CHECKING:
    from engine.spec import AgentSpec, ExperimentSpec

__all__ = ["ArchetypeGroup", "TierBatch", "TierMember", "cluster_seed", "count_llm_callers", "deal_members", "group_members",
           "member_rng", "plan_tier_batches", "spec_tier_batches"]


@dataclass(frozen=True)
class TierMember:
    """One member of a non-LLM tier, as the planner takes it."""

    agent_id: int
    population: int  #: the population's index in the spec
    profile: dict[str, Any]
    tier: Tier  #: archetype or rule


@dataclass(frozen=True)
class ArchetypeGroup:
    """Members that share one archetype decision each tick."""

    id: str  #: ``<population>.<n>``, n counting the population's groups from 0
    key: dict[str, Any]  #: the key fields' values the members share, or their cluster's representative traits
    members: tuple[int, ...]  #: agent ids, ascending


@dataclass(frozen=True)
class TierBatch:
    """One fixed batch of a non-LLM tier: what every tick's batch task of it is given."""

    name: str  #: stable across ticks and attempts: names its ``agent_state`` shard
    tier: Tier
    population: int
    spec: ArchetypeSpec | RuleSpec
    seed: int  #: the run's seed (members draw from :func:`member_rng`)
    agent_ids: tuple[int, ...]
    profiles: tuple[dict[str, Any], ...]  #: one per agent id
    groups: tuple[ArchetypeGroup, ...] = field(default=())  #: archetype batches only


def member_rng(seed: int, agent_id: int, step: int, salt: str = "") -> random.Random:
    """The rng a member draws from in ``step``: the same in a seeded rerun, different for each agent and step."""
    return random.Random(f"tier:{seed}:{agent_id}:{step}:{salt}")


def _key_value(profile: dict[str, Any], key: Sequence[str]) -> str:
    return json.dumps([profile.get(name) for name in key], sort_keys=True, default=str)


def cluster_seed(seed: int, population: int) -> int:
    """The seed of population ``population``'s clustering in a run seeded ``seed`` (non-negative, as numpy takes it)."""
    return random.Random(f"archetype-cluster:{seed}:{population}").getrandbits(63)


def group_members(population: int, spec: ArchetypeSpec, members: Sequence[TierMember], seed: int) -> list[ArchetypeGroup]:
    """An archetype population's groups (see the module docstring); ``members`` in id order, ``seed`` the run's."""
    by_key: dict[str | int, list[TierMember]] = {}
    traits: list[dict[str, Any]] = []
    if spec.cluster is not None:
        profiles = [member.profile for member in members]
        labels = cluster_members(profiles, spec.cluster, cluster_seed(seed, population))
        traits = cluster_traits(profiles, labels, spec.cluster.fields)
        for member, label in zip(members, labels, strict=True):
            by_key.setdefault(label, []).append(member)
    else:
        for member in members:
            by_key.setdefault(_key_value(member.profile, spec.key), []).append(member)
    groups: list[ArchetypeGroup] = []
    for found, same in by_key.items():  # dicts keep insertion order: the order of each key's (cluster's) first member
        for start in range(0, len(same), spec.group_size):
            chunk = same[start:start + spec.group_size]
            key = traits[found] if isinstance(found, int) else {name: chunk[0].profile.get(name) for name in spec.key}
            groups.append(ArchetypeGroup(f"{population}.{len(groups)}", key, tuple(m.agent_id for m in chunk)))
    return groups


def plan_tier_batches(settings: Sequence[tuple[ArchetypeSpec | None, RuleSpec | None]], members: Sequence[TierMember],
                      batch_size: int, seed: int) -> list[TierBatch]:
    """The fixed batches of every non-LLM member, by population and tier.

    Args:
        settings: each population's ``archetype`` and ``rule`` settings, by population index.
        members: every archetype and rule member, in id order.
        batch_size: members per batch at most; an archetype batch takes whole groups, so a group larger than it
            is a batch of its own.
        seed: the run's seed.
    """
    by_population: dict[tuple[int, Tier], list[TierMember]] = {}
    for member in members:
        by_population.setdefault((member.population, member.tier), []).append(member)
    batches: list[TierBatch] = []

    def add(population: int, tier: Tier, spec: ArchetypeSpec | RuleSpec, chunk: list[TierMember],
            groups: tuple[ArchetypeGroup, ...] = ()) -> None:
        batches.append(TierBatch(f"tier{len(batches):05d}", tier, population, spec, seed, tuple(m.agent_id for m in chunk),
                                 tuple(m.profile for m in chunk), groups))

    for (population, tier), found in sorted(by_population.items()):
        spec = settings[population][0 if tier == "archetype" else 1]
        assert spec is not None, f"population {population} ({tier}) has no tier spec"
        if isinstance(spec, RuleSpec):
            for start in range(0, len(found), batch_size):
                add(population, tier, spec, found[start:start + batch_size])
            continue
        index = {m.agent_id: m for m in found}
        pending: list[ArchetypeGroup] = []
        for group in group_members(population, spec, found, seed):
            if pending and sum(len(g.members) for g in pending) + len(group.members) > batch_size:
                add(population, tier, spec, [index[i] for g in pending for i in g.members], tuple(pending))
                pending = []
            pending.append(group)
        if pending:
            add(population, tier, spec, [index[i] for g in pending for i in g.members], tuple(pending))
    return batches


def deal_members(spec: ExperimentSpec, members: Sequence[tuple[int | None, AgentSpec]]) -> tuple[list[AgentSpec], list[TierMember]]:
    """The spec's LLM agents (its listed agents and its ``llm`` members) and its archetype and rule members, each in id
    order of declaration; ``members`` is ``spec.agent_members()``."""
    dealt = {index: iter(p.member_tiers(spec.seed, index)) for index, p in enumerate(spec.population)}
    agents: list[AgentSpec] = []
    light: list[TierMember] = []
    for index, agent in members:
        tier = next(dealt[index]) if index is not None else "llm"
        if index is None or tier == "llm":
            agents.append(agent)
        else:
            light.append(TierMember(agent.id, index, agent.profile, tier))
    return agents, light


def spec_tier_batches(spec: ExperimentSpec, light: Sequence[TierMember]) -> list[TierBatch]:
    """The fixed batches of the spec's archetype and rule members (see :func:`deal_members`)."""
    settings = [(p.archetype, p.rule) for p in spec.population]
    return plan_tier_batches(settings, light, spec.batch_size, spec.seed) if light else []


def count_llm_callers(spec: ExperimentSpec) -> tuple[int, int]:
    """How many LLM agents the spec has, and how many archetype groups: each makes at least one call a tick."""
    agents, light = deal_members(spec, spec.agent_members())
    return len(agents), sum(len(batch.groups) for batch in spec_tier_batches(spec, light))
