"""TodoTools: each tool, UUID ids and prefixes, archiving, and persistence across save and across ticks."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.toolset import Toolset
from engine.agent.toolsets import TodoTools
from engine.agent.toolsets.todo import ARCHIVE_FILE, MAX_ACTIVE_TODOS, TODO_FILE
from engine.agent.workspace import AgentWorkspace, DirWorkspace, workspace_path
from engine.env.actor import EnvRouterConfig, build_router
from engine.errors import WorkspaceError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel


@pytest.fixture
def ws(tmp_path: Path) -> AgentWorkspace:
    workspace = DirWorkspace(workspace_path(tmp_path / "agents", 1))
    workspace.make_dirs()
    return workspace


async def call(todos: TodoTools, name: str, *, readonly: bool = False, **args: Any) -> str:
    return await todos.dispatch(name, args, readonly=readonly)


async def add(todos: TodoTools, title: str, notes: str | None = None) -> str:
    """Add a todo and return its id (read back from the tool's answer)."""
    answer = await call(todos, "todo_add", title=title, notes=notes)
    assert answer.startswith("added todo ")
    return answer.split()[2]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_todo_tools_are_a_toolset_and_only_todo_list_is_readonly(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    assert isinstance(todos, Toolset)
    assert set(todos.tools(readonly=False)) == {
        "todo_list", "todo_add", "todo_update", "todo_start", "todo_complete", "todo_defer", "todo_clear_completed",
    }
    assert set(todos.tools(readonly=True)) == {"todo_list"}
    for tool in todos.tools(readonly=False).values():
        schema = tool.args_model.model_json_schema()
        assert schema.get("additionalProperties") is False
        assert all(spec.get("description") for spec in schema.get("properties", {}).values()), tool.name


async def test_todo_add_returns_a_stable_uuid_and_todo_list_shows_it(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    assert await call(todos, "todo_list", readonly=True) == "no active todos (0 archived)"
    first = await add(todos, "buy milk", "semi-skimmed")
    second = await add(todos, "call Bob")
    # UUIDs derived from (workspace, sequence): distinct, and identical on a rerun with the same seed.
    assert uuid.UUID(first).version == 5 and uuid.UUID(second).version == 5 and first != second
    assert first != second
    assert await call(todos, "todo_list", readonly=True) == (
        f"2 active todos (0 archived):\n- {first} [pending] buy milk — notes: semi-skimmed\n- {second} [pending] call Bob"
    )


async def test_update_changes_title_and_notes(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    ident = await add(todos, "draft")
    assert await call(todos, "todo_update", id=ident, title="draft the letter") == f"updated todo {ident} ('draft the letter'), now pending"
    await call(todos, "todo_update", id=ident, notes="to the council")
    (item,) = todos.state.items
    assert (item.title, item.notes) == ("draft the letter", "to the council")
    assert await call(todos, "todo_update", id=ident) == "error: give a new title, new notes, or both"


async def test_start_complete_and_defer_move_through_the_statuses(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    a, b = await add(todos, "cook"), await add(todos, "gym")
    assert await call(todos, "todo_start", id=a) == f"started todo {a} ('cook'), now in_progress"
    assert await call(todos, "todo_start", id=a) == f"todo {a} ('cook') is already in progress"
    assert await call(todos, "todo_complete", id=a, result="pasta for four") == f"completed todo {a} ('cook'), now completed"
    assert await call(todos, "todo_defer", id=b, reason="raining") == f"deferred todo {b} ('gym'), now deferred"
    assert await call(todos, "todo_list") == (
        f"2 active todos (0 archived):\n- {a} [completed] cook — result: pasta for four\n"
        f"- {b} [deferred] gym — deferred because: raining"
    )
    assert await call(todos, "todo_start", id=b) == f"started todo {b} ('gym'), now in_progress"
    assert todos.state.items[1].reason is None  # restarting clears why it was put off


async def test_a_completed_todo_cannot_be_changed_again(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    ident = await add(todos, "pay rent")
    await call(todos, "todo_complete", id=ident)
    for tool, verb in (("todo_complete", "completed again"), ("todo_start", "started"), ("todo_defer", "deferred")):
        assert await call(todos, tool, id=ident) == f"error: todo {ident} ('pay rent') is already completed and cannot be {verb}"


async def test_a_unique_prefix_of_six_or_more_characters_names_a_todo(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    ident = await add(todos, "water plants")
    assert (await call(todos, "todo_start", id=ident[:6].upper())).startswith(f"started todo {ident}")
    short = await call(todos, "todo_complete", id=ident[:5])
    assert short.startswith(f"error: no active todo with id {ident[:5]!r} (give the full id or at least its first 6 characters)")
    assert ident in short  # still suggested as the nearest


async def test_an_ambiguous_prefix_lists_the_todos_it_matches(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    await add(todos, "one")
    await add(todos, "two")
    todos.state.items[0].id = "abcdef01-0000-4000-8000-000000000000"
    todos.state.items[1].id = "abcdef02-0000-4000-8000-000000000000"
    assert await call(todos, "todo_start", id="abcdef") == (
        "error: id prefix 'abcdef' matches 2 todos: abcdef01-0000-4000-8000-000000000000 ('one'), "
        "abcdef02-0000-4000-8000-000000000000 ('two'); give more characters"
    )
    assert (await call(todos, "todo_start", id="abcdef02")).startswith("started todo abcdef02-")


async def test_an_unknown_id_is_an_error_listing_the_nearest_ids(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    assert await call(todos, "todo_start", id="0123456789") == "error: no active todo with id '0123456789'; you have no active todos"
    idents = [await add(todos, f"task {i}") for i in range(4)]
    typo = idents[2][:-1] + ("0" if idents[2][-1] != "0" else "1")
    answer = await call(todos, "todo_complete", id=typo)
    assert answer.startswith(f"error: no active todo with id {typo!r}; nearest ids: {idents[2]} ('task 2')")
    assert answer.count("('task") == 3
    assert all(item.status == "pending" for item in todos.state.items)


async def test_bad_arguments_unknown_tools_and_readonly_asks_are_refused(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    assert (await call(todos, "todo_add", title="")).startswith("error: invalid arguments for todo_add: title:")
    assert (await call(todos, "todo_add", title="x", priority=1)).startswith("error: invalid arguments for todo_add: priority:")
    assert (await call(todos, "todo_list", verbose=True)).startswith("error: invalid arguments for todo_list")
    assert (await call(todos, "todo_remove", id="x")).startswith("error: no todo tool 'todo_remove'")
    assert await call(todos, "todo_add", readonly=True, title="x") == \
        "error: todo_add changes your todos and is not available in a read-only ask"
    assert todos.state.items == []


async def test_the_active_list_is_capped(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    for i in range(MAX_ACTIVE_TODOS):
        await add(todos, f"t{i}")
    assert (await call(todos, "todo_add", title="one too many")).startswith(f"error: you already have {MAX_ACTIVE_TODOS} active todos")


async def test_clear_completed_archives_on_save_and_counts_the_archive(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    done, kept = await add(todos, "done thing"), await add(todos, "open thing")
    await call(todos, "todo_complete", id=done, result="went well")
    assert await call(todos, "todo_clear_completed") == "archived 1 completed todos; 1 active, 1 archived"
    assert await call(todos, "todo_clear_completed") == "no completed todos to clear"
    assert await call(todos, "todo_list") == f"1 active todos (1 archived):\n- {kept} [pending] open thing"
    assert not (ws.root / ARCHIVE_FILE).exists()  # nothing on disk until save()

    todos.save()

    (archived,) = read_jsonl(ws.root / ARCHIVE_FILE)
    assert archived == {"id": done, "title": "done thing", "notes": "", "status": "completed", "result": "went well", "reason": None}
    saved = json.loads((ws.root / TODO_FILE).read_text())
    assert [item["id"] for item in saved["items"]] == [kept]
    assert saved["archived"] == 1
    assert (await call(todos, "todo_start", id=done)).startswith(f"error: no active todo with id {done!r}")


async def test_state_survives_save_into_a_new_toolset_over_the_same_workspace(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    a, b, c = await add(todos, "a", "note a"), await add(todos, "b"), await add(todos, "c")
    await call(todos, "todo_start", id=a)
    await call(todos, "todo_defer", id=b, reason="later")
    await call(todos, "todo_complete", id=c, result="ok")
    listing = await call(todos, "todo_list")
    todos.save()

    reloaded = TodoTools(ws)

    assert await call(reloaded, "todo_list") == listing
    assert reloaded.state == todos.state
    await call(reloaded, "todo_clear_completed")
    reloaded.save()
    assert await call(TodoTools(ws), "todo_list") == (
        f"2 active todos (1 archived):\n- {a} [in_progress] a — notes: note a\n- {b} [deferred] b — deferred because: later"
    )


async def test_unsaved_changes_are_lost_and_an_unchanged_list_writes_nothing(ws: AgentWorkspace) -> None:
    TodoTools(ws).save()
    assert not (ws.root / TODO_FILE).exists()
    todos = TodoTools(ws)
    await add(todos, "never saved")  # a step that dies before to_workspace
    assert await call(TodoTools(ws), "todo_list") == "no active todos (0 archived)"


async def test_an_archive_written_before_a_crash_is_not_duplicated(ws: AgentWorkspace) -> None:
    todos = TodoTools(ws)
    ident = await add(todos, "finished")
    await call(todos, "todo_complete", id=ident)
    todos.save()
    before_clear = (ws.root / TODO_FILE).read_text()
    todos = TodoTools(ws)
    await call(todos, "todo_clear_completed")
    todos.save()
    (ws.root / TODO_FILE).write_text(before_clear)  # as if the worker died between the archive append and todo.json

    again = TodoTools(ws)
    assert await call(again, "todo_clear_completed") == "archived 1 completed todos; 0 active, 1 archived"
    again.save()

    assert [r["id"] for r in read_jsonl(ws.root / ARCHIVE_FILE)] == [ident]


def test_a_corrupt_todo_file_raises_workspace_error(ws: AgentWorkspace) -> None:
    (ws.root / TODO_FILE).write_text('{"items": [')
    with pytest.raises(WorkspaceError, match="todo.json is corrupt"):
        TodoTools(ws)
    (ws.root / TODO_FILE).write_text('{"items": [{"id": "x", "title": "t", "status": "someday"}]}')
    with pytest.raises(WorkspaceError, match="todo.json is corrupt"):
        TodoTools(ws)


# ---- across ticks, through a real agent -------------------------------------------------------
class TodoAgent(PersonAgent):
    def build_toolsets(self) -> list[Any]:
        assert self.workspace is not None
        return [*super().build_toolsets(), TodoTools(self.workspace)]


def act(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"thought": tool, "action": {"tool": tool, "arguments": arguments}, "finish": False}


DONE = {"thought": "done", "action": {"tool": "finish", "arguments": {"summary": "ok"}}, "finish": True}


async def test_todos_persist_across_to_workspace_and_from_workspace(tmp_path: Path) -> None:
    services = ServiceProxy(env=build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react")),
                            llm={"default": LLMClient(model="sim/default:test")})
    path = workspace_path(tmp_path / "agents", 5)
    TodoAgent.create(path, agent_id=5, profile={"name": "Eve"}, config={})

    # Tick 1: the model adds a todo.
    agent = await TodoAgent.from_workspace(path, services)
    agent._dispatcher = MeteredModel(ScriptedModel([act("todo_add", title="visit grandma"), DONE]), agent.meter, caller="agent:5")
    await agent.step(900, datetime(2024, 1, 1, 8))
    await agent.to_workspace()
    (item,) = json.loads((path / TODO_FILE).read_text())["items"]
    assert uuid.UUID(item["id"]).version == 5

    # Tick 2, a fresh object (as on another worker): the model sees the todo and starts it by prefix.
    again = await TodoAgent.from_workspace(path, services)
    llm = ScriptedModel([act("todo_list"), act("todo_start", id=item["id"][:8]), DONE])
    again._dispatcher = MeteredModel(llm, again.meter, caller="agent:5")
    await again.step(900, datetime(2024, 1, 1, 9))
    await again.to_workspace()
    assert llm.requests[1]["messages"][-1]["content"] == (
        f"Result of todo_list: 1 active todos (0 archived):\n- {item['id']} [pending] visit grandma"
    )

    # A read-only ask offers todo_list only, and changes nothing.
    third = await TodoAgent.from_workspace(path, services)
    assert await third.dispatch_react_tool("todo_list", {}, readonly=True) == (
        f"1 active todos (0 archived):\n- {item['id']} [in_progress] visit grandma"
    )
    assert "todo_add" not in third.react_tools(readonly=True)
