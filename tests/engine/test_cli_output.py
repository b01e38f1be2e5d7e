"""What ``polis run`` prints around its progress line: redraws that leave no tail, notes above the line, its end."""

from __future__ import annotations

import io

from engine.cli_output import ProgressLine
from engine.run_progress import Phase, RunPhase, RunProgress, render_progress
from engine.run_status import RunStatus

STARTING = RunProgress(RunStatus.STARTING, 0, 2, 0, 6)


def test_a_shorter_line_overwrites_all_of_the_longer_one_before_it() -> None:
    out = io.StringIO()
    show = ProgressLine(out)
    long = STARTING.with_phase(Phase(RunPhase.CREATING_WORKSPACES, 1200, 5000))
    show(long)
    show(STARTING)
    first, second = out.getvalue().split("\r")[1:]
    assert first == render_progress(long)
    assert second.rstrip() == render_progress(STARTING).rstrip() and len(second) == len(first)


def test_a_note_goes_above_the_line_which_is_drawn_again_and_an_end_closes_it_once() -> None:
    out = io.StringIO()
    show = ProgressLine(out)
    starting = STARTING.with_phase(Phase(RunPhase.STARTING_CLUSTER))
    show(starting)
    show.note("Dask dashboard: http://dashboard")
    lines = out.getvalue().split("\n")
    assert lines[-2].endswith("\rDask dashboard: http://dashboard") and lines[-1] == render_progress(starting)
    show.end()
    show.end()
    assert out.getvalue().endswith(render_progress(starting) + "\n")


def test_the_last_report_ends_the_line_and_a_note_after_it_is_a_plain_line() -> None:
    out = io.StringIO()
    show = ProgressLine(out)
    show(RunProgress(RunStatus.COMPLETED, 2, 2, 6, 6))
    show.note("done")
    show.end()
    assert out.getvalue() == f"\r{render_progress(RunProgress(RunStatus.COMPLETED, 2, 2, 6, 6))}\ndone\n"
