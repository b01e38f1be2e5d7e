"""Packs: written once, read by range, and a truncated or corrupt one is named, never read as empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import PackCorruptError, StoreKeyNotFoundError
from engine.storage.packs import PackReader, PackWriter, Segment
from engine.storage.store import LocalStore, MemoryStore, Store


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store") if request.param == "local" else MemoryStore()


def two_agents(store: Store) -> None:
    writer = PackWriter("packs/t1.pack", txn=1)
    writer.add(1, {"a.txt": [b"hello "], "log": [b"x\n"]}, ["state"])
    writer.add(2, {"b.txt": [b"bye"]}, [])
    writer.write(store)


def test_a_pack_round_trips_trees_and_bytes(store: Store) -> None:
    two_agents(store)
    reader = PackReader(store, "packs/t1.pack")
    assert reader.agent_ids() == [1, 2] and reader.txn == 1 and 2 in reader and 3 not in reader
    tree = reader.tree(1)
    assert tree.dirs == ("state",)
    assert tree.files["a.txt"] == (Segment("packs/t1.pack", 1, 0, 6),)
    frame = reader.frame(1)
    assert frame[0:6] == b"hello " and frame[6:8] == b"x\n"
    assert reader.frame(2) == b"bye"


def test_a_later_pack_keeps_segments_of_an_earlier_one(store: Store) -> None:
    two_agents(store)
    first = PackReader(store, "packs/t1.pack").tree(1)
    writer = PackWriter("packs/t2.pack", txn=2)
    tree = writer.add(1, {"a.txt": [*first.files["a.txt"], b"world"], "log": first.files["log"]}, first.dirs)
    writer.write(store)
    assert tree.packs() == {"packs/t1.pack", "packs/t2.pack"}
    again = PackReader(store, "packs/t2.pack").tree(1)
    assert again == tree and again.size("a.txt") == 11


def test_an_agent_is_packed_once(store: Store) -> None:
    writer = PackWriter("p", txn=1)
    writer.add(1, {}, [])
    with pytest.raises(ValueError, match="agent 1 is in pack p already"):
        writer.add(1, {}, [])


@pytest.mark.parametrize("cut", [1, 12, 27, 60])
def test_a_truncated_pack_is_refused_by_name(store: Store, cut: int) -> None:
    two_agents(store)
    data = store.get("packs/t1.pack")
    store.set("packs/t1.pack", data[:-cut])
    with pytest.raises(PackCorruptError, match="packs/t1.pack"):
        PackReader(store, "packs/t1.pack")


def test_a_flipped_byte_in_a_frame_is_caught_by_its_checksum(store: Store) -> None:
    two_agents(store)
    data = bytearray(store.get("packs/t1.pack"))
    data[10] ^= 0xFF  # inside agent 1's frame (it starts after the 8-byte magic)
    store.set("packs/t1.pack", bytes(data))
    reader = PackReader(store, "packs/t1.pack")  # the index is intact
    with pytest.raises(PackCorruptError, match="packs/t1.pack: agent 1's frame fails its checksum"):
        reader.frame(1)
    assert reader.frame(2) == b"bye"


def test_a_flipped_byte_in_the_index_is_caught(store: Store) -> None:
    two_agents(store)
    data = bytearray(store.get("packs/t1.pack"))
    data[-30] ^= 0xFF  # the index ends just before the 28-byte footer
    store.set("packs/t1.pack", bytes(data))
    with pytest.raises(PackCorruptError, match="its index fails its checksum"):
        PackReader(store, "packs/t1.pack")


def test_a_missing_pack_is_a_missing_key_not_an_empty_workspace(store: Store) -> None:
    with pytest.raises(StoreKeyNotFoundError):
        PackReader(store, "packs/none.pack")
