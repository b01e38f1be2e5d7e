"""LlmCallLedger: each owner's LLM calls per UTC day, kept across restarts, refused with what is left."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from service.admission.llm_usage import LlmCallLedger, seconds_to_midnight_utc
from service.errors import DailyQuotaExceededError, QuotaExceededError
from service.schemas import without_server_paths


class Now:
    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at


def test_calls_add_up_per_owner_and_a_new_utc_day_starts_from_zero() -> None:
    now = Now(dt.datetime(2026, 12, 5, 23, 59, tzinfo=dt.UTC))
    ledger = LlmCallLedger(now=now)
    ledger.add("lab-a", 30)
    ledger.add("lab-a", 12)
    ledger.add("lab-b", 5)
    ledger.add("lab-a", -3)  # a progress report that went back (a resumed run) counts nothing
    assert (ledger.today("lab-a"), ledger.today("lab-b"), ledger.today("lab-c")) == (42, 5, 0)
    now.at = dt.datetime(2026, 12, 6, 0, 0, 1, tzinfo=dt.UTC)
    assert ledger.today("lab-a") == 0


def test_the_counts_survive_a_restart_the_same_day(tmp_path: Path) -> None:
    now = Now(dt.datetime(2026, 12, 5, 12, tzinfo=dt.UTC))
    path = tmp_path / "llm_calls.json"
    ledger = LlmCallLedger(path, flush_s=3600, now=now)
    ledger.add("lab-a", 7)
    assert not path.exists()  # written at most every flush_s ...
    ledger.flush()  # ... and at shutdown
    assert LlmCallLedger(path, now=now).today("lab-a") == 7
    now.at += dt.timedelta(days=1)
    assert LlmCallLedger(path, now=now).today("lab-a") == 0


def test_every_count_survives_a_sigkill_between_two_writes_of_the_file(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    path = tmp_path / "llm_calls.json"
    child = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from service.admission.llm_usage import LlmCallLedger\n"
        "ledger = LlmCallLedger(Path(sys.argv[1]), flush_s=3600)\n"
        "for _ in range(1541):\n"
        "    ledger.add('lab-a', 1)\n"
        "ledger.add('lab-b', 9)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(path)], cwd=Path(__file__).parents[3], timeout=120)
    assert done.returncode == -signal.SIGKILL
    ledger = LlmCallLedger(path)
    assert (ledger.today("lab-a"), ledger.today("lab-b")) == (1541, 9)
    ledger.flush()  # the file takes the counts over; the log is gone and counts nothing twice
    assert not path.with_suffix(".log").exists() and LlmCallLedger(path).today("lab-a") == 1541


def test_check_says_which_quota_how_much_is_left_and_when_it_resets() -> None:
    now = Now(dt.datetime(2026, 12, 5, 23, 0, tzinfo=dt.UTC))
    ledger = LlmCallLedger(now=now)
    ledger.add("lab-a", 95)
    ledger.check("lab-a", 100, wanted=5)
    with pytest.raises(DailyQuotaExceededError) as refused:
        ledger.check("lab-a", 100, wanted=6, what="the added steps")
    assert "made 95 LLM calls today (UTC) and has 5 left; the added steps needs at least 6" in str(refused.value)
    assert "max_llm_calls_per_day" in str(refused.value)
    assert refused.value.retry_after_s == 3601
    with pytest.raises(QuotaExceededError, match="at most 100 a day"):  # no wait makes room for it: 422
        ledger.check("lab-a", 100, wanted=101)


def test_seconds_to_midnight_utc_is_never_zero() -> None:
    assert seconds_to_midnight_utc(dt.datetime(2026, 12, 5, 23, 59, 59, 999999, tzinfo=dt.UTC)) == 1
    assert seconds_to_midnight_utc(dt.datetime(2026, 12, 5, 0, 0, tzinfo=dt.UTC)) == 86_401


def test_messages_name_paths_relative_to_the_run_and_the_data_dir_as_data() -> None:
    run = "/srv/polis/runs/abc123"
    text = f"cannot read {run}/datasets/actions/part-0.parquet; {run} is locked; see /srv/polis/experiments/abc123.json"
    assert without_server_paths(text, run) == (
        "cannot read datasets/actions/part-0.parquet; . is locked; see <data>/experiments/abc123.json")
    assert without_server_paths("s3://bucket/runs/abc/x.json missing", "s3://bucket/runs/abc") == "x.json missing"
    assert without_server_paths("nothing here", "/r/abc") == "nothing here"
    endpoint = 'Could not connect to the endpoint URL: "http://10.0.0.7:9000/bucket/runs/abc/status.json"'
    assert without_server_paths(endpoint, "s3://bucket/runs/abc") == 'Could not connect to the endpoint URL: "<object store>"'
    assert "http://h:1" in without_server_paths("http://h:1 said no", "/r/abc")  # a local run's text keeps addresses
