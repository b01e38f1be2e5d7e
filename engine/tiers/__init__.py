"""Fidelity tiers: populations stepped as archetype groups (one LLM decision per group) or by rule policies (no LLM)."""

from engine.tiers.policies import Act, Observation, Policy, policy_names, register_policy, resolve_policy, rule_policy
from engine.tiers.spec import TIERS, ArchetypeOption, ArchetypeSpec, ClusterSpec, RuleSpec, Tier

__all__ = ["TIERS", "Act", "ArchetypeOption", "ArchetypeSpec", "ClusterSpec", "Observation", "Policy", "RuleSpec", "Tier", "policy_names",
           "register_policy", "resolve_policy", "rule_policy"]
