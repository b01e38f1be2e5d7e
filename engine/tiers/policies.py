"""Rule policies: what a ``tier: rule`` member does each tick, as a plain function of its observation, its state
and a seeded rng. No LLM is involved.

A policy is ``policy(observation, state, rng) -> list[Act]``: it reads :class:`Observation` (the member's env
observation, profile, parameters and step), changes ``state`` (a JSON-able dict the member keeps across ticks) in
place, draws only from ``rng`` (seeded by run seed, agent and step, so a rerun repeats it), and returns the env
tool calls to make. Its parameters are checked at submit by its ``Config``, a pydantic model :func:`rule_policy`
attaches. Policies are registered by name like agent classes: built-ins, the ``polis.policies`` entry points, and
:func:`register_policy` in a notebook. A policy that raises is recorded as its member's error; the tick goes on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from engine.plugins import PluginRegistry

__all__ = ["Act", "NoParams", "Observation", "POLICIES", "Policy", "policy_names", "read_params", "register_policy",
           "resolve_policy", "rule_policy"]


@dataclass(frozen=True)
class Observation:
    """What a rule member sees at the start of its step."""

    agent_id: int
    step: int  #: the society step being run, 1-based
    text: str  #: what the env shows the member (its ``observe`` tools)
    profile: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  #: the spec's ``rule.params``, as its Config read them


@dataclass(frozen=True)
class Act:
    """One env tool call (``agent_id`` is filled in with the member's id)."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    """A rule policy (see the module docstring)."""

    Config: type[BaseModel]

    def __call__(self, observation: Observation, state: dict[str, Any], rng: random.Random, /) -> list[Act]: ...


class NoParams(BaseModel):
    """The Config of a policy without parameters."""

    model_config = ConfigDict(extra="forbid")


def rule_policy(config: type[BaseModel] = NoParams) -> Callable[[Callable[..., list[Act]]], Policy]:
    """Mark a function as a rule policy whose ``params`` ``config`` checks (and fills with defaults)."""

    def mark(fn: Callable[..., list[Act]]) -> Policy:
        fn.Config = config  # type: ignore[attr-defined]  # what PluginRegistry.check_config reads
        return fn  # type: ignore[return-value]  # it is one now

    return mark


M = TypeVar("M", bound=BaseModel)


def read_params(config: type[M], observation: Observation) -> M:
    """``observation.params`` read by the policy's ``config`` (cached: every member of a population has the same)."""
    return _read(config, json.dumps(observation.params, sort_keys=True, default=str))  # type: ignore[return-value]  # read by config


@lru_cache(maxsize=256)
def _read(config: type[BaseModel], text: str) -> BaseModel:
    return config.model_validate_json(text)


POLICIES: PluginRegistry[Any] = PluginRegistry("rule policy", {
    "bounded_confidence": "engine.tiers.examples:bounded_confidence",
    "hegselmann_krause": "engine.tiers.examples:hegselmann_krause",
    "social_poster": "engine.tiers.examples:social_poster",
}, group="polis.policies")


def register_policy(policy: Callable[..., list[Act]], name: str | None = None) -> Policy:
    """Register a policy in this process (a notebook, a test) as ``name`` (default its function name); returns it.

    A function without a ``Config`` takes no parameters."""
    marked: Policy = policy if hasattr(policy, "Config") else rule_policy()(policy)
    POLICIES.register(marked, name or getattr(policy, "__name__", None))  # type: ignore[arg-type]  # a function, not a class
    return marked


def resolve_policy(name: str) -> Policy:
    """The policy registered as ``name``.

    Raises:
        SpecError: no such policy (names the known ones).
    """
    found: Policy = POLICIES.resolve(name)  # type: ignore[assignment]  # the registry holds functions here
    return found


def policy_names() -> list[str]:
    return POLICIES.names()
