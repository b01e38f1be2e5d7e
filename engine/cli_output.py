"""What ``polis run`` prints: progress, the run's summary, a sweep's cells, where to watch (``engine.cli``'s output)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from engine.run_status import LIVE_STATUSES

__all__ = ["ProgressLine", "dashboard_line", "exit_code", "local_models_line", "print_summary", "print_sweep", "progress_printer"]


class ProgressLine:
    """An ``on_progress`` callback that redraws one progress line on ``stream``, and writes notes above it.

    A redraw pads to the previous line's length, so a shorter line (a phase ending) leaves no tail of the longer one.
    """

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._shown = ""  # the line on screen, not ended yet

    def __call__(self, progress: Any) -> None:
        from engine.run_progress import render_progress

        line = render_progress(progress)
        self._stream.write(f"\r{line.ljust(len(self._shown))}")
        self._shown = line
        if progress.status not in LIVE_STATUSES:
            self._stream.write("\n")
            self._shown = ""
        self._stream.flush()

    def note(self, text: str) -> None:
        """A line above the progress line (the dashboard's address), which is drawn again below it."""
        shown = self._shown
        if shown:
            self._stream.write(f"\r{' ' * len(shown)}\r")
        self._stream.write(f"{text}\n")
        if shown:
            self._stream.write(shown)
        self._stream.flush()

    def end(self) -> None:
        """End the line if one is drawn (the run stopped without a last report: a refusal, a sweep, a signal)."""
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()
            self._shown = ""


def progress_printer(stream: Any = None) -> ProgressLine:
    """The ``on_progress`` callback of ``polis run``: one progress line on ``stream`` (default stderr)."""
    return ProgressLine(stream)


def print_summary(summary: Any) -> int:
    """Print a run's summary (a ``RunSummary``); returns the exit code its status gives."""
    from engine.storage.run_layout import RunLayout

    print(f"status: {summary.status}")
    if summary.error:
        print(f"error: {summary.error}")
    print(f"ticks: {summary.ticks_done}  agent-steps: {summary.agent_steps}  statuses: {summary.statuses}")
    print(f"errors: {summary.errors}" + (f"  first: {summary.first_error}" if summary.first_error else ""))
    print(f"LLM calls: {summary.llm_calls}  tokens: {summary.input_tokens} in / {summary.output_tokens} out")
    print(summary.transcripts_line())
    for line in summary.manifest_warnings:
        print(f"polis: warning: {line}", file=sys.stderr)
    cache = (summary.env or {}).get("codegen_cache")
    if cache:
        print(f"codegen cache: {cache['hits_exact'] + cache['hits_similar']} hits, {cache['misses']} misses, "
              f"{cache['generations']} generations (coder calls) for {cache['requests']} ask_env; hit rate {cache['hit_rate']:.0%}")
    if summary.env_recoveries:
        print(f"env actor recovered {summary.env_recoveries} time(s) after losing its worker")
    print(f"time: {summary.duration_s:.1f} s  run dir: {summary.run_dir}")
    print(f"replay: {RunLayout(summary.run_dir).replay}  (polis query {summary.run_dir} \"SELECT ...\")")
    return exit_code(summary.status)


async def dashboard_line(shell: Any, experiment_id: str) -> str:
    """Where to watch the run: the page the service links too, and the span and task prefix to look for there."""
    from engine.society.run.dashboard import experiment_page, task_prefix

    if shell.client is None:
        return "Dask dashboard: none (in-process: no cluster)"
    page = await experiment_page(shell.client)
    if page is None:
        return "Dask dashboard: none (the scheduler runs no dashboard)"
    return f"Dask dashboard: {page}  (filter by span tag {experiment_id!r}; tasks {task_prefix('*', (experiment_id,))})"


def local_models_line(spec: Any, shell: Any) -> str | None:
    """Where the run's ``local/*`` models will listen (the driver's address toward the scheduler), if it has any."""
    from engine.llm.local import LOCAL_PREFIX
    if not any(c is not None and c.model.startswith(LOCAL_PREFIX) for c in (spec.llm.default, spec.llm.coder)):
        return None
    return f"local models: llama.cpp listens on {shell.driver_host()} (the driver's address toward the scheduler)"


def exit_code(status: str) -> int:
    """0 when every step ran (agent errors within max_error_rate included), 1 otherwise."""
    from engine.run_status import is_finished

    return 0 if is_finished(status) else 1


def print_sweep(sweep, run_dir: Path) -> int:
    for cell, run in zip(sweep.cells, sweep.runs, strict=True):
        print(f"{cell.cell_id}: {run.status}  params={cell.params}  replication={cell.replication}  seed={cell.seed}"
              + (f"  error={run.error}" if run.error else ""))
        for line in run.manifest_warnings:
            print(f"polis: warning: {cell.cell_id}: {line}", file=sys.stderr)
    print(f"sweep: {len(sweep.cells)} cells {sweep.statuses()} in {run_dir}")
    print(f"compare: polis query {run_dir} \"SELECT cell, count(*) FROM actions GROUP BY cell\"")
    return max((exit_code(run.status) for run in sweep.runs), default=0)
