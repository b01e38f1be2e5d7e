"""Run a skill's script in-process: ``entrypoint(argv, ctx)``, ``pre_step(ctx)``, ``post_step(ctx)``.

A script is one Python file (import only the standard library and installed packages; sibling
files are not on ``sys.path``). It is loaded with importlib under a module name unique to its
path, and reloaded when the file changes, so an edited custom skill takes effect next call.

Each call runs in its own daemon thread and the caller waits at most ``timeout_s``. A Python
thread cannot be killed: a script that overruns keeps running in the background until it
returns. So after a timeout every further call into that script is refused *in this process*
(another worker process starts clean). A daemon thread, rather than ``asyncio.to_thread``, so that
a runaway script neither holds a slot of the loop's default executor nor blocks the worker's
exit (executor threads are joined at interpreter shutdown; daemon threads are not).

Scripts see the agent only through :class:`SkillContext`; their results go to ``state/*.json``.
Whatever a script raises becomes ``error: ...`` text for the model, never an exception here.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import importlib.util
import json
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, Literal

from engine.agent.skills.model import SkillError, SkillInfo
from engine.agent.workspace import AgentWorkspace
from engine.errors import WorkspaceError

__all__ = ["DEFAULT_TIMEOUT_S", "SkillContext", "SkillRun", "run_skill_function", "timed_out_scripts"]

#: seconds a script call may take before the caller stops waiting
DEFAULT_TIMEOUT_S = 10.0
_STATE_NAME = re.compile(r"^[a-z_]{1,64}$")
_RESERVED_STATE = frozenset({"skills", "todo"})  # owned by SkillTools and TodoTools
_MAX_STATE_BYTES = 1_000_000
_MAX_OUTPUT = 8_000

# Process-wide on purpose: the thread of a timed-out script is still running in this process.
_TIMED_OUT: dict[Path, str] = {}
_MODULES: dict[Path, tuple[tuple[int, int], ModuleType]] = {}
_LOAD_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class SkillContext:
    """What a skill script may see and do.

    Args:
        agent_id: the agent running the script.
        profile: the agent's profile (the script gets a read-only copy).
        now: the simulation time of the current step (``None`` before the first step).
        workspace: the agent's workspace; state files live in ``state/``.
        skill: the skill's catalog name.
        observations: this step's observations (given to hooks; empty for tool calls).
    """

    def __init__(
        self,
        *,
        agent_id: int,
        profile: Mapping[str, Any],
        now: datetime | None,
        workspace: AgentWorkspace,
        skill: str,
        observations: Iterable[str] = (),
    ) -> None:
        self.agent_id = agent_id
        self.profile: Mapping[str, Any] = MappingProxyType(copy.deepcopy(dict(profile)))
        self.now = now
        self._workspace = workspace
        self.skill = skill
        self.observations: tuple[str, ...] = tuple(observations)
        self.logs: list[str] = []

    def _state_file(self, name: str) -> str:
        if not isinstance(name, str) or not _STATE_NAME.match(name):
            raise SkillError(f"state name must be lowercase letters and '_' (got {name!r})")
        return f"state/{name}.json"

    def read_file(self, path: str) -> str | None:
        """The text of a workspace file (None when it does not exist); scripts read, they never write files.

        Raises:
            SkillError: a path outside the workspace, or a file that is not UTF-8 text.
        """
        try:
            return self._workspace.read_text(path)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, WorkspaceError) as error:
            raise SkillError(f"{path} is unreadable: {error}") from None

    def read_state(self, name: str) -> dict[str, Any]:
        """``state/<name>.json`` as a dict (``{}`` when it does not exist yet).

        Raises:
            SkillError: bad name, or the file is corrupt or not a JSON object.
        """
        path = self._state_file(name)
        try:
            data = json.loads(self._workspace.read_bytes(path))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise SkillError(f"state/{name}.json is unreadable: {error}") from None
        if not isinstance(data, dict):
            raise SkillError(f"state/{name}.json holds {type(data).__name__}, not an object")
        return data

    def write_state(self, name: str, data: Mapping[str, Any]) -> None:
        """Replace ``state/<name>.json`` atomically with ``data``.

        Raises:
            SkillError: bad or reserved name, data not a JSON object, or over 1 MB.
        """
        path = self._state_file(name)
        if name in _RESERVED_STATE:
            raise SkillError(f"state/{name}.json is reserved for the skill runtime")
        if not isinstance(data, Mapping):
            raise SkillError(f"write_state needs a dict, got {type(data).__name__}")
        try:
            text = json.dumps(dict(data), ensure_ascii=False, indent=1)
        except (TypeError, ValueError) as error:
            raise SkillError(f"state/{name}.json: data is not JSON: {error}") from None
        if len(text.encode("utf-8")) > _MAX_STATE_BYTES:
            raise SkillError(f"state/{name}.json would exceed {_MAX_STATE_BYTES} bytes")
        self._workspace.write_text(path, text)

    def log(self, message: str) -> None:
        """Record a line in the skill run log (``.runtime/logs/skill_runs.jsonl``)."""
        self.logs.append(str(message)[:1000])


@dataclass(frozen=True)
class SkillRun:
    """One call into a skill script."""

    skill: str
    function: str  #: ``entrypoint``, ``pre_step`` or ``post_step``
    status: Literal["ok", "error", "timeout", "refused"]
    output: str  #: JSON of a returned dict, a returned string, or ``error: ...``
    logs: tuple[str, ...] = ()
    ms: float = 0.0

    def record(self, argv: list[str] | None = None) -> dict[str, Any]:
        """The row written to ``skill_runs.jsonl``."""
        return {"skill": self.skill, "function": self.function, "argv": argv, "status": self.status,
                "output": self.output[:2000], "logs": list(self.logs), "ms": self.ms}


def timed_out_scripts() -> dict[Path, str]:
    """Scripts refused in this process because a call overran (path -> skill name); a copy."""
    return dict(_TIMED_OUT)


async def run_skill_function(
    skill: SkillInfo,
    function: Literal["entrypoint", "pre_step", "post_step"],
    ctx: SkillContext,
    *,
    argv: list[str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> SkillRun:
    """Call ``function`` of ``skill``'s script with a wall-clock limit.

    ``entrypoint`` is called as ``entrypoint(argv, ctx)``; hooks as ``pre_step(ctx)`` / ``post_step(ctx)``.
    Each returns a dict (reported as JSON) or a string; a hook may return ``None``.

    Returns:
        The run; failures are in ``status`` and ``output``, never raised.
    """
    started = time.perf_counter()

    def done(status: Literal["ok", "error", "timeout", "refused"], output: str) -> SkillRun:
        ms = round((time.perf_counter() - started) * 1000, 3)
        return SkillRun(skill.name, function, status, output[:_MAX_OUTPUT], tuple(ctx.logs), ms)

    script = skill.script_path
    if script is None:
        return done("error", f"error: skill {skill.name!r} has no script")
    script = script.resolve()
    if script in _TIMED_OUT:
        return done("refused", f"error: scripts of skill {skill.name!r} are disabled in this process: "
                               "an earlier call timed out and may still be running")
    call_args: tuple[Any, ...] = (list(argv or []), ctx) if function == "entrypoint" else (ctx,)

    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[str, Any]] = loop.create_future()

    def settle(outcome: tuple[str, Any]) -> None:
        if not future.done():
            future.set_result(outcome)

    def work() -> None:
        try:
            target = getattr(_load(script), function, None)
            if not callable(target):
                outcome: tuple[str, Any] = ("missing", None)
            else:
                outcome = ("ok", target(*call_args))
        except BaseException as error:  # a thread boundary: everything is reported to the caller
            outcome = ("raised", error)
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop closed while the script was running; nobody is waiting
            pass

    threading.Thread(target=work, name=f"skill:{skill.name}:{function}", daemon=True).start()
    try:
        kind, value = await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        _TIMED_OUT[script] = skill.name
        return done("timeout", f"error: {skill.script} {function} did not finish within {timeout_s:g}s; "
                               f"scripts of skill {skill.name!r} are disabled in this process")
    if kind == "missing":
        signature = "entrypoint(argv, ctx)" if function == "entrypoint" else f"{function}(ctx)"
        return done("error", f"error: {skill.script} defines no {signature}")
    if kind == "raised":
        return done("error", _error_text(value, script))
    return _format(value, function, done)


def _format(value: Any, function: str, done: Callable[..., SkillRun]) -> SkillRun:
    if isinstance(value, str):
        return done("ok", value)
    if value is None and function != "entrypoint":
        return done("ok", "")
    if isinstance(value, dict):
        try:
            return done("ok", json.dumps(value, ensure_ascii=False))
        except (TypeError, ValueError) as error:
            return done("error", f"error: {function} returned a dict that is not JSON: {error}")
    return done("error", f"error: {function} returned {type(value).__name__}; return a dict or a str")


def _error_text(error: BaseException, script: Path) -> str:
    where = ""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if Path(frame.filename) == script:
            where = f" (at {script.parent.name}/{script.name}:{frame.lineno})"
            break
    return f"error: {type(error).__name__}: {error}{where}"


def _load(script: Path) -> ModuleType:
    """The module of ``script``, (re)loaded when its size or mtime changed."""
    with _LOCKS_GUARD:
        lock = _LOAD_LOCKS.setdefault(script, threading.Lock())
    with lock:
        stat = script.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        cached = _MODULES.get(script)
        if cached is not None and cached[0] == key:
            return cached[1]
        name = "polis_skill_" + hashlib.sha1(str(script).encode()).hexdigest()[:16]
        spec = importlib.util.spec_from_file_location(name, script)
        if spec is None or spec.loader is None:
            raise SkillError(f"{script} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up here
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _MODULES[script] = (key, module)
        return module
