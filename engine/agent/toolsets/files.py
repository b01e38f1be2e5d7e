"""File tools: read, write, append, list and grep inside the agent's own workspace.

Every path is relative to the workspace root and must stay inside it once symlinks are resolved.
Refusals come back to the model as ``error: ...`` text; nothing outside the workspace is read or
written. Runtime-owned files (:data:`RUNTIME_OWNED`) can be read but not written by the agent.

``grep`` patterns come from the model, so they are compiled with RE2 (:mod:`engine.linear_regex`),
whose searches take linear time; the scan runs in a thread, off the event loop, and stops at a
deadline, after a byte budget, or at the match limit.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.agent.tools import AgentTool
from engine.agent.workspace import AgentWorkspace, Entry
from engine.errors import StorageError, WorkspaceError
from engine.linear_regex import UnsupportedPatternError, compile_untrusted

__all__ = ["RUNTIME_OWNED", "AppendArgs", "FileTools", "GrepArgs", "ListArgs", "ReadArgs", "WriteArgs"]

#: workspace paths (files, or directories with everything below) the file tools never write.
#: ``custom/skills`` holds code the runtime executes: only the researcher may put skills there.
RUNTIME_OWNED = (
    ".runtime", "config.json", "AGENT.json", "state/todo.json", "state/todo_archive.jsonl",
    "state/skills.json", "custom/skills",
)

_SNIFF_BYTES = 8192  # a NUL byte in the first block marks a binary file
# RE2's search time is linear in the text and in the (capped) program size, so the line cap bounds
# one search (under ~0.1 s for the largest program allowed) and the deadline, checked between lines,
# the whole scan.
_GREP_LINE_CHARS = 1000  # a regex only sees this much of a line
_GREP_FILE_BYTES = 1_000_000  # larger files are skipped by grep
_GREP_TOTAL_BYTES = 8_000_000  # one scan reads at most this much text
_GREP_SECONDS = 2.0  # a scan stops here
_SHOWN_LINE_CHARS = 200
_LIST_ENTRIES = 200
_TEMP_FILE = re.compile(r"^\..+\.tmp-[0-9a-f]{32}$")  # engine.storage.atomic's temp files


class ReadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=512, description="file path relative to your workspace, e.g. notes/plan.md")
    offset: int | None = Field(default=None, ge=1, description="first line to read (1-based); omit to start at the top")
    limit: int | None = Field(default=None, ge=1, description="how many lines to read; omit to read to the end")


class WriteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=512, description="file path relative to your workspace; replaced if it exists")
    content: str = Field(description="the full new text of the file")


class AppendArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=512, description="file path relative to your workspace; created if missing")
    content: str = Field(description="text to add at the end of the file (include a trailing newline if you want one)")


class ListArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(default=".", max_length=512, description="directory relative to your workspace; '.' is the workspace itself")


class GrepArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str = Field(min_length=1, max_length=500, description="regular expression (RE2 syntax: Python's without backreferences or lookaround) searched in each line")
    path: str = Field(default=".", max_length=512, description="file or directory to search (hidden directories are searched only when named)")
    max_matches: int = Field(default=50, ge=1, le=500, description="stop after this many matching lines")


_TOOLS = {t.name: t for t in (
    AgentTool("read", "Read a text file of your workspace (optionally a range of lines)", ReadArgs, readonly=True),
    AgentTool("write", "Create or replace a text file in your workspace", WriteArgs, readonly=False),
    AgentTool("append", "Append text to a file in your workspace", AppendArgs, readonly=False),
    AgentTool("list", "List a directory of your workspace", ListArgs, readonly=True),
    AgentTool("grep", "Search files of your workspace for a regular expression", GrepArgs, readonly=True),
)}


class _Refused(Exception):
    """An expected refusal; its message goes to the model after ``error:``."""


class FileTools:
    """``read``/``write``/``append``/``list``/``grep`` on one agent's workspace (a :class:`~engine.agent.toolset.Toolset`).

    Args:
        workspace: the agent's workspace; nothing outside its root is ever touched.
        max_read_bytes: the most text one ``read`` returns.
        max_write_bytes: the largest file ``write`` or ``append`` leaves behind.
        protected: workspace paths the agent may read but never write; to add some, pass
            ``(*RUNTIME_OWNED, "memory/episodes.jsonl")``.
    """

    def __init__(
        self,
        workspace: AgentWorkspace,
        *,
        max_read_bytes: int = 64_000,
        max_write_bytes: int = 256_000,
        protected: Iterable[str] = RUNTIME_OWNED,
    ) -> None:
        self._ws = workspace
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self._protected = tuple(p.strip("/").casefold() for p in protected)

    # ---- Toolset protocol --------------------------------------------------------------------
    def tools(self, *, readonly: bool) -> dict[str, AgentTool]:
        return {name: t for name, t in _TOOLS.items() if t.readonly or not readonly}

    async def dispatch(self, name: str, args: dict[str, Any], *, readonly: bool) -> str:
        tool = _TOOLS.get(name)
        if tool is None:
            return f"error: no file tool {name!r}; file tools: {', '.join(_TOOLS)}"
        if readonly and not tool.readonly:
            return f"error: {name} changes files and is not available in a read-only ask"
        try:
            parsed = tool.args_model.model_validate(args)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors())
            return f"error: invalid arguments for {name}: {problems}"
        handler: Callable[[Any], str] = getattr(self, f"_{name}")  # _read, _write, ... below
        try:
            if name == "grep":  # a scan of many files: in a thread, so the event loop keeps turning
                return await asyncio.to_thread(handler, parsed)
            return handler(parsed)
        except _Refused as refusal:
            return f"error: {refusal}"
        except (OSError, StorageError) as error:
            cause = error if isinstance(error, OSError) else error.__cause__
            reason = getattr(cause, "strerror", None) or type(cause or error).__name__
            return f"error: {name} failed on {args.get('path')!r}: {reason}"

    def save(self) -> None:
        """Nothing to persist: every write already went to the workspace."""

    # ---- paths -------------------------------------------------------------------------------
    def _resolve(self, path: str, *, writing: bool = False) -> str:
        """The workspace-relative path ``path`` names (symlinks followed); refuses anything else."""
        if "\x00" in path:
            raise _Refused("the path contains a NUL byte")
        if "://" in path or path.lower().startswith("file:"):
            raise _Refused(f"{path!r} looks like a URL; use a path relative to your workspace")
        if path.startswith("~"):
            raise _Refused(f"{path!r}: '~' (a home directory) is not allowed; use a path relative to your workspace")
        pure = PurePosixPath(path)
        if pure.is_absolute():
            raise _Refused(f"{path!r} is absolute; use a path relative to your workspace")
        if ".." in pure.parts:
            raise _Refused(f"{path!r}: '..' is not allowed; use a path relative to your workspace")
        if "\\" in path:
            raise _Refused(f"{path!r}: use '/' between folders")
        try:
            rel = self._ws.resolve(pure.as_posix()) or "."
        except WorkspaceError as error:
            if "loop" in str(error):
                raise _Refused(f"{path!r} cannot be resolved (symlink loop)") from None
            raise _Refused(f"{path!r} leads outside your workspace through a symlink") from None
        if writing:
            folded = rel.casefold()
            if any(folded == p or folded.startswith(p + "/") for p in self._protected):
                raise _Refused(f"{rel} is maintained by the runtime and cannot be written")
            if path.endswith("/") or rel == ".":
                raise _Refused(f"{path!r} names a directory; give a file path")
        return rel

    def _regular_file(self, rel: str, *, missing_ok: bool = False) -> Entry | None:
        entry = self._ws.stat(rel)
        if entry is None:
            if missing_ok:
                return None
            raise _Refused(f"{rel} does not exist (use list to see what is there)")
        if entry.kind == "dir":
            raise _Refused(f"{rel} is a directory; use list")
        if entry.kind != "file":
            raise _Refused(f"{rel} is not a regular file")
        return entry

    def _encode(self, content: str) -> bytes:
        if "\x00" in content:
            raise _Refused("content contains a NUL byte; only text can be written")
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused("content is not valid Unicode text") from None

    # ---- tools -------------------------------------------------------------------------------
    def _read(self, args: ReadArgs) -> str:
        rel = self._resolve(args.path)
        entry = self._regular_file(rel)
        assert entry is not None
        ranged = args.offset is not None or args.limit is not None
        if not ranged and entry.size > self.max_read_bytes:
            raise _Refused(f"{rel} is {entry.size} bytes, over the read limit of {self.max_read_bytes}; "
                           "read part of it with offset and limit (line numbers)")
        first = args.offset or 1
        last = first + args.limit - 1 if args.limit is not None else None
        data = self._ws.read_bytes(rel)
        if b"\x00" in data[:_SNIFF_BYTES]:
            raise _Refused(f"{rel} is a binary file")
        chunks, lines, more = self._read_lines(io.BytesIO(data), first, last, rel)
        if first > max(lines, 1):
            raise _Refused(f"offset {first} is past the end of {rel} ({lines} lines)")
        try:
            text = b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused(f"{rel} is not UTF-8 text") from None
        if more:
            text += f"\n[more lines follow; continue with offset={(last or first) + 1}]"
        return text or "(empty file)"

    def _read_lines(self, fh: BinaryIO, first: int, last: int | None, rel: str) -> tuple[list[bytes], int, bool]:
        """Lines ``first..last`` of ``fh`` (bounded memory), the lines seen, and whether more follow."""
        chunks: list[bytes] = []
        size, number, continuing = 0, 0, False
        while True:
            # A line longer than the cap arrives in pieces; only its first piece starts a new line.
            piece = fh.readline(self.max_read_bytes + 1)
            if not piece:
                return chunks, number, False
            if not continuing:
                number += 1
                if last is not None and number > last:
                    return chunks, number - 1, True
            continuing = not piece.endswith(b"\n")
            if number >= first:
                chunks.append(piece)
                size += len(piece)
                if size > self.max_read_bytes:
                    raise _Refused(f"lines {first}-{last or 'end'} of {rel} are over the read limit of "
                                   f"{self.max_read_bytes} bytes; read fewer lines")

    def _write(self, args: WriteArgs) -> str:
        rel = self._resolve(args.path, writing=True)
        data = self._encode(args.content)
        if len(data) > self.max_write_bytes:
            raise _Refused(f"content is {len(data)} bytes, over the write limit of {self.max_write_bytes}")
        self._regular_file(rel, missing_ok=True)
        self._ws.write_bytes(rel, data)
        return f"wrote {len(data)} bytes to {rel}"

    def _append(self, args: AppendArgs) -> str:
        rel = self._resolve(args.path, writing=True)
        data = self._encode(args.content)
        entry = self._regular_file(rel, missing_ok=True)
        existing_size = entry.size if entry is not None else 0
        if existing_size + len(data) > self.max_write_bytes:
            raise _Refused(f"{rel} would grow to {existing_size + len(data)} bytes, over the file limit of "
                           f"{self.max_write_bytes}; start a new file")
        existing = self._ws.read_bytes(rel) if entry is not None else b""
        if b"\x00" in existing[:_SNIFF_BYTES]:
            raise _Refused(f"{rel} is a binary file")
        # Whole-file rewrite, so a crash leaves the old file or the new one, never half an append.
        self._ws.write_bytes(rel, existing + data)
        return f"appended {len(data)} bytes to {rel} (now {len(existing) + len(data)} bytes)"

    def _list(self, args: ListArgs) -> str:
        rel = self._resolve(args.path or ".")
        entry = self._ws.stat(rel)
        if entry is None:
            raise _Refused(f"{rel} does not exist")
        if entry.kind != "dir":
            raise _Refused(f"{rel} is not a directory; use read")
        rows = []
        for name, child in self._ws.listdir(rel):
            if _TEMP_FILE.match(name):
                continue
            if child.kind == "link":  # never stat through it: the target may be outside
                rows.append(f"{name}@ (symlink)")
            elif child.kind == "dir":
                rows.append(f"{name}/")
            elif child.kind == "file":
                rows.append(f"{name} ({child.size} bytes)")
            else:
                rows.append(f"{name} (special file)")
        if not rows:
            return f"{rel}/ is empty"
        shown = rows[:_LIST_ENTRIES]
        note = f"\n[{len(rows) - len(shown)} more entries not shown]" if len(rows) > len(shown) else ""
        return f"{rel}/ ({len(rows)} entries):\n" + "\n".join(shown) + note

    def _grep(self, args: GrepArgs) -> str:
        try:
            regex = compile_untrusted(args.pattern)
        except UnsupportedPatternError as error:
            raise _Refused(f"pattern {args.pattern!r}: {error}") from None
        rel = self._resolve(args.path or ".")
        entry = self._ws.stat(rel)
        if entry is None:
            raise _Refused(f"{rel} does not exist")
        files = self._walk(rel) if entry.kind == "dir" else iter([rel])
        deadline = time.monotonic() + _GREP_SECONDS
        matches: list[str] = []
        skipped, scanned, note = 0, 0, ""
        for seen, name in enumerate(files):
            if seen and time.monotonic() > deadline:  # many small or skipped files also take time
                note = f"\n[stopped after {_GREP_SECONDS:g} s; results are incomplete, narrow the pattern or the path]"
                break
            text = self._grep_text(name)
            if text is None:
                skipped += 1
                continue
            scanned += len(text)
            if scanned > _GREP_TOTAL_BYTES:
                note = f"\n[stopped after reading {_GREP_TOTAL_BYTES} characters; results are incomplete, narrow the path]"
                break
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line[:_GREP_LINE_CHARS]):
                    matches.append(f"{name}:{number}: {line[:_SHOWN_LINE_CHARS]}")
                if len(matches) >= args.max_matches:
                    note = f"\n[stopped at {args.max_matches} matches; narrow the pattern or the path]"
                elif time.monotonic() > deadline:
                    note = f"\n[stopped after {_GREP_SECONDS:g} s; results are incomplete, narrow the pattern or the path]"
                if note:
                    break
            if note:
                break
        if skipped:
            note += f"\n[skipped {skipped} binary, oversized or unreadable files]"
        if not matches:
            return f"no matches for {args.pattern!r} in {rel}" + note
        return f"{len(matches)} matches:\n" + "\n".join(matches) + note

    def _walk(self, top: str) -> Iterator[str]:
        """Files under ``top``, sorted; hidden folders below ``top`` and symlinked folders are not entered."""
        base = "" if top == "." else top
        for name, entry in self._ws.listdir(base):
            child = f"{base}/{name}" if base else name
            if entry.kind == "dir":
                if not name.startswith("."):
                    yield from self._walk(child)
            elif not _TEMP_FILE.match(name):
                yield child

    def _grep_text(self, name: str) -> str | None:
        """A file's text, or None when it leads outside, is not a small regular text file, or cannot be read."""
        try:
            real = self._ws.resolve(name)
            entry = self._ws.stat(real)
            if entry is None or entry.kind != "file" or entry.size > _GREP_FILE_BYTES:
                return None
            data = self._ws.read_bytes(real)
        except (OSError, WorkspaceError):
            return None
        if b"\x00" in data[:_SNIFF_BYTES]:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
