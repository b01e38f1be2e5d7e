"""A run's progress bar: agent-steps done of all, with ticks, LLM calls, errors and the phase; a widget in Jupyter."""

from __future__ import annotations

from typing import Any

from engine.run_progress import RunProgress, describe_phase

__all__ = ["ProgressBar"]


def _tqdm() -> Any:
    """tqdm's class for here: a widget in Jupyter when ipywidgets is installed (``pip install polis[notebook]``),
    else text (``tqdm.auto`` without ipywidgets would warn "IProgress not found" in every cell that runs)."""
    try:
        import ipywidgets  # noqa: F401  (the notebook bar is drawn with it)
    except ImportError:
        from tqdm.std import tqdm as text

        return text
    from tqdm.auto import tqdm

    return tqdm


class ProgressBar:
    """Feeds a tqdm bar (``tqdm.auto``: a widget in Jupyter, text elsewhere) from a run's progress reports.

    Args:
        name: the run's name, the bar's label.
    """

    def __init__(self, name: str) -> None:
        self._bar: Any = _tqdm()(total=None, desc=name, unit="agent-step", dynamic_ncols=True)

    def __call__(self, progress: RunProgress) -> None:
        if progress.agent_steps_total and self._bar.total != progress.agent_steps_total:
            self._bar.reset(total=progress.agent_steps_total)
        self._bar.n = progress.agent_steps_done
        phase = describe_phase(progress)
        self._bar.set_postfix_str(f"tick {progress.ticks_done}/{progress.ticks_total}, {progress.llm_calls} LLM calls, "
                                  f"{progress.errors} errors, {progress.status}" + (f", {phase}" if phase else ""), refresh=False)
        self._bar.refresh()

    def note(self, text: str) -> None:
        """A line above the bar (the dashboard link)."""
        self._bar.write(text)

    def close(self) -> None:
        self._bar.close()
