"""docs/tutorial.ipynb, executed as a reader would run it (nbclient, a real kernel): every cell runs without error.

The notebook reads ``../examples/personas.csv`` and writes its runs under ``runs/``: it runs from a copy in a
temporary ``docs/`` folder beside a link to the repository's ``examples/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_the_tutorial_runs_every_cell_and_shows_its_plot_and_results(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "docs").mkdir()
    notebook = nbformat.read(ROOT / "docs" / "tutorial.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")  # kept clean
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0"}
    client = NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path / "docs")}})
    client.execute(env=env)  # raises CellExecutionError on the first cell that raises
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot, inline
    texts = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "'baseline': <RunStatus.COMPLETED" in texts and "'storm warning': <RunStatus.COMPLETED" in texts
    assert "'status': 'completed'" in texts  # the fork's summary
    assert (tmp_path / "docs" / "runs" / "tutorial" / "branch").is_dir()
