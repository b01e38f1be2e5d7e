"""Failpoints: named places where a test can make the whole run die by SIGKILL, to prove recovery.

Set ``POLIS_FAILPOINTS`` to ``name[:key=value...][:nth=N][:kill=group|self]`` (several separated by
``;``). The N-th time (default 1st) a process reaches :func:`failpoint` with that name and matching
context values, it dies by SIGKILL: with ``kill=group`` (the default) its whole process group — the
driver, its LocalCluster workers, everything — and with ``kill=self`` only itself (one worker). The
group is the one the driver recorded in ``POLIS_FAILPOINT_PGID`` (workers inherit it), and nothing is
killed unless the caller really is in that group, so a failpoint cannot reach a test runner outside it.
Unset (production), :func:`failpoint` is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from functools import cache
from typing import Any

__all__ = ["arm", "arm_process_group", "failpoint"]

_hits: dict[int, int] = {}


@cache
def _rules() -> tuple[tuple[str, dict[str, str], int, str], ...]:
    # Read from os.environ, not the settings tree (engine/settings.py): every process, Dask workers
    # included, inherits the variable and checks it before any settings exist.
    rules = []
    for item in filter(None, (part.strip() for part in os.environ.get("POLIS_FAILPOINTS", "").split(";"))):
        name, *pairs = item.split(":")
        context = dict(pair.split("=", 1) for pair in pairs)
        nth = int(context.pop("nth", "1"))
        rules.append((name, context, nth, context.pop("kill", "group")))
    return tuple(rules)


def arm(rules: str) -> None:
    """Set this process's failpoints (e.g. in one worker via ``client.run``); ``""`` disarms."""
    os.environ["POLIS_FAILPOINTS"] = rules
    _rules.cache_clear()
    _hits.clear()


def arm_process_group() -> None:
    """Record this process's group for failpoints (the driver calls this before starting workers)."""
    if _rules() and "POLIS_FAILPOINT_PGID" not in os.environ:
        os.environ["POLIS_FAILPOINT_PGID"] = str(os.getpgid(0))


def failpoint(name: str, **context: Any) -> None:
    """Die here if a rule for ``name`` matches ``context`` for the N-th time."""
    rules = _rules()
    if not rules:
        return
    for index, (rule_name, wanted, nth, kill) in enumerate(rules):
        if rule_name != name or any(str(context.get(k)) != v for k, v in wanted.items()):
            continue
        _hits[index] = _hits.get(index, 0) + 1
        if _hits[index] == nth and kill == "self":
            os.kill(os.getpid(), signal.SIGKILL)
        elif _hits[index] == nth:
            group = int(os.environ.get("POLIS_FAILPOINT_PGID", "0"))
            if group > 0 and os.getpgid(0) == group:
                os.killpg(group, signal.SIGKILL)
