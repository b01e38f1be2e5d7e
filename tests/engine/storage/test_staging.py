"""Staged files: invisible until their transaction commits; recovery settles them either way."""

from __future__ import annotations

from engine.storage.staging import commit_staged, recover_staged, staged_path, staged_txn


def test_staged_names_hide_from_globs_and_parse_back(tmp_path):
    final = tmp_path / "actions" / "step_000001-part_0000.parquet"
    staged = staged_path(final, 7)
    assert staged.name == "step_000001-part_0000.parquet.staged-000007"
    assert staged_txn(staged) == (final, 7)
    assert staged_txn(final) is None
    staged.parent.mkdir()
    staged.write_bytes(b"x")
    assert list(tmp_path.rglob("*.parquet")) == []


def test_commit_is_idempotent(tmp_path):
    staged = staged_path(tmp_path / "a.jsonl", 1)
    staged.write_text("row\n")
    assert commit_staged([staged]) == 1
    assert commit_staged([staged]) == 0
    assert (tmp_path / "a.jsonl").read_text() == "row\n"


def test_recovery_rolls_committed_transactions_forward_and_deletes_the_rest(tmp_path):
    (tmp_path / "replay" / "actions").mkdir(parents=True)
    (tmp_path / "trace").mkdir()
    committed = staged_path(tmp_path / "replay" / "actions" / "s1.parquet", 3)
    uncommitted = staged_path(tmp_path / "replay" / "actions" / "s2.parquet", 4)
    trace = staged_path(tmp_path / "trace" / "s2.jsonl", 4)
    for path in (committed, uncommitted, trace):
        path.write_bytes(b"x")
    assert recover_staged([tmp_path / "replay", tmp_path / "trace", tmp_path / "missing"], 3) == (1, 2)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["s1.parquet"]
