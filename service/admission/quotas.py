"""Per-owner quotas: how big a spec may be, how many run at once, how much disk an owner's runs take.

Defaults come from the ``POLIS_QUOTA_*`` settings; the grants file (``service.admission.grants``) overrides
them for every owner (``"*"``) or for one::

    {"quotas": {"*": {"max_agents": 2000}, "lab-a": {"max_agents": 5000, "max_concurrent": 4}}}

The checks here are sans-IO: an owner's disk use comes from ``service.admission.disk_usage.DiskLedger``. The queue
(not this module) enforces ``max_concurrent``: more experiments than that wait ``queued``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict, Field

from engine.api import QuestionnaireStep, RunStep, StepSpec
from service.admission.spec_counts import SpecCounts
from service.errors import QuotaExceededError
from service.settings import ServiceSettings

__all__ = ["OwnerQuota", "QuotaOverride", "Quotas", "check_added_steps", "check_counts", "check_disk",
           "least_llm_calls"]


@dataclass(frozen=True)
class OwnerQuota:
    """One owner's limits."""

    max_agents: int  #: agents in one spec (in each sweep cell)
    max_agent_steps: int  #: agents x ticks x cells of one spec
    max_concurrent: int  #: experiments running at once; more wait queued
    max_disk_bytes: int  #: the bytes the owner's runs take (a byte hard-linked into several runs counts once)
    max_sweep_cells: int = 10_000  #: cells of one sweep
    max_added_steps: int = 20  #: steps one ``POST /experiments/{id}/steps`` adds
    max_llm_calls_per_day: int = 1_000_000  #: LLM calls of all the owner's runs in one UTC day
    #: edges the generated network layers of one run expect (each sweep cell), all layers together
    max_edges: int = 2_000_000


class QuotaOverride(BaseModel):
    """One entry of the grants file's ``quotas``: the limits it sets; the others keep their defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_agents: int | None = Field(None, ge=1)
    max_agent_steps: int | None = Field(None, ge=1)
    max_concurrent: int | None = Field(None, ge=1)
    max_disk_bytes: int | None = Field(None, ge=0)
    max_sweep_cells: int | None = Field(None, ge=1)
    max_added_steps: int | None = Field(None, ge=1)
    max_llm_calls_per_day: int | None = Field(None, ge=0)
    max_edges: int | None = Field(None, ge=0)


#: Where each limit's default is set, for messages.
_SETTING = {
    "max_agents": "POLIS_QUOTA_MAX_AGENTS",
    "max_agent_steps": "POLIS_QUOTA_MAX_AGENT_STEPS",
    "max_concurrent": "POLIS_QUOTA_MAX_CONCURRENT",
    "max_disk_bytes": "POLIS_QUOTA_MAX_DISK_BYTES",
    "max_sweep_cells": "POLIS_QUOTA_MAX_SWEEP_CELLS",
    "max_added_steps": "POLIS_QUOTA_MAX_ADDED_STEPS",
    "max_llm_calls_per_day": "POLIS_QUOTA_MAX_LLM_CALLS_PER_DAY",
    "max_edges": "POLIS_QUOTA_MAX_EDGES",
}


class Quotas:
    """Every owner's quota: the defaults, then the ``"*"`` override, then the owner's own.

    Args:
        defaults: the limits of an owner the grants file does not name.
        overrides: the grants file's ``quotas`` by owner (``"*"`` for every owner).
    """

    def __init__(self, defaults: OwnerQuota, overrides: Mapping[str, QuotaOverride] | None = None) -> None:
        self.defaults = defaults
        self._overrides = dict(overrides or {})

    @classmethod
    def from_settings(cls, settings: ServiceSettings, overrides: Mapping[str, QuotaOverride] | None = None) -> Quotas:
        """The quotas of ``POLIS_QUOTA_*`` with the grants file's overrides."""
        defaults = OwnerQuota(
            max_agents=settings.quota_max_agents,
            max_agent_steps=settings.quota_max_agent_steps,
            max_concurrent=settings.quota_max_concurrent,
            max_disk_bytes=settings.quota_max_disk_bytes,
            max_sweep_cells=settings.quota_max_sweep_cells,
            max_added_steps=settings.quota_max_added_steps,
            max_llm_calls_per_day=settings.quota_max_llm_calls_per_day,
            max_edges=settings.quota_max_edges,
        )
        return cls(defaults, overrides)

    def for_owner(self, owner: str) -> OwnerQuota:
        """The limits that apply to ``owner``."""
        quota = self.defaults
        for name in ("*", owner):
            override = self._overrides.get(name)
            if override is not None:
                quota = replace(quota, **override.model_dump(exclude_none=True))
        return quota


