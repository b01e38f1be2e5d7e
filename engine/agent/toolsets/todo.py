"""TODO tools: the agent's explicit task list, kept in its workspace across ticks.

Items have UUID ids (a unique prefix of at least six characters is accepted) and a status:
``pending``, ``in_progress``, ``deferred`` or ``completed``. ``todo_clear_completed`` moves
completed items to ``state/todo_archive.jsonl``. The list is loaded from ``state/todo.json`` when
the toolset is built and written back by :meth:`TodoTools.save` (from ``to_workspace``), so a
step that dies half-way leaves the previous list.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.agent.tools import AgentTool
from engine.agent.workspace import AgentWorkspace
from engine.errors import WorkspaceError

__all__ = [
    "ARCHIVE_FILE",
    "MAX_ACTIVE_TODOS",
    "TODO_FILE",
    "TodoAddArgs",
    "TodoCompleteArgs",
    "TodoDeferArgs",
    "TodoIdArgs",
    "TodoItem",
    "TodoNoArgs",
    "TodoState",
    "TodoStatus",
    "TodoTools",
    "TodoUpdateArgs",
]

TODO_FILE = "state/todo.json"
ARCHIVE_FILE = "state/todo_archive.jsonl"
MAX_ACTIVE_TODOS = 100
_MIN_PREFIX = 6

TodoStatus = Literal["pending", "in_progress", "deferred", "completed"]


class TodoItem(BaseModel):
    """One entry of the list."""

    model_config = ConfigDict(extra="forbid")
    id: str  #: a UUID4, as text
    title: str
    notes: str = ""
    status: TodoStatus = "pending"
    result: str | None = None  #: what came of it (set by todo_complete)
    reason: str | None = None  #: why it was put off (set by todo_defer)


class TodoState(BaseModel):
    """The content of ``state/todo.json``."""

    model_config = ConfigDict(extra="forbid")
    items: list[TodoItem] = Field(default_factory=list)  #: active items, in the order added
    archived: int = 0  #: how many items todo_clear_completed has moved to the archive
    created: int = 0  #: how many items were ever added (seeds the next id)


class TodoNoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TodoAddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=200, description="what to do, in a few words")
    notes: str | None = Field(default=None, max_length=2000, description="details, context or a plan")


class TodoUpdateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64, description="the todo's id (or its first 6+ characters)")
    title: str | None = Field(default=None, min_length=1, max_length=200, description="new title; omit to keep")
    notes: str | None = Field(default=None, max_length=2000, description="new notes; omit to keep")


class TodoIdArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64, description="the todo's id (or its first 6+ characters)")


class TodoCompleteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64, description="the todo's id (or its first 6+ characters)")
    result: str | None = Field(default=None, max_length=2000, description="what came of it")


class TodoDeferArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64, description="the todo's id (or its first 6+ characters)")
    reason: str | None = Field(default=None, max_length=500, description="why it is put off")


class _Refused(Exception):
    """An expected refusal; its message goes to the model after ``error:``."""


class TodoTools:
    """The ``todo_*`` tools over one agent's workspace (a :class:`~engine.agent.toolset.Toolset`).

    Args:
        workspace: the agent's workspace; ``state/todo.json`` is read here if it exists.

    Raises:
        WorkspaceError: ``state/todo.json`` exists but is corrupt.
    """

    def __init__(self, workspace: AgentWorkspace) -> None:
        self._ws = workspace
        self.state = TodoState()
        if workspace.exists(TODO_FILE):
            try:
                self.state = TodoState.model_validate(workspace.read_json(TODO_FILE))
            except ValidationError as error:
                raise WorkspaceError(f"{workspace.name}/{TODO_FILE} is corrupt: {error}") from None
        self._to_archive: list[TodoItem] = []
        self._dirty = False
        self._tools = {
            "todo_list": AgentTool("todo_list", "Show your active todos", TodoNoArgs, readonly=True),
            "todo_add": AgentTool("todo_add", "Add a todo; returns its id", TodoAddArgs, readonly=False),
            "todo_update": AgentTool("todo_update", "Change a todo's title or notes", TodoUpdateArgs, readonly=False),
            "todo_start": AgentTool("todo_start", "Mark a todo as in progress", TodoIdArgs, readonly=False),
            "todo_complete": AgentTool("todo_complete", "Mark a todo as done, with its result", TodoCompleteArgs, readonly=False),
            "todo_defer": AgentTool("todo_defer", "Put a todo off, with a reason", TodoDeferArgs, readonly=False),
            "todo_clear_completed": AgentTool(
                "todo_clear_completed", "Archive all completed todos", TodoNoArgs, readonly=False
            ),
        }
        self._handlers: dict[str, Callable[[Any], str]] = {
            "todo_list": self._list, "todo_add": self._add, "todo_update": self._update, "todo_start": self._start,
            "todo_complete": self._complete, "todo_defer": self._defer, "todo_clear_completed": self._clear,
        }

    # ---- Toolset protocol --------------------------------------------------------------------
    def tools(self, *, readonly: bool) -> dict[str, AgentTool]:
        return {name: t for name, t in self._tools.items() if t.readonly or not readonly}

    async def dispatch(self, name: str, args: dict[str, Any], *, readonly: bool) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return f"error: no todo tool {name!r}; todo tools: {', '.join(self._tools)}"
        if readonly and not tool.readonly:
            return f"error: {name} changes your todos and is not available in a read-only ask"
        try:
            parsed = tool.args_model.model_validate(args)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors())
            return f"error: invalid arguments for {name}: {problems}"
        try:
            return self._handlers[name](parsed)
        except _Refused as refusal:
            return f"error: {refusal}"

    def save(self) -> None:
        """Append newly archived items to the archive, then write ``state/todo.json`` (both only if changed)."""
        if not self._dirty:
            return
        self._ws.append_jsonl(ARCHIVE_FILE, [item.model_dump() for item in self._to_archive])
        self._ws.write_json(TODO_FILE, self.state.model_dump())
        self._to_archive, self._dirty = [], False

    # ---- lookup ------------------------------------------------------------------------------
    def _find(self, ident: str) -> TodoItem:
        key = ident.strip().lower()
        items = self.state.items
        for item in items:
            if item.id == key:
                return item
        if len(key) >= _MIN_PREFIX:
            found = [item for item in items if item.id.startswith(key)]
            if len(found) == 1:
                return found[0]
            if found:
                raise _Refused(f"id prefix {ident!r} matches {len(found)} todos: {self._describe(found)}; give more characters")
        message = f"no active todo with id {ident!r}"
        if len(key) < _MIN_PREFIX:
            message += f" (give the full id or at least its first {_MIN_PREFIX} characters)"
        if not items:
            raise _Refused(message + "; you have no active todos")
        near = difflib.get_close_matches(key, [item.id for item in items], n=3, cutoff=0.0)
        by_id = {item.id: item for item in items}
        raise _Refused(message + f"; nearest ids: {self._describe([by_id[i] for i in near])}")

    @staticmethod
    def _describe(items: list[TodoItem]) -> str:
        return ", ".join(f"{item.id} ({item.title!r})" for item in items)

    def _changed(self, item: TodoItem, what: str) -> str:
        self._dirty = True
        return f"{what} todo {item.id} ({item.title!r}), now {item.status}"

    # ---- tools -------------------------------------------------------------------------------
    def _list(self, _: TodoNoArgs) -> str:
        archived = f"{self.state.archived} archived"
        if not self.state.items:
            return f"no active todos ({archived})"
        rows = []
        for item in self.state.items:
            row = f"- {item.id} [{item.status}] {item.title}"
            extras = [f"{label}: {value}" for label, value in
                      (("notes", item.notes), ("deferred because", item.reason), ("result", item.result)) if value]
            rows.append(row + (" — " + "; ".join(extras) if extras else ""))
        return f"{len(self.state.items)} active todos ({archived}):\n" + "\n".join(rows)

    def _add(self, args: TodoAddArgs) -> str:
        if len(self.state.items) >= MAX_ACTIVE_TODOS:
            raise _Refused(f"you already have {MAX_ACTIVE_TODOS} active todos; complete or clear some first")
        # A UUID derived from (workspace, sequence number): unique per agent and the same on every
        # rerun, so a run with a fixed seed replays identically (a random uuid4 would not).
        self.state.created += 1
        item_id = uuid.uuid5(uuid.NAMESPACE_URL, f"polis-todo:{self._ws.name}:{self.state.created}")
        item = TodoItem(id=str(item_id), title=args.title, notes=args.notes or "")
        self.state.items.append(item)
        return self._changed(item, "added")

    def _active(self, ident: str, verb: str) -> TodoItem:
        item = self._find(ident)
        if item.status == "completed":
            raise _Refused(f"todo {item.id} ({item.title!r}) is already completed and cannot be {verb}")
        return item

    def _update(self, args: TodoUpdateArgs) -> str:
        if args.title is None and args.notes is None:
            raise _Refused("give a new title, new notes, or both")
        item = self._active(args.id, "updated")
        item.title = args.title if args.title is not None else item.title
        item.notes = args.notes if args.notes is not None else item.notes
        return self._changed(item, "updated")

    def _start(self, args: TodoIdArgs) -> str:
        item = self._active(args.id, "started")
        if item.status == "in_progress":
            return f"todo {item.id} ({item.title!r}) is already in progress"
        item.status, item.reason = "in_progress", None
        return self._changed(item, "started")

    def _complete(self, args: TodoCompleteArgs) -> str:
        item = self._active(args.id, "completed again")
        item.status, item.result = "completed", args.result
        return self._changed(item, "completed")

    def _defer(self, args: TodoDeferArgs) -> str:
        item = self._active(args.id, "deferred")
        item.status, item.reason = "deferred", args.reason
        return self._changed(item, "deferred")

    def _clear(self, _: TodoNoArgs) -> str:
        done = [item for item in self.state.items if item.status == "completed"]
        if not done:
            return "no completed todos to clear"
        # A crash between save()'s archive append and its todo.json write leaves items in both; skip those.
        already = self._archived_ids()
        self._to_archive.extend(item for item in done if item.id not in already)
        self.state.items = [item for item in self.state.items if item.status != "completed"]
        self.state.archived += len(done)
        self._dirty = True
        return f"archived {len(done)} completed todos; {len(self.state.items)} active, {self.state.archived} archived"

    def _archived_ids(self) -> set[str]:
        # A torn last line from a crash mid-append is skipped; its item is archived again.
        return {record["id"] for record in self._ws.read_jsonl(ARCHIVE_FILE) if isinstance(record, dict) and "id" in record}
