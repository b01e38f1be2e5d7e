"""Calibration as a sweep: cells scored by a fidelity metric, replications pooled, setups ranked with intervals."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.errors import FidelityError
from engine.fidelity import fidelity, rank_sweep
from engine.society.run.sweep import run_sweep
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from tests.engine.fidelity.test_rehearsal_run import rehearsal_spec, survey


async def test_a_sweep_over_the_rehearsals_noise_ranks_the_truthful_setup_first(shell, tmp_path):
    spec = {**rehearsal_spec(0.0, survey(150)),
            "sweep": {"grid": {"llm.default.extra.rehearse_noise": [0.4, 0.0]}, "replications": 2}}
    await run_sweep(parse_spec(spec), tmp_path / "sweep", shell)

    ranking = rank_sweep(tmp_path / "sweep", metric="accuracy", item="rate", bootstrap=50)
    assert [s.params for s in ranking] == [{"llm.default.extra.rehearse_noise": 0.0}, {"llm.default.extra.rehearse_noise": 0.4}]
    best, worst = ranking
    assert best.value == 1.0 and best.replications == 2 and best.spread == 0.0
    assert worst.ci_low <= worst.value <= worst.ci_high and worst.value < 0.8 and worst.spread is not None
    by_distance = rank_sweep(tmp_path / "sweep", metric="tvd", item="trust", bootstrap=20)
    assert by_distance[0].params == best.params and by_distance[0].value == 0.0  # distances rank lowest first

    with ReplayReader(tmp_path / "sweep") as reader:  # every cell's figures, in the sweep's own fidelity view
        cells = reader.query("SELECT count(DISTINCT cell) AS n FROM fidelity").column("n")[0].as_py()
    assert cells == 4

    with pytest.raises(FidelityError, match="name the one to rank by"):
        rank_sweep(tmp_path / "sweep")
    with pytest.raises(FidelityError, match="is a sweep"):
        fidelity(tmp_path / "sweep")
    cli = subprocess.run([sys.executable, "-m", "polis", "fidelity", str(tmp_path / "sweep"), "--item", "rate",
                          "--bootstrap", "20"], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "  1.   1.000" in cli.stdout and "'llm.default.extra.rehearse_noise': 0.0" in cli.stdout.splitlines()[1]
