"""Staged keys: invisible until their transaction commits; recovery settles them either way, on every store."""

from __future__ import annotations

import pytest

from engine.storage.staging import commit_staged, recover_staged, staged_key, staged_txn
from engine.storage.store import LocalStore, MemoryStore, Store


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path) -> Store:
    return LocalStore(tmp_path) if request.param == "local" else MemoryStore()


def test_staged_keys_hide_from_shard_globs_and_parse_back(tmp_path):
    final = "replay/actions/step_000001-part_0000.parquet"
    staged = staged_key(final, 7)
    assert staged == "replay/actions/step_000001-part_0000.parquet.staged-000007"
    assert staged_txn(staged) == (final, 7)
    assert staged_txn(final) is None
    LocalStore(tmp_path).set(staged, b"x")
    assert list(tmp_path.rglob("*.parquet")) == []


def test_commit_is_idempotent(store):
    staged = staged_key("trace/a.jsonl", 1)
    store.set(staged, b"row\n")
    assert commit_staged(store, [staged]) == 1
    assert commit_staged(store, [staged]) == 0
    assert store.get("trace/a.jsonl") == b"row\n"
    assert store.list_prefix("") == ["trace/a.jsonl"]


def test_recovery_rolls_committed_transactions_forward_and_deletes_the_rest(store):
    committed = staged_key("replay/actions/s1.parquet", 3)
    uncommitted = staged_key("replay/actions/s2.parquet", 4)
    trace = staged_key("trace/s2.jsonl", 4)
    for key in (committed, uncommitted, trace):
        store.set(key, b"x")
    store.set("replay/actions/s0.parquet", b"old")
    assert recover_staged(store, ["replay/", "trace/", "missing/"], 3) == (1, 2)
    assert store.list_prefix("") == ["replay/actions/s0.parquet", "replay/actions/s1.parquet"]
