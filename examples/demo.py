"""Run the demo experiment on the embedded defaults and show where the results are.

With the offline model installed (``make install-local``): 4 PersonAgents x 2 ticks on SmolLM2
served by llama.cpp (``demo_local.yaml``); otherwise 20 PersonAgents x 3 ticks on the simulated
LLM (``demo.yaml``). Then one DuckDB query over the Parquet replay.
Usage: python examples/demo.py [RUN_DIR]
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from engine.cli import main as polis
from engine.storage.reader import ReplayReader, format_table

HERE = Path(__file__).resolve().parent


def _spec() -> Path:
    """The real offline model when ``make install-local`` put it here, else the simulated LLM."""
    from engine.llm.local import LocalModelMissingError, gguf_path

    try:
        gguf_path("smollm2")
        if importlib.util.find_spec("xllamacpp") is None:
            raise LocalModelMissingError("the llama.cpp server (xllamacpp) is not installed")
    except LocalModelMissingError as missing:
        print(f"(simulated LLM: {missing})")
        return HERE / "demo.yaml"
    print("(real offline model: SmolLM2-135M-Instruct via llama.cpp on 127.0.0.1)")
    return HERE / "demo_local.yaml"


def demo(run_dir: Path) -> int:
    if run_dir.exists() and any(run_dir.iterdir()):
        import shutil

        shutil.rmtree(run_dir)
    code = polis(["run", str(_spec()), "--run-dir", str(run_dir)])
    if code != 0:
        return code
    print(f"\nParquet replay: {run_dir / 'replay'}")
    for dataset in sorted(p for p in (run_dir / "replay").iterdir() if p.is_dir()):
        print(f"  {dataset.name}/  ({len(list(dataset.glob('*.parquet')))} shards)")
    sql = (
        "SELECT step, count(*) AS agents, "
        "sum(CASE WHEN list_contains(tools_called, 'ask_env') THEN 1 ELSE 0 END) AS used_env, "
        "sum(llm_calls) AS llm_calls, sum(input_tokens + output_tokens) AS tokens "
        "FROM actions GROUP BY step ORDER BY step"
    )
    print(f"\nDuckDB: {sql}\n")
    with ReplayReader(run_dir) as reader:
        print(format_table(reader.query(sql)))
    print(f'\nTry: polis query {run_dir} "SELECT * FROM env_messaging"')
    return 0


if __name__ == "__main__":
    sys.exit(demo(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/demo").resolve()))
