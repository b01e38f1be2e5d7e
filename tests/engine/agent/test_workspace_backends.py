"""Every workspace backend gives the agent the same files and the same refusals.

The file tools, the memory, the TODO list and the skills see an :class:`AgentWorkspace`; these tests
drive them through that interface only, once on a folder on disk and once in memory, and compare.
Symlinks exist only on disk: their escapes are in ``toolsets/test_files.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.memory.episodes import EpisodeStore
from engine.agent.memory.snapshot import episodes_offset, memory_snapshot
from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.toolsets import FileTools, TodoTools
from engine.agent.workspace import AgentWorkspace, DirWorkspace, Entry, workspace_name
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.env.actor import EnvRouterConfig, build_router
from engine.errors import WorkspaceError
from engine.llm.client import LLMClient

Factory = Callable[[], AgentWorkspace]


@pytest.fixture(params=["dir", "memory"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """A factory of empty workspaces named ``agent_0001`` on one backend."""
    if request.param == "dir":
        return lambda: DirWorkspace(tmp_path / "agents" / workspace_name(1))
    return lambda: MemoryWorkspace(workspace_name(1))


@pytest.fixture
def ws(make: Factory) -> AgentWorkspace:
    workspace = make()
    workspace.make_dirs()
    workspace.write_json("config.json", {"id": 1, "profile": {}, "config": {}})
    return workspace


async def call(tools: FileTools, name: str, **args: Any) -> str:
    return await tools.dispatch(name, args, readonly=False)


# ---- the byte-level contract ------------------------------------------------------------------
def test_files_and_folders_read_back_the_same(ws: AgentWorkspace) -> None:
    ws.write_bytes("notes/a.md", b"one")
    ws.append_bytes("notes/a.md", b"+two")
    ws.append_bytes("logs/new.jsonl", b"x\n")
    assert ws.read_bytes("notes/a.md") == b"one+two"
    assert ws.stat("notes/a.md") == Entry("file", 7)
    assert ws.stat("notes") == Entry("dir")
    assert ws.stat("missing") is None
    assert [name for name, _ in ws.listdir("")] == [".runtime", "config.json", "custom", "logs", "memory", "notes", "state"]
    assert list(ws.files()) == [
        "config.json", "logs/new.jsonl", "notes/a.md",
    ]
    ws.delete("notes/a.md")
    assert not ws.exists("notes/a.md") and ws.is_dir("notes")


def test_missing_files_and_folders_fail_as_the_os_would(ws: AgentWorkspace) -> None:
    with pytest.raises(FileNotFoundError):
        ws.read_bytes("nope.txt")
    with pytest.raises(IsADirectoryError):
        ws.read_bytes("state")
    ws.write_bytes("plain", b"x")
    with pytest.raises(NotADirectoryError):
        ws.write_bytes("plain/child", b"y")
    with pytest.raises(NotADirectoryError):
        ws.stat("plain/child")
    with pytest.raises(WorkspaceError):
        ws.read_json("nope.json")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../b", "a\\b", "a\x00b"])
def test_paths_out_of_the_workspace_are_refused(ws: AgentWorkspace, path: str) -> None:
    with pytest.raises((WorkspaceError, OSError)):
        ws.write_bytes(path, b"x")


def test_a_memory_workspace_reports_what_a_step_changed() -> None:
    loads: list[str] = []

    def lazy(text: bytes) -> tuple[int, Callable[[], bytes]]:
        return len(text), lambda: loads.append(text.decode()) or text

    ws = MemoryWorkspace("agent_0001", {"log.jsonl": lazy(b"old\n"), "keep.txt": lazy(b"same"), "gone.txt": b"bye"},
                         dirs=["state"])
    ws.append_bytes("log.jsonl", b"new\n")
    ws.write_bytes("fresh/a.txt", b"hello")
    ws.delete("gone.txt")
    assert ws.size("log.jsonl") == 8
    assert loads == []  # appending and sizing never fetch the committed content
    changes = ws.changes()
    assert changes.appended == {"log.jsonl": b"new\n"}
    assert changes.replaced == {"fresh/a.txt": b"hello"}
    assert changes.deleted == ("gone.txt",)
    assert changes.new_dirs == ("fresh",)
    assert ws.read_bytes("log.jsonl") == b"old\nnew\n" and loads == ["old\n"]
    assert not MemoryWorkspace("agent_0002", {"a": b"x"}).changes()


def test_a_committed_file_of_the_wrong_size_is_an_error_not_a_short_read() -> None:
    ws = MemoryWorkspace("agent_0001", {"a.txt": (10, lambda: b"short")})
    with pytest.raises(WorkspaceError, match="5 bytes, not the 10"):
        ws.read_bytes("a.txt")


def test_a_memory_workspace_gives_custom_skills_a_folder_on_disk_named_by_content() -> None:
    ws = MemoryWorkspace("agent_0001", {"custom/skills/s/SKILL.md": b"---\nname: s\n---\nbody"})
    folder = ws.local_dir("custom/skills")
    assert folder is not None and (folder / "s" / "SKILL.md").read_bytes() == b"---\nname: s\n---\nbody"
    assert MemoryWorkspace("agent_0002", {"custom/skills/s/SKILL.md": b"---\nname: s\n---\nbody"}).local_dir("custom/skills") == folder
    assert MemoryWorkspace("agent_0003", dirs=["custom/skills"]).local_dir("custom/skills") is None


# ---- the file tools on every backend ----------------------------------------------------------
REFUSALS = [
    ("read", {"path": "../outside/secret.txt"}, "'..' is not allowed"),
    ("read", {"path": "/etc/passwd"}, "'/etc/passwd' is absolute"),
    ("read", {"path": "~/.bashrc"}, "'~' (a home directory) is not allowed"),
    ("read", {"path": "file:///etc/passwd"}, "looks like a URL"),
    ("read", {"path": "notes\x00.txt"}, "the path contains a NUL byte"),
    ("read", {"path": "state"}, "state is a directory; use list"),
    ("read", {"path": "missing.txt"}, "missing.txt does not exist (use list to see what is there)"),
    ("write", {"path": "../escaped.txt", "content": "x"}, "'..' is not allowed"),
    ("write", {"path": ".runtime/logs/tool_calls.jsonl", "content": "{}"}, ".runtime/logs/tool_calls.jsonl is maintained by the runtime"),
    ("write", {"path": "config.json", "content": "{}"}, "config.json is maintained by the runtime and cannot be written"),
    ("write", {"path": "AGENT.json", "content": "{}"}, "AGENT.json is maintained by the runtime"),
    ("write", {"path": "state/todo.json", "content": "{}"}, "state/todo.json is maintained by the runtime"),
    ("write", {"path": "CUSTOM/Skills/x.py", "content": "{}"}, "is maintained by the runtime"),
    ("write", {"path": "huge.txt", "content": "x" * 2001}, "content is 2001 bytes, over the write limit of 2000"),
    ("write", {"path": "state", "content": "x"}, "state is a directory; use list"),
    ("write", {"path": "notes/", "content": "x"}, "names a directory"),
    ("append", {"path": ".runtime/logs/thread_messages.jsonl", "content": "{}"}, "is maintained by the runtime"),
    ("list", {"path": ".."}, "'..' is not allowed"),
    ("list", {"path": "config.json"}, "config.json is not a directory; use read"),
    ("grep", {"pattern": "secret", "path": "/etc"}, "is absolute"),
]


@pytest.mark.parametrize(("tool", "args", "message"), REFUSALS, ids=[f"{t}:{a.get('path')!r}" for t, a, _ in REFUSALS])
async def test_refusals_are_the_same_on_every_backend(ws: AgentWorkspace, tool: str, args: dict[str, Any], message: str) -> None:
    before = {path: ws.read_bytes(path) for path in ws.files()}
    result = await call(FileTools(ws, max_read_bytes=1000, max_write_bytes=2000), tool, **args)
    assert result.startswith("error: ") and message in result, result
    assert {path: ws.read_bytes(path) for path in ws.files()} == before


async def test_the_file_tools_answer_alike_on_every_backend(make: Factory) -> None:
    """One script of tool calls, answered on a fresh workspace of each backend: the answers must be these."""
    ws = make()
    ws.make_dirs()
    ws.write_json("config.json", {"id": 1})
    files = FileTools(ws, max_read_bytes=1000, max_write_bytes=2000)
    script = [
        ("write", {"path": "notes/plan.md", "content": "line 1\nline 2\n"}, "wrote 14 bytes to notes/plan.md"),
        ("append", {"path": "notes/plan.md", "content": "line 3\n"}, "appended 7 bytes to notes/plan.md (now 21 bytes)"),
        ("read", {"path": "./notes/plan.md", "offset": 2, "limit": 1}, "line 2\n\n[more lines follow; continue with offset=3]"),
        ("list", {"path": "notes"}, "notes/ (1 entries):\nplan.md (21 bytes)"),
        ("list", {"path": "memory"}, "memory/ is empty"),
        ("grep", {"pattern": "line [23]"}, "2 matches:\nnotes/plan.md:2: line 2\nnotes/plan.md:3: line 3"),
        ("write", {"path": "plain", "content": "x"}, "wrote 1 bytes to plain"),
        ("write", {"path": "plain/child.txt", "content": "y"}, "error: write failed on 'plain/child.txt': Not a directory"),
        ("read", {"path": "empty/../x"}, "error: 'empty/../x': '..' is not allowed; use a path relative to your workspace"),
    ]
    for tool, args, expected in script:
        assert await call(files, tool, **args) == expected, (tool, args)


# ---- the agent's state on every backend -------------------------------------------------------
async def test_todo_ids_depend_on_the_workspace_name_not_on_the_backend(make: Factory) -> None:
    ws = make()
    ws.make_dirs()
    answers = []
    for workspace in (ws, MemoryWorkspace("agent_0001")):
        todo = TodoTools(workspace)
        answers.append(await todo.dispatch("todo_add", {"title": "water the plants"}, readonly=False))
        todo.save()
    assert answers[0] == answers[1] and "water the plants" in answers[0]


def test_episodes_and_the_memory_snapshot_read_through_the_workspace(ws: AgentWorkspace) -> None:
    store = EpisodeStore(ws)
    store.finish([{"text": "met Bo", "kind": "social", "importance": 3}], step=1)
    offset = episodes_offset(ws)
    store.finish([{"text": "lunch with Bo", "kind": "social", "importance": 2}], step=2)
    snapshot = memory_snapshot(ws, offset)
    assert [e["text"] for e in snapshot["episodes"]] == ["lunch with Bo"]
    assert snapshot["memory"] is None and snapshot["todo"] is None
    assert [e.text for e in store.all()] == ["met Bo", "lunch with Bo"]


async def test_a_person_agent_steps_the_same_on_every_backend(tmp_path: Path) -> None:
    """The same seeded step on disk and in memory leaves the same files with the same content."""
    results = []
    for ws in (DirWorkspace(tmp_path / "agents" / workspace_name(4)), MemoryWorkspace(workspace_name(4))):
        router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
        services = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:test")})
        PersonAgent.create(ws, agent_id=4, profile={"name": "Di"}, config={"max_react_turns": 2})
        agent = await PersonAgent.from_workspace(ws, services)
        await agent.step(60, datetime(2024, 1, 1, 9))
        await agent.to_workspace()
        results.append({path: ws.read_bytes(path) for path in ws.files() if not path.startswith(".AGENT.json.v-")})
    on_disk, in_memory = results
    assert set(on_disk) == set(in_memory)
    assert on_disk == in_memory
