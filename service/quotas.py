"""Per-owner quotas: how big a spec may be, how many run at once, how much disk an owner's runs take.

Defaults come from the ``POLIS_QUOTA_*`` settings; the grants file (``service.grants``) overrides
them for every owner (``"*"``) or for one::

    {"quotas": {"*": {"max_agents": 2000}, "lab-a": {"max_agents": 5000, "max_concurrent": 4}}}

The checks here are sans-IO except :func:`disk_usage`, which walks run directories. The queue
(not this module) enforces ``max_concurrent``: more experiments than that wait ``queued``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from engine.storage.run_layout import is_url, run_store
from service.errors import QuotaExceededError
from service.settings import ServiceSettings
from service.spec_counts import SpecCounts

__all__ = ["OwnerQuota", "QuotaOverride", "Quotas", "check_counts", "check_disk", "disk_usage"]


@dataclass(frozen=True)
class OwnerQuota:
    """One owner's limits."""

    max_agents: int  #: agents in one spec (in each sweep cell)
    max_agent_steps: int  #: agents x ticks x cells of one spec
    max_concurrent: int  #: experiments running at once; more wait queued
    max_disk_bytes: int  #: the total size of the owner's run directories, measured before a submit


class QuotaOverride(BaseModel):
    """One entry of the grants file's ``quotas``: the limits it sets; the others keep their defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_agents: int | None = Field(None, ge=1)
    max_agent_steps: int | None = Field(None, ge=1)
    max_concurrent: int | None = Field(None, ge=1)
    max_disk_bytes: int | None = Field(None, ge=0)


#: Where each limit's default is set, for messages.
_SETTING = {
    "max_agents": "POLIS_QUOTA_MAX_AGENTS",
    "max_agent_steps": "POLIS_QUOTA_MAX_AGENT_STEPS",
    "max_concurrent": "POLIS_QUOTA_MAX_CONCURRENT",
    "max_disk_bytes": "POLIS_QUOTA_MAX_DISK_BYTES",
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
            adds them), or too many agent-steps (path ``steps``, or ``sweep`` for a sweep).
    """
    if counts.agents > quota.max_agents:
        raise QuotaExceededError(
            f"{counts.agents} agents in one run; {_limit(owner, 'max_agents', quota.max_agents, 'agents')}",
            path=counts.agents_path(quota.max_agents),
        )
    if counts.agent_steps > quota.max_agent_steps:
        where = f" over {counts.cells} sweep cells" if counts.cells > 1 else ""
        raise QuotaExceededError(
            f"{counts.agent_steps} agent-steps (agents x ticks){where}; "
            f"{_limit(owner, 'max_agent_steps', quota.max_agent_steps, 'agent-steps')}",
            path="sweep" if counts.cells > 1 else "steps",
        )


def check_disk(used_bytes: int, quota: OwnerQuota, owner: str) -> None:
    """Refuse a new experiment when ``owner``'s runs already fill their disk quota.

    Raises:
        QuotaExceededError: ``used_bytes`` is at or over ``max_disk_bytes`` (no field path).
    """
    if used_bytes >= quota.max_disk_bytes:
        raise QuotaExceededError(
            f"the runs of owner {owner!r} take {used_bytes} bytes; "
            f"{_limit(owner, 'max_disk_bytes', quota.max_disk_bytes, 'bytes')}; delete experiments to free space"
        )


def disk_usage(paths: Iterable[Path | str]) -> int:
    """The total size in bytes of the files under ``paths`` (missing ones count 0; links are not followed; a file
    hard-linked into several runs, as forks share their parent's past, counts once). A URL counts the bytes its
    store holds under it."""
    total = 0
    pending: list[str] = []
    for path in paths:
        if is_url(path):
            total += run_store(path).usage()
        else:
            pending.append(os.fspath(path))
    seen: set[tuple[int, int]] = set()
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    stat = entry.stat(follow_symlinks=False)
                    if (stat.st_dev, stat.st_ino) not in seen:
                        seen.add((stat.st_dev, stat.st_ino))
                        total += stat.st_size
            except FileNotFoundError:  # removed while walking
                continue
    return total