def _limit(owner: str, field: str, value: int, unit: str) -> str:
    return f"owner {owner!r} may have at most {value} {unit} (quota {field}, default from {_SETTING[field]})"


def check_counts(counts: SpecCounts, quota: OwnerQuota, owner: str) -> None:
    """Refuse a spec whose counts are over ``owner``'s quota.

    Raises:
        QuotaExceededError: too many agents in the spec or one of its cells (path: the field that
            adds them), too many agent-steps (path ``steps``, or ``sweep`` for a sweep), or too many edges expected
            of the network's generators (path: the layer's ``generate`` that takes them past the quota, or the grid key).
    """
    if counts.agents > quota.max_agents:
        raise QuotaExceededError(
            f"{counts.agents} agents in one run; {_limit(owner, 'max_agents', quota.max_agents, 'agents')}",
            path=counts.agents_path(quota.max_agents),
        )
    if counts.cells > quota.max_sweep_cells:
        raise QuotaExceededError(
            f"the sweep expands to {counts.cells} cells; {_limit(owner, 'max_sweep_cells', quota.max_sweep_cells, 'cells')}",
            path="sweep",
        )
    if counts.agent_steps > quota.max_agent_steps:
        where = f" over {counts.cells} sweep cells" if counts.cells > 1 else ""
        raise QuotaExceededError(
            f"{counts.agent_steps} agent-steps (agents x ticks){where}; "
            f"{_limit(owner, 'max_agent_steps', quota.max_agent_steps, 'agent-steps')}",
            path="sweep" if counts.cells > 1 else "steps",
        )
    if counts.edges > quota.max_edges:
        over = f"{counts.agents} agents" + (" (the largest sweep cell)" if counts.cells > 1 else "")
        raise QuotaExceededError(
            f"the network's generated layers expect {counts.edges:,} edges over {over}; "
            f"{_limit(owner, 'max_edges', quota.max_edges, 'edges')}",
            path=counts.edges_path(quota.max_edges),
        )


def check_added_steps(steps: int, quota: OwnerQuota, owner: str) -> None:
    """Refuse a ``POST /experiments/{id}/steps`` that adds more steps than ``owner`` may add at once.

    Raises:
        QuotaExceededError: over ``max_added_steps`` (path ``steps``).
    """
    if steps > quota.max_added_steps:
        raise QuotaExceededError(
            f"{steps} steps in one request; {_limit(owner, 'max_added_steps', quota.max_added_steps, 'steps')}; "
            "send them in several requests",
            path="steps",
        )


def least_llm_calls(steps: Sequence[StepSpec], agents: int, groups: int = 0) -> int:
    """The fewest LLM calls ``steps`` make in a run of ``agents`` LLM agents and ``groups`` archetype groups: one per
    agent or group and tick of a ``run`` step, one per answering agent and question of a questionnaire (archetype and
    rule members answer none), one per ``ask`` or ``intervene``."""
    calls = 0
    for step in steps:
        if isinstance(step, RunStep):
            calls += step.num_steps * (agents + groups)
        elif isinstance(step, QuestionnaireStep):
            answering = len(step.target_agent_ids) if step.target_agent_ids is not None else agents
            calls += answering * len(step.questions)
        else:
            calls += 1
    return calls


def check_disk(used_bytes: int, quota: OwnerQuota, owner: str) -> None:
    """Refuse a new experiment when ``owner``'s runs already fill their disk quota.

    Raises:
        QuotaExceededError: ``used_bytes`` is at or over ``max_disk_bytes`` (no field path).
    """
    if used_bytes >= quota.max_disk_bytes:
        raise QuotaExceededError(
            f"the runs of owner {owner!r} take {used_bytes:,} bytes; "
            f"{_limit(owner, 'max_disk_bytes', quota.max_disk_bytes, 'bytes')}; delete experiments to free space"
        )
