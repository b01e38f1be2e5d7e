"""A store that fails mid-tick: the tick rolls back, the run reports the store's error, and no committed tick is lost.

The run's store is an fsspec filesystem of this process (``faulty://``, fsspec's memory filesystem with writes that
fail on demand), and the in-process shell runs the batches and the env router in this process, so every writer of the
run, the driver, the batches and the env router, meets the same fault.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from engine.run_status import RunStatus
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import SOCIETY_STEP_FILE, run_store
from tests.engine.society.crash_support import AGENTS, crash_spec, final_state


class FaultyFileSystem(MemoryFileSystem):
    """fsspec's memory filesystem, with a store of its own, whose writes of paths matching :attr:`failing` fail."""

    protocol = "faulty"
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]
    failing: ClassVar[re.Pattern[str] | None] = None
    refused: ClassVar[int] = 0

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return str(MemoryFileSystem._strip_protocol(path.removeprefix("faulty://")))

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if self.failing is not None and self.failing.search(path):
            FaultyFileSystem.refused += 1
            raise OSError(5, "Input/output error (injected)", path)
        super().pipe_file(path, value, mode=mode, **kwargs)


@pytest.fixture
def faulty() -> Iterator[type[FaultyFileSystem]]:
    fsspec.register_implementation("faulty", FaultyFileSystem, clobber=True)
    FaultyFileSystem.store.clear()
    FaultyFileSystem.failing, FaultyFileSystem.refused = None, 0
    try:
        yield FaultyFileSystem
    finally:
        FaultyFileSystem.failing = None
        FaultyFileSystem.store.clear()


@pytest.mark.parametrize("writes", [r"/packs/txn_000002/", r"/replay/actions/step_000002-"])
async def test_a_store_that_fails_mid_tick_rolls_the_tick_back_and_a_resume_ends_like_a_clean_run(
        faulty, shell, writes):
    spec = parse_spec(crash_spec(storage="packed"))
    clean = await run_experiment(spec, "faulty://clean", shell)
    assert clean.status == RunStatus.COMPLETED, clean.error

    faulty.failing = re.compile(r"^/?broken" + writes)  # tick 2's agent packs, or its action rows
    broken = await run_experiment(spec, "faulty://broken", shell)
    assert faulty.refused >= 1, (broken.status, broken.error)
    assert broken.status == RunStatus.FAILED
    assert "Input/output error (injected)" in (broken.error or "") and "faulty://" in (broken.error or "")
    assert run_store("faulty://broken").get_json(SOCIETY_STEP_FILE)["step_count"] == 1  # tick 1 stays committed
    with ReplayReader("faulty://broken") as reader:
        assert reader.count("actions") == AGENTS  # nothing of tick 2 is visible
    assert not [k for k in run_store("faulty://broken").list_prefix("") if ".staged-" in k and "step_000001" in k]

    faulty.failing = None  # the store is back
    resumed = await run_experiment(spec, "faulty://broken", shell, resume=True)
    assert resumed.status == RunStatus.COMPLETED, resumed.error
    state, expected = final_state("faulty://broken"), final_state("faulty://clean")
    for key in ("actions", "answers", "messaging", "env", "workspaces", "ticks", "completed_steps"):
        assert state[key] == expected[key], key


async def test_a_folder_per_agent_is_refused_for_a_run_at_a_url(faulty, shell):
    summary = await run_experiment(parse_spec(crash_spec(storage="dir")), "faulty://folders", shell)
    assert summary.status == RunStatus.FAILED
    assert "storage.workspaces 'dir' needs a local run directory" in (summary.error or "")
    assert run_store("faulty://folders").list_prefix("") == []  # refused before anything was written
