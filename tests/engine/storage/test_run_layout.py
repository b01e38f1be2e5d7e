"""RunLayout is the only place that spells a run directory's path parts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.errors import StoreUrlError
from engine.storage.run_layout import STAGED_PREFIXES, RunLayout, as_location, is_url, run_store
from engine.storage.store import FsspecStore, LocalStore, MemoryStore

ROOT = Path(__file__).resolve().parents[3]
LAYOUT_MODULE = ROOT / "engine" / "storage" / "run_layout.py"

_PARTS = r"replay|trace|agents|artifacts|env|inputs|llm_cache|_snapshots|_codegen_cache"
_FILES = r"SOCIETY\.json|SOCIETY_STEP\.json|LEASE\.json"
#: A run-dir name used as a path part: joined with ``/`` on either side, passed to Path() or
#: os.path.join, an f-string path prefix, or a run file name as a whole string literal.
PATH_PART_PATTERNS = [
    re.compile(rf"""/\s*["']({_PARTS})["']"""),
    re.compile(rf"""["']({_PARTS})["']\s*/"""),
    re.compile(rf"""(Path|join)\([^)]*["']({_PARTS})["']"""),
    re.compile(rf"""f["']({_PARTS})/"""),
    re.compile(rf"""["']({_FILES})["']"""),
]


def _offending_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in PATH_PART_PATTERNS)]


@pytest.mark.parametrize("line", [
    'writer = ReplayWriter(run_dir / "replay", txn=txn)',
    "root = Path(run_dir) / 'agents'",
    'path = "trace" / name',
    'base = Path(run_dir, "artifacts")',
    'base = os.path.join(run_dir, "env")',
    'dirs = [cell / f"replay/{name}" for cell in cells]',
    'stored = read_json(run_dir / "SOCIETY.json", default=None)',
    'lease = "LEASE.json"',
])
def test_the_patterns_catch_a_bare_run_dir_path_part(line):
    assert _offending_lines(line) == [line]


@pytest.mark.parametrize("line", [
    'shard = shard_name(step, "env")',
    'if kind == "trace":',
    'DatasetSchema(name="x", kind="env", columns=())',
    'raise RunError(f"{run_dir} holds no run (no SOCIETY_STEP.json)")',
    'return {"agents": agents, "total": 3}',
])
def test_the_patterns_leave_other_uses_of_the_words_alone(line):
    assert _offending_lines(line) == []


def test_no_run_dir_path_part_is_spelled_outside_run_layout():
    sources = [p for d in ("engine", "service") for p in sorted((ROOT / d).rglob("*.py")) if p != LAYOUT_MODULE]
    assert len(sources) > 50  # the walk found the packages
    found = {str(p.relative_to(ROOT)): lines for p in sources if (lines := _offending_lines(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_every_path_is_under_the_run_directory_and_distinct(tmp_path):
    layout = RunLayout(tmp_path)
    paths = [getattr(layout, name) for name, value in vars(RunLayout).items() if isinstance(value, property)]
    assert all(p.is_relative_to(tmp_path) and p != tmp_path for p in paths)
    assert len(set(paths)) == len(paths)
    assert {tmp_path / prefix.rstrip("/") for prefix in STAGED_PREFIXES} <= set(paths)
    assert layout.artifact("ask-001.json").parent == layout.artifacts


def test_a_string_root_is_a_path(tmp_path):
    assert RunLayout(str(tmp_path)) == RunLayout(tmp_path)
    assert RunLayout(str(tmp_path)).replay == tmp_path / "replay"


def test_a_run_location_is_a_path_or_a_url(tmp_path):
    assert is_url("s3://bucket/runs/r1") and is_url("memory://r1")
    assert not is_url(tmp_path) and not is_url(str(tmp_path)) and not is_url(f"file://{tmp_path}")
    assert as_location("s3://bucket/runs/r1") == "s3://bucket/runs/r1"  # a Path would fold the '//'
    assert as_location(str(tmp_path)) == tmp_path


def test_run_store_opens_the_store_a_location_names(tmp_path):
    local = run_store(tmp_path)
    assert isinstance(local, LocalStore) and local.local_root == tmp_path
    assert run_store(f"file://{tmp_path}").local_root == tmp_path
    assert isinstance(run_store("memory://polis-layout-test"), FsspecStore)
    assert run_store("memory://polis-layout-test") is run_store("memory://polis-layout-test")  # one per URL and process
    fake = MemoryStore()
    assert run_store(fake) is fake
    with pytest.raises(StoreUrlError, match="nosuch://x"):
        run_store("nosuch://x")
