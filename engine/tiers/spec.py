"""A population's fidelity tier: ``llm`` (an agent per member, today's agents), ``archetype`` or ``rule``.

Part of the population spec (:class:`~engine.population.spec.PopulationSpec` holds ``tier``, ``archetype`` and
``rule``). An archetype population's members are grouped (:mod:`engine.tiers.plan`) by the exact values of ``key``
fields or by a k-means ``cluster`` of persona fields (:mod:`engine.tiers.cluster`); each group gets one LLM decision
per tick, a probability for each of the spec's options, and each member draws its own option from it. A rule
population's members each run a registered policy (:mod:`engine.tiers.policies`), with no LLM.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from engine.format_template import check_format_arguments

__all__ = ["ArchetypeOption", "ArchetypeSpec", "ClusterSpec", "RuleSpec", "Tier", "TIERS"]

Tier = Literal["llm", "archetype", "rule"]
TIERS: tuple[Tier, ...] = ("llm", "archetype", "rule")
_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
#: what an option's string arguments may name: the archetype's ``text`` for it, and the member's id
_OPTION_NAMES = ("text", "agent_id")


class ArchetypeOption(BaseModel):
    """One thing a member may do this tick: a tool call (its arguments' strings may use ``{text}``, the text the
    archetype wrote for the option, and ``{agent_id}``), or nothing (no ``tool``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_NAME, description="the option's name, as the archetype's answer gives its probability")
    description: str = Field("", max_length=500, description="what the option means, for the archetype's prompt")
    tool: str | None = Field(None, min_length=1, description="the env tool a member who draws it calls (None: it does nothing)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments (agent_id is the member's)")

    @field_validator("arguments")
    @classmethod
    def _arguments_bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_format_arguments(value, _OPTION_NAMES)
        return value

    @property
    def writes_text(self) -> bool:
        """The option's arguments use the archetype's ``{text}``."""
        return any(isinstance(v, str) and "{text}" in v for v in self.arguments.values())


class ClusterSpec(BaseModel):
    """Groups an archetype population by a seeded k-means clustering of persona fields (:mod:`engine.tiers.cluster`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fields: list[str] = Field(min_length=1, description="the persona fields clustered on: a numeric field is scaled to "
                              "mean 0 and sd 1, any other is one-hot by value with its columns scaled to variance 1 "
                              "together, so each field weighs the same")
    weights: dict[str, float] = Field(
        default_factory=dict, exclude_if=lambda v: not v,
        description="field -> weight (default 1): multiplies the variance the field adds, e.g. {age: 2} counts age twice")
    count: int = Field(ge=1, le=100_000, description="clusters at most: fewer when the members have fewer distinct "
                       "values of the fields")
    sample: int = Field(50_000, ge=100, le=10_000_000, description="members the centres are fitted on (a seeded sample); "
                        "every member is then assigned to its nearest centre")
    iterations: int = Field(25, ge=1, le=200, description="k-means (Lloyd) rounds at most; it stops earlier when no "
                            "member changes cluster")

    @field_validator("fields")
    @classmethod
    def _fields_unique(cls, value: list[str]) -> list[str]:
        if duplicate := next((n for n in value if value.count(n) > 1), None):
            raise ValueError(f"{duplicate!r} is twice in the fields")
        return value

    @model_validator(mode="after")
    def _weights_fit(self) -> ClusterSpec:
        for name, weight in self.weights.items():
            if name not in self.fields:
                raise ValueError(f"weights.{name}: not one of the fields clustered on ({', '.join(self.fields)})")
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"weights.{name}: {weight} is not a weight above 0")
        return self


class ArchetypeSpec(BaseModel):
    """How an archetype population is grouped, what its groups see, and what a member may do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: list[str] = Field(default_factory=list, description="persona fields whose values group the members "
                           "(none, and no cluster: members are grouped in id order)")
    cluster: ClusterSpec | None = Field(None, exclude_if=lambda v: v is None, description="instead of a key, group the "
                                        "members by a seeded k-means clustering of persona fields; a group's prompt "
                                        "shows its cluster's typical values")
    group_size: int = Field(1000, ge=1, le=1_000_000, description="members per group at most: a key's (or cluster's) "
                            "members are split into groups of at most this many, in id order")
    observations: Literal["sample", "common"] = Field(
        "sample", description="how members' observations make the group's context: sample (a seeded sample of "
        "observation_count members' observations) or common (the observation_count lines most members saw, with counts)")
    observation_count: int = Field(5, ge=1, le=100, description="members' observations (sample) or lines (common) shown")
    observation_chars: int = Field(600, ge=50, le=20_000, description="each observation or line is cut to this many characters")
    options: list[ArchetypeOption] = Field(min_length=1, max_length=32, description="what a member may do; the "
                                           "archetype gives each a probability and each member draws one")
    instruction: str = Field("", max_length=4000, description="what the archetype is asked to decide, in its prompt")

    @field_validator("options")
    @classmethod
    def _names_unique(cls, value: list[ArchetypeOption]) -> list[ArchetypeOption]:
        names = [option.name for option in value]
        if duplicate := next((n for n in names if names.count(n) > 1), None):
            raise ValueError(f"two options are named {duplicate!r}; each needs its own name")
        return value

    @field_validator("key")
    @classmethod
    def _key_unique(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if duplicate := next((n for n in value if value.count(n) > 1), None):
            raise ValueError(f"{duplicate!r} is twice in the key")
        return value

    @model_validator(mode="after")
    def _key_or_cluster(self) -> ArchetypeSpec:
        if self.key and self.cluster is not None:
            raise ValueError("give 'key' or 'cluster', not both")
        return self


class RuleSpec(BaseModel):
    """A rule population's policy and its parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = Field(description="a registered rule policy (engine.tiers.policies): bounded_confidence, hegselmann_krause, "
                        "social_poster, or one a package or notebook registers")
    params: dict[str, Any] = Field(default_factory=dict, description="the policy's parameters (its Params model checks them)")

    @field_validator("policy")
    @classmethod
    def _known(cls, value: str) -> str:
        from engine.tiers.policies import POLICIES

        return POLICIES.check_name(value)

    @field_validator("params")
    @classmethod
    def _params_fit(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.tiers.policies import POLICIES

        checked: dict[str, Any] = POLICIES.check_config(info.data.get("policy"), value)
        return checked
