"""Packs: many agents' workspace files in one object, so a tick writes a few objects, never one per agent.

A pack holds, for each of its agents, one compressed *frame* (the bytes that agent's files gained in
the pack's transaction) and a *tree*: every file of the agent's workspace as a list of segments,
each a slice of a frame in this pack or an earlier one. A file that did not change keeps its
segments; an appended log adds one; a rewritten file gets a new one. Readers trust only the packs a
commit lists, so a pack is written once, under a fresh name, and never changed: object stores need
no rename.

Layout (all integers little-endian)::

    b"POLISPK1" | frame | frame | ... | index (zlib JSON) | index offset u64 | index length u64 | index crc32 u32 | b"POLISEND"

Every frame and the index carry a CRC-32 of their stored bytes: a truncated or corrupt pack is a
:class:`~engine.errors.PackCorruptError` naming it, never read as empty.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import PackCorruptError
from engine.storage.store import Store

__all__ = ["PackReader", "PackWriter", "Segment", "Tree"]

_MAGIC = b"POLISPK1"
_END = b"POLISEND"
_FOOTER = struct.Struct("<QQI8s")
_LEVEL = 3  # zlib level: ~3x on the agents' JSON, at a fraction of level 6's CPU
#: A pack up to this size is read whole at its first frame (one read, not one per agent); larger ones by range.
_WHOLE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Segment:
    """A slice of one agent's frame in pack ``pack`` (written by transaction ``txn``)."""

    pack: str
    txn: int
    start: int
    length: int

    def to_json(self) -> list[Any]:
        return [self.pack, self.txn, self.start, self.length]

    @classmethod
    def from_json(cls, value: list[Any]) -> Segment:
        return cls(str(value[0]), int(value[1]), int(value[2]), int(value[3]))


@dataclass(frozen=True)
class Tree:
    """One agent's workspace as a pack lists it: files as segments, and its folders."""

    files: Mapping[str, tuple[Segment, ...]]
    dirs: tuple[str, ...]

    def size(self, path: str) -> int:
        return sum(s.length for s in self.files[path])

    def packs(self) -> set[str]:
        """The packs this tree's files read from."""
        return {s.pack for segments in self.files.values() for s in segments}


class PackWriter:
    """Builds one pack in memory; :meth:`write` stores it.

    Args:
        name: the pack's key in the store.
        txn: the transaction it belongs to (recorded in every segment it holds).
    """

    def __init__(self, name: str, txn: int) -> None:
        self.name, self.txn = name, txn
        self._body = bytearray(_MAGIC)
        self._agents: dict[str, Any] = {}

    def add(self, agent_id: int, files: Mapping[str, Iterable[Segment | bytes]], dirs: Iterable[str]) -> Tree:
        """Add one agent: each file a list of segments to keep and new bytes to store here.

        Returns:
            The agent's tree as the pack records it.
        """
        folders = tuple(sorted(set(dirs)))  # once: ``dirs`` may be a generator
        if str(agent_id) in self._agents:
            raise ValueError(f"agent {agent_id} is in pack {self.name} already")
        raw = bytearray()
        tree: dict[str, tuple[Segment, ...]] = {}
        for path, parts in files.items():
            segments = []
            for part in parts:
                if isinstance(part, Segment):
                    segments.append(part)
                elif part:
                    segments.append(Segment(self.name, self.txn, len(raw), len(part)))
                    raw += part
            tree[path] = tuple(segments)
        stored = zlib.compress(bytes(raw), _LEVEL) if raw else b""
        offset = len(self._body)
        self._body += stored
        self._agents[str(agent_id)] = {
            "frame": [offset, len(stored), len(raw), zlib.crc32(stored)],
            "files": {path: [s.to_json() for s in segments] for path, segments in sorted(tree.items())},
            "dirs": list(folders),
        }
        return Tree(tree, folders)

    def __len__(self) -> int:
        return len(self._agents)

    def finish(self) -> bytes:
        """The pack's bytes."""
        index = zlib.compress(json.dumps({"v": 1, "txn": self.txn, "agents": self._agents}, separators=(",", ":")).encode(), _LEVEL)
        offset = len(self._body)
        return bytes(self._body) + index + _FOOTER.pack(offset, len(index), zlib.crc32(index), _END)

    def write(self, store: Store) -> int:
        """Store the pack under its name; returns its size in bytes."""
        data = self.finish()
        store.set(self.name, data)
        return len(data)


