"""Atomic writes leave either the old file or the new one, and no temp files."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from engine.errors import StorageError
from engine.storage.atomic import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    atomic_writer,
    read_json,
    temp_path_for,
)


def test_atomic_write_bytes_creates_parent_dirs_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "f.bin"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["f.bin"]


def test_temp_path_is_hidden_sibling_without_the_target_suffix(tmp_path: Path) -> None:
    tmp = temp_path_for(tmp_path / "s.parquet")
    assert tmp.parent == tmp_path
    assert tmp.name.startswith(".s.parquet.tmp-")
    assert not tmp.name.endswith(".parquet")
    assert tmp != temp_path_for(tmp_path / "s.parquet")


def test_failed_write_removes_temp_and_keeps_old_content(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError, match="boom"), atomic_writer(target) as fh:
        fh.write(b"half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_os_error_becomes_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorageError, match="cannot write"):
        atomic_write_text(tmp_path / "file" / "child.txt", "y")


def test_atomic_write_json_keeps_unicode_and_stringifies_unknown_types(tmp_path: Path) -> None:
    target = tmp_path / "d.json"
    when = dt.datetime(2024, 5, 1, 12, 0)
    atomic_write_json(target, {"name": "Zoë", "when": when}, indent=2)
    text = target.read_text(encoding="utf-8")
    assert "Zoë" in text
    assert json.loads(text) == {"name": "Zoë", "when": str(when)}
    assert read_json(target) == {"name": "Zoë", "when": str(when)}


def test_read_json_default_only_for_missing_files(tmp_path: Path) -> None:
    assert read_json(tmp_path / "nope.json", default={}) == {}
    with pytest.raises(StorageError, match="does not exist"):
        read_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(StorageError, match="not valid JSON"):
        read_json(bad, default={})


def test_swap_write_json_replaces_by_symlink_and_keeps_one_version(tmp_path) -> None:
    from engine.storage.atomic import swap_write_json

    target = tmp_path / "AGENT.json"
    target.write_text('{"step": 0}')  # a regular file first, as create() leaves it
    for step in (1, 2, 3):
        swap_write_json(target, {"step": step})
        assert json.loads(target.read_text()) == {"step": step}
    assert target.is_symlink()
    assert (tmp_path / os.readlink(target)).parent == tmp_path
    versions = sorted(p.name for p in tmp_path.iterdir() if p.name != "AGENT.json")
    assert versions == [os.readlink(target)]
