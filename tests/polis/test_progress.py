"""A run's progress bar (``progress=True``) shows the run's phase while nothing else moves."""

from __future__ import annotations

import pytest

from engine.run_progress import Phase, RunPhase, RunProgress
from engine.run_status import RunStatus
from polis.progress import ProgressBar


def test_the_bar_names_the_phase_beside_ticks_calls_and_status(capsys: pytest.CaptureFixture[str]) -> None:
    bar = ProgressBar("demo")
    bar(RunProgress(RunStatus.STARTING, 0, 2, 0, 6).with_phase(Phase(RunPhase.LOADING_MODEL, seconds=12.2)))
    loading = capsys.readouterr().err
    bar(RunProgress(RunStatus.RUNNING, 1, 2, 3, 6, llm_calls=4))
    bar.close()
    running = capsys.readouterr().err
    assert "tick 0/2, 0 LLM calls, 0 errors, starting, loading model 12 s" in loading
    assert "tick 1/2, 4 LLM calls, 0 errors, running" in running and "loading model" not in running