class PackReader:
    """Reads one pack: its index once, each agent's frame on demand (range reads, checksummed).

    Args:
        store: where the pack is.
        name: its key.
        keep_frames: keep each frame once read (a batch reads an agent's frame for several files); False
            decompresses on every read (the response cache reads each answer about once).

    Raises:
        PackCorruptError: the pack is truncated, or its footer or index does not check out.
        StorageError: the store could not read it (a missing pack is ``StoreKeyNotFoundError``).
    """

    def __init__(self, store: Store, name: str, *, keep_frames: bool = True) -> None:
        self.store, self.name, self.keep_frames = store, name, keep_frames
        self._body: bytes | None = None  #: the whole pack, once a frame is read from a small one
        size = self._size = store.size(name)
        if size < len(_MAGIC) + _FOOTER.size:
            raise PackCorruptError(f"pack {name} is truncated ({size} bytes)")
        offset, length, crc, end = _FOOTER.unpack(store.get_range(name, size - _FOOTER.size, _FOOTER.size))
        if end != _END or offset + length != size - _FOOTER.size or offset < len(_MAGIC):
            raise PackCorruptError(f"pack {name} is truncated or not a pack (bad footer)")
        stored = store.get_range(name, offset, length)
        if zlib.crc32(stored) != crc:
            raise PackCorruptError(f"pack {name}: its index fails its checksum")
        try:
            index = json.loads(zlib.decompress(stored))
        except (zlib.error, ValueError) as error:
            raise PackCorruptError(f"pack {name}: its index cannot be read: {error}") from None
        self.txn: int = int(index["txn"])
        self._agents: dict[str, Any] = index["agents"]
        self._frames: dict[int, bytes] = {}

    def agent_ids(self) -> list[int]:
        return sorted(int(a) for a in self._agents)

    def keys(self) -> list[str]:
        """Every file path of every agent's tree (one list, so a caller can index a pack without building trees)."""
        return [path for entry in self._agents.values() for path in entry["files"]]

    def __contains__(self, agent_id: int) -> bool:
        return str(agent_id) in self._agents

    def tree(self, agent_id: int) -> Tree:
        """The agent's workspace as this pack lists it.

        Raises:
            KeyError: the agent is not in this pack.
        """
        entry = self._agents[str(agent_id)]
        return Tree({path: tuple(Segment.from_json(s) for s in segments) for path, segments in entry["files"].items()},
                    tuple(entry["dirs"]))

    def frame(self, agent_id: int) -> bytes:
        """The bytes the agent's files gained in this pack (checked against their checksum)."""
        found = self._frames.get(agent_id)
        if found is None:
            offset, length, raw_length, crc = self._agents[str(agent_id)]["frame"]
            if self._body is None and self.keep_frames and self._size <= _WHOLE_BYTES:
                self._body = self.store.get(self.name)
            if not length:
                stored = b""
            elif self._body is not None:
                stored = self._body[offset:offset + length]
            else:
                stored = self.store.get_range(self.name, offset, length)
            if len(stored) != length or zlib.crc32(stored) != crc:
                raise PackCorruptError(f"pack {self.name}: agent {agent_id}'s frame fails its checksum")
            try:
                found = zlib.decompress(stored) if length else b""
            except zlib.error as error:
                raise PackCorruptError(f"pack {self.name}: agent {agent_id}'s frame cannot be read: {error}") from None
            if len(found) != raw_length:
                raise PackCorruptError(f"pack {self.name}: agent {agent_id}'s frame holds {len(found)} bytes, not {raw_length}")
            if self.keep_frames:
                self._frames[agent_id] = found
        return found
