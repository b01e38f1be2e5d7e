"""LLM calls per owner per UTC day, for the ``max_llm_calls_per_day`` quota.

The submitter adds each run's calls as its progress reports them (:meth:`LlmCallLedger.add`); a
submit, a fork, a resume or added steps ask :meth:`LlmCallLedger.check` first, and an experiment starting
asks :meth:`LlmCallLedger.left` for the calls it may make. The day's counts are kept in
``<data_dir>/llm_calls.json`` (rewritten at most every ``flush_s``, and at shutdown), and every count
between two rewrites is appended to ``<data_dir>/llm_calls.log`` as it is added, so a restart, even
after a SIGKILL, does not hand an owner a fresh allowance. Only today's counts are kept.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.api import atomic_write_json, read_json
from service.errors import DailyQuotaExceededError, QuotaExceededError

__all__ = ["LlmCallLedger", "seconds_to_midnight_utc", "today_utc"]


def today_utc(now: dt.datetime | None = None) -> str:
    """The UTC date (``2026-12-05``) the quota's day is counted in."""
    return (now or dt.datetime.now(dt.UTC)).date().isoformat()


def seconds_to_midnight_utc(now: dt.datetime | None = None) -> int:
    """Whole seconds until the next UTC day starts (at least 1)."""
    now = now or dt.datetime.now(dt.UTC)
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    return max(1, int((midnight - now).total_seconds()) + 1)


class LlmCallLedger:
    """Today's LLM calls of every owner; thread-safe.

    Args:
        path: the file the counts persist in (None: memory only).
        flush_s: the least time between two writes of the file, in seconds.
        now: the current time (UTC), for tests.
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        flush_s: float = 5.0,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._path = path
        self._flush_s = flush_s
        self._now = now
        self._lock = threading.Lock()
        stored = read_json(path, default={}) if path is not None else {}
        self._day: str = stored.get("day", today_utc(now()))
        self._calls: dict[str, int] = {str(k): int(v) for k, v in stored.get("calls", {}).items()}
        self._log = path.with_suffix(".log") if path is not None else None
        self._written = time.monotonic()
        self._dirty = False
        self._replay_log()

    def today(self, owner: str) -> int:
        """``owner``'s LLM calls so far today (UTC)."""
        with self._lock:
            self._roll()
            return self._calls.get(owner, 0)

    def add(self, owner: str, calls: int) -> None:
        """Count ``calls`` more calls of ``owner``'s (a run's progress since its last report)."""
        if calls <= 0:
            return
        with self._lock:
            self._roll()
            self._calls[owner] = self._calls.get(owner, 0) + calls
            self._dirty = True
            if time.monotonic() - self._written >= self._flush_s:
                self._write()
            elif self._log is not None:  # in the OS's hands at once: a killed process loses none of it
                with self._log.open("a", encoding="utf-8") as log:
                    log.write(json.dumps({"day": self._day, "owner": owner, "calls": calls}) + "\n")

    def left(self, owner: str, limit: int) -> int:
        """The calls ``owner`` may still make today under a daily ``limit`` (0 when it is used up)."""
        return max(0, limit - self.today(owner))

    def flush(self) -> None:
        """Write the counts now, if they changed."""
        with self._lock:
            if self._dirty:
                self._write()

    def check(self, owner: str, limit: int, *, wanted: int = 1, what: str = "this request") -> None:
        """Refuse ``what`` when ``owner`` cannot make ``wanted`` more calls today.

        Raises:
            QuotaExceededError: ``wanted`` is over the whole daily ``limit`` (422; no wait helps).
            DailyQuotaExceededError: over what is left today (429, ``Retry-After`` = the seconds to midnight UTC).
        """
        used = self.today(owner)
        left = max(0, limit - used)
        quota = f"quota max_llm_calls_per_day, default from POLIS_QUOTA_MAX_LLM_CALLS_PER_DAY: {limit}"
        if wanted > limit:
            raise QuotaExceededError(f"{what} needs at least {wanted} LLM calls; owner {owner!r} may make at most "
                                     f"{limit} a day ({quota})", path="steps")
        if wanted > left:
            raise DailyQuotaExceededError(
                f"owner {owner!r} made {used} LLM calls today (UTC) and has {left} left; {what} needs at least {wanted} "
                f"({quota}); the count starts again at 00:00 UTC", retry_after_s=seconds_to_midnight_utc(self._now()))

    def _roll(self) -> None:
        day = today_utc(self._now())
        if day != self._day:
            self._day, self._calls, self._dirty = day, {}, True

    def _write(self) -> None:
        if self._path is not None:
            atomic_write_json(self._path, {"day": self._day, "calls": self._calls})
            if self._log is not None:
                self._log.unlink(missing_ok=True)  # its counts are in the file now
        self._written, self._dirty = time.monotonic(), False

    def _replay_log(self) -> None:
        """Add the counts appended since the file was last written (a line cut short by a kill is skipped)."""
        if self._log is None or not self._log.exists():
            return
        for line in self._log.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                day, owner, calls = str(entry["day"]), str(entry["owner"]), int(entry["calls"])
            except (ValueError, KeyError, TypeError):
                continue
            if day == self._day:
                self._calls[owner] = self._calls.get(owner, 0) + calls
                self._dirty = True
