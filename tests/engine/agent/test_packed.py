"""Agent workspaces in packs: what a step changed is packed, the rest is kept by reference, and the
result reads back, and exports, byte for byte like a workspace stepped on disk."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from engine.agent.packed import PackedWorkspaces, export_workspace
from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import DirWorkspace, workspace_name
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.env.actor import EnvRouterConfig, build_router
from engine.errors import PackCorruptError
from engine.llm.client import LLMClient
from engine.storage.packs import PackReader, PackWriter
from engine.storage.store import LocalStore, MemoryStore, Store

T0 = datetime(2024, 1, 1, 8)


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store") if request.param == "local" else MemoryStore()


def services() -> ServiceProxy:
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    return ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:test")})


def files_of(ws: DirWorkspace | MemoryWorkspace) -> dict[str, bytes]:
    return {p: ws.read_bytes(p) for p in ws.files() if not p.startswith(".AGENT.json.v-")}


async def test_ticks_through_packs_leave_the_same_files_as_ticks_on_disk(store: Store, tmp_path: Path) -> None:
    on_disk = DirWorkspace(tmp_path / "agents" / workspace_name(5))
    PersonAgent.create(on_disk, agent_id=5, profile={"name": "Eve"}, config={"max_react_turns": 2})
    fresh = MemoryWorkspace(workspace_name(5))
    PersonAgent.create(fresh, agent_id=5, profile={"name": "Eve"}, config={"max_react_turns": 2})
    writer = PackWriter("packs/000000.pack", txn=0)
    PackedWorkspaces(store).pack(writer, 5, fresh)
    writer.write(store)
    pack = "packs/000000.pack"
    for tick in range(1, 5):
        t = T0 + timedelta(minutes=tick)
        packed = PackedWorkspaces(store)  # a new batch: nothing carried in memory
        ws = packed.load(5, pack)
        for workspace in (on_disk, ws):
            agent = await PersonAgent.from_workspace(workspace, services())
            await agent.step(60, t)
            await agent.to_workspace()
        pack = f"packs/{tick:06d}.pack"
        writer = PackWriter(pack, txn=tick)
        packed.pack(writer, 5, ws)
        writer.write(store)
    reread = PackedWorkspaces(store).load(5, pack)
    assert files_of(reread) == files_of(on_disk)
    assert set(reread.dirs()) == set(on_disk.dirs())
    exported = tmp_path / "export" / workspace_name(5)
    export_workspace(reread, exported)
    assert files_of(DirWorkspace(exported)) == files_of(on_disk)


def test_an_appended_log_stores_only_its_new_bytes_until_a_checkpoint(store: Store) -> None:
    packed = PackedWorkspaces(store, checkpoint_every=4)
    ws = MemoryWorkspace(workspace_name(1))
    ws.write_bytes("config.json", b"{}" * 500)
    frames = []
    pack = ""
    for txn in range(10):
        if txn:
            packed = PackedWorkspaces(store, checkpoint_every=4)
            ws = packed.load(1, pack)
        ws.append_bytes("log.jsonl", f"line {txn}\n".encode())
        pack = f"p{txn}"
        writer = PackWriter(pack, txn)
        tree = packed.pack(writer, 1, ws)
        writer.write(store)
        frames.append(len(PackReader(store, pack).frame(1)))
        assert len(tree.packs()) <= 4  # a tree reads from at most checkpoint_every packs
    # txn 0 stores both files; then only the new line, but every 4th transaction rewrites what got old.
    assert frames[0] == 1000 + 7
    assert frames[1] == frames[2] == frames[3] == 7
    assert frames[4] == 1000 + 5 * 7  # config.json and the log (now 5 lines) rewritten whole
    assert PackedWorkspaces(store).load(1, pack).read_bytes("log.jsonl") == b"".join(f"line {i}\n".encode() for i in range(10))


def test_deleted_files_and_new_folders_are_packed(store: Store) -> None:
    packed = PackedWorkspaces(store)
    ws = MemoryWorkspace(workspace_name(2), {"old.txt": b"x", "keep.txt": b"y"}, dirs=["state"])
    writer = PackWriter("a", 1)
    packed.pack(writer, 2, ws)
    writer.write(store)
    packed = PackedWorkspaces(store)
    ws = packed.load(2, "a")
    ws.delete("old.txt")
    ws.make_dir("notes/empty")
    writer = PackWriter("b", 2)
    packed.pack(writer, 2, ws)
    writer.write(store)
    again = PackedWorkspaces(store).load(2, "b")
    assert list(again.files()) == ["keep.txt"]
    assert set(again.dirs()) == {"notes", "notes/empty", "state"}


def test_a_corrupt_earlier_pack_fails_the_read_of_a_file_kept_in_it(store: Store) -> None:
    packed = PackedWorkspaces(store)
    writer = PackWriter("a", 1)
    packed.pack(writer, 3, MemoryWorkspace(workspace_name(3), {"kept.txt": b"k" * 100}))
    writer.write(store)
    packed = PackedWorkspaces(store)
    ws = packed.load(3, "a")
    ws.write_bytes("new.txt", b"n")
    writer = PackWriter("b", 2)
    packed.pack(writer, 3, ws)
    writer.write(store)
    data = bytearray(store.get("a"))
    data[9] ^= 0xFF
    store.set("a", bytes(data))
    ws = PackedWorkspaces(store).load(3, "b")
    assert ws.read_bytes("new.txt") == b"n"
    with pytest.raises(PackCorruptError, match="pack a: agent 3's frame fails its checksum"):
        ws.read_bytes("kept.txt")
