"""RunStatus is the one definition of a run's statuses; the engine, CLI and service use its members."""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.run_status import ENDED_STATUSES, LIVE_STATUSES, RunStatus, is_finished
from service.schemas import ExperimentStatus

ROOT = Path(__file__).resolve().parents[2]

_VALUES = "|".join(s.value for s in RunStatus)
#: A run status spelled as a bare string where a status is set or compared.
BARE_STATUS = re.compile(
    rf"""status\w*\s*(==|!=|=|(?:not\s+)?in\b|or\b)\s*[(\[{{]?\s*["']({_VALUES})["']"""
    rf"""|["']status["']\s*:\s*["']({_VALUES})["']"""
    rf"""|\{{\s*["']({_VALUES})["']\s*,"""
    rf"""|(set_status|RunSummary|RunProgress|Literal\[)\(?\s*["']({_VALUES})["']"""
    rf"""|status(\s*,\s*\w+)+\s*=\s*["']({_VALUES})["']"""
    rf"""|\bor\s+["']({_VALUES})["']"""
)
#: Other vocabularies that share words with run statuses: agent-step and to-do item statuses
#: (engine/agent), the helper's per-call result (``ok`` | ``failed``), Dask's task states (fanout, and the offloaded
#: task's checkpoint in the Dask shell) and trace span statuses.
_OTHER_VOCABULARIES = ("engine/agent/", "engine/society/experimenter/helper.py", "engine/society/fanout.py",
                       "engine/society/shells/on_dask.py")


def test_json_values_are_the_strings_runs_and_records_have_always_held():
    assert [s.value for s in RunStatus] == [
        "queued", "pending", "starting", "running", "completed", "completed_with_errors", "failed", "cancelled",
        "budget_exhausted", "crashed", "interrupted",
    ]
    assert json.dumps({"status": RunStatus.BUDGET_EXHAUSTED}) == '{"status": "budget_exhausted"}'
    assert f"{RunStatus.COMPLETED:<10}|" == "completed |"


def test_a_run_is_live_or_ended_never_both():
    assert LIVE_STATUSES.isdisjoint(ENDED_STATUSES)
    assert {RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS} <= ENDED_STATUSES
    assert is_finished("completed_with_errors") and not is_finished(RunStatus.BUDGET_EXHAUSTED)


def test_every_experiment_status_is_a_run_status():
    assert all(isinstance(s, RunStatus) for s in ExperimentStatus.__args__)


def test_bare_status_pattern_catches_the_forms_it_replaced():
    for line in ('if progress.status not in ("starting", "running"):', 'record(cell, status="cancelled")',
                 '"status": "pending", "error": None', 'frozenset({"queued", "running"})', 'self.set_status("running")',
                 'status, error = "cancelled", "on request"', 'run = RunSummary("failed", run_dir)',
                 'effective_status(run_dir) or "pending"', 'Status = Literal["queued", "running"]'):
        assert BARE_STATUS.search(line), line
    assert not BARE_STATUS.search('span.set(kind="ask")')


def test_no_run_status_is_a_bare_string_in_engine_or_service():
    found = []
    for path in sorted(p for d in ("engine", "service") for p in (ROOT / d).rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where == "engine/run_status.py" or where.startswith(_OTHER_VOCABULARIES):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BARE_STATUS.search(line) and "span.set(" not in line:
                found.append(f"{where}:{number}: {line.strip()}")
    assert found == []
