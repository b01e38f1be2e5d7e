"""Run guarded code in a worker thread against a namespace of tools, plain data and safe builtins.

Generated code is synchronous: each tool is a plain function that submits the real (async) tool
call to the caller's event loop and waits for it, so the loop stays free while code runs, and the
router's per-module locks are held only around the tool's own execution. Limits:

- steps: the guard puts a ``_sandbox_tick()`` in every loop body, comprehension, function and
  lambda; past ``max_steps`` ticks (or the time limit, or a memory growth above the limit) every
  further tick raises an exception that sandboxed code cannot catch;
- wall clock: the caller stops waiting after ``timeout_s`` (plus a grace period for code stuck in
  one long C call, whose thread is abandoned and stops at its next tick);
- tool calls per run, printed characters, and the size of ``results``.

Failures are returned as text (``ExecutionResult.error``) to feed back to the LLM.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import CodeType, MappingProxyType
from typing import Any

from pydantic import BaseModel

from engine.env.sandbox.guard import FILENAME, compile_guarded
from engine.env.sandbox.instrument import BINOP, FORMAT, METHOD, TICK
from engine.env.sandbox.namespace import SAFE_MODULES, ToolError, binop, call_method, format_value, safe_builtins
from engine.errors import ToolCallError

__all__ = ["RESERVED_NAMES", "ExecutionResult", "SandboxLimits", "SandboxTool", "execute"]

#: Names the sandbox provides that code may not rebind (tool names are reserved as well).
RESERVED_NAMES = frozenset({"results", "ctx", "variables"})
_GRACE_S = 1.0
_CHECKPOINT_S = 0.005  #: how often running code yields the GIL and checks its memory growth
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class SandboxLimits:
    """Per-execution limits."""

    timeout_s: float = 2.0  #: wall clock, tool calls included
    max_steps: int = 100_000  #: loop iterations + function calls
    max_tool_calls: int = 20
    max_output_chars: int = 10_000  #: printed text kept
    max_result_chars: int = 50_000  #: ``results`` as JSON
    max_memory_growth_mb: int = 512  #: process RSS growth while the code runs (Linux only)


@dataclass(frozen=True)
class SandboxTool:
    """One tool as generated code sees it: ``name(*params)``."""

    name: str
    params: tuple[str, ...]  #: the arguments code passes, in positional order
    readonly: bool
    call: Callable[[dict[str, Any]], Awaitable[Any]]  #: runs the tool on the caller's loop
    bound: Mapping[str, Any] = field(default_factory=dict)  #: filled in by the caller (agent_id)
    #: checks the full arguments in the sandbox thread; raises TypeError (a mistake in the code)
    validate: Callable[[dict[str, Any]], None] | None = None


@dataclass
class ExecutionResult:
    """What one execution did."""

    ok: bool  #: ran to the end without an uncaught exception or a limit
    error: str | None  #: for the LLM: ``line N: Kind: message`` or ``stopped: ...``
    results: dict[str, Any]  #: the ``results`` dict the code filled (plain JSON data)
    calls: list[dict[str, Any]]  #: ``{tool, arguments, result, ok}`` per tool call
    output: str  #: captured ``print`` output
    steps: int
    elapsed_s: float
    mutations: int  #: successful calls of tools that change state


class _Stop(BaseException):
    """Raised at a tick once a limit is hit; not an Exception, so sandboxed code cannot catch it."""


class _Run:
    def __init__(self, loop: asyncio.AbstractEventLoop, limits: SandboxLimits) -> None:
        self.loop = loop
        self.limits = limits
        self.started = time.monotonic()
        self.deadline = self.started + limits.timeout_s
        self.steps = 0
        self.stopped: str | None = None
        self.calls: list[dict[str, Any]] = []
        self.mutations = 0
        self.output: list[str] = []
        self.output_chars = 0
        self.rss0 = _rss()
        self.next_checkpoint = self.started + _CHECKPOINT_S

    def stop(self, reason: str) -> _Stop:
        self.stopped = self.stopped or reason
        return _Stop(self.stopped)

    def tick(self) -> bool:
        self.steps += 1
        if self.stopped:
            raise _Stop(self.stopped)
        if self.steps > self.limits.max_steps:
            raise self.stop(f"step limit of {self.limits.max_steps} loop iterations and calls exceeded")
        now = time.monotonic()
        if now > self.deadline:
            raise self.stop(f"time limit of {self.limits.timeout_s} s exceeded")
        if now >= self.next_checkpoint:
            self.next_checkpoint = now + _CHECKPOINT_S
            # Hand the GIL over. The interpreter's forced switch reached the thread waiting for it (the
            # actor's event loop, serving every agent) only 1-5 times in a 1 s run on this kind of VM;
            # with this, 20-50 times, at no measurable cost to the sandboxed code.
            time.sleep(0)
            rss = _rss() if self.rss0 is not None else None
            if rss is not None and rss - self.rss0 > self.limits.max_memory_growth_mb * 2**20:  # type: ignore[operator]
                raise self.stop(f"memory limit of {self.limits.max_memory_growth_mb} MB exceeded")
        return True

    def print(self, *args: Any, sep: str = " ", end: str = "\n") -> None:
        text = str(sep).join(str(a) for a in args) + str(end)
        room = self.limits.max_output_chars - self.output_chars
        if room > 0:
            self.output.append(text[:room])
            self.output_chars += min(len(text), room)

    def wrap(self, tool: SandboxTool) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.tick()
            if len(args) > len(tool.params):
                raise TypeError(f"{tool.name}() takes at most {len(tool.params)} positional arguments")
            arguments = dict(zip(tool.params, args, strict=False))
            for key, value in kwargs.items():
                if key in tool.bound:
                    raise TypeError(f"{tool.name}(): {key} is filled in by the environment; do not pass it")
                if key in arguments:
                    raise TypeError(f"{tool.name}() got multiple values for {key!r}")
                arguments[key] = value
            if len(self.calls) >= self.limits.max_tool_calls:
                raise self.stop(f"limit of {self.limits.max_tool_calls} tool calls per run exceeded")
            try:
                arguments = json.loads(json.dumps(arguments))
            except (TypeError, ValueError):
                raise TypeError(f"{tool.name}(): arguments must be plain values (str, int, float, bool, list, dict)") from None
            full = {**arguments, **tool.bound}
            if tool.validate is not None:
                tool.validate(full)
            future = asyncio.run_coroutine_threadsafe(tool.call(full), self.loop)
            record: dict[str, Any] = {"tool": tool.name, "arguments": full}
            try:
                result = future.result(timeout=max(0.0, self.deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise self.stop(f"time limit of {self.limits.timeout_s} s exceeded while {tool.name} ran") from None
            except ToolCallError as error:
                self.calls.append({**record, "result": f"error: {error}", "ok": False})
                raise ToolError(str(error)) from None
            except Exception as error:  # a module bug: reported to the code and the router, never leaked as an object
                self.calls.append({**record, "result": f"error: {type(error).__name__}: {error}", "ok": False})
                raise ToolError(f"{tool.name} failed unexpectedly: {type(error).__name__}: {error}") from None
            value = _plain(result)
            self.calls.append({**record, "result": value if isinstance(value, str) else json.dumps(value), "ok": True})
            if not tool.readonly:
                self.mutations += 1
            return value

        call.__name__ = call.__qualname__ = tool.name
        return call


async def execute(
    code: str | CodeType,
    tools: Iterable[SandboxTool],
    *,
    ctx: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
    limits: SandboxLimits | None = None,
) -> ExecutionResult:
    """Check and run generated code.

    Args:
        code: the source (checked by the guard here) or code already built by ``compile_guarded``.
        tools: the tools the code may call, by name.
        ctx: read-only context visible as ``ctx`` (copied as plain data).
        variables: read-only template variables visible as ``variables``.
        limits: the limits (defaults: 2 s, 100k steps, 20 tool calls).

    Returns:
        The outcome; failures inside the code are in ``error``, never raised.

    Raises:
        CodeRejectedError: the guard refused ``code``.
    """
    limits = limits or SandboxLimits()
    tools = list(tools)
    compiled = code if isinstance(code, CodeType) else compile_guarded(code, reserved=RESERVED_NAMES | {t.name for t in tools})
    loop = asyncio.get_running_loop()
    run = _Run(loop, limits)
    namespace: dict[str, Any] = {
        "__builtins__": safe_builtins(run.print),
        TICK: run.tick, BINOP: binop, FORMAT: format_value, METHOD: call_method,
        **SAFE_MODULES,
        "results": {},
        "ctx": MappingProxyType(_plain(dict(ctx or {}))),
        "variables": MappingProxyType(_plain(dict(variables or {}))),
        **{tool.name: run.wrap(tool) for tool in tools},
    }  # fmt: skip
    done: asyncio.Future[tuple[str | None, dict[str, Any]]] = loop.create_future()

    def finish(outcome: tuple[str | None, dict[str, Any]]) -> None:
        if not done.done():
            done.set_result(outcome)

    def body() -> None:
        outcome: tuple[str | None, dict[str, Any]]
        try:
            exec(compiled, namespace)  # noqa: S102 - guarded, instrumented code in a bare namespace
            outcome = (f"stopped: {run.stopped}", {}) if run.stopped else _collect(namespace["results"], limits)
        except _Stop as stop:
            outcome = (f"stopped: {stop}", {})
        except BaseException as error:  # noqa: BLE001 - the thread's top level: everything is reported as text
            outcome = (_describe(error), {})
        try:
            loop.call_soon_threadsafe(finish, outcome)
        except RuntimeError:  # the caller's loop closed while abandoned code was still running
            pass

    threading.Thread(target=body, name="polis-sandbox", daemon=True).start()
    try:
        error, results = await asyncio.wait_for(asyncio.shield(done), limits.timeout_s + _GRACE_S)
    except TimeoutError:
        run.stop(f"time limit of {limits.timeout_s} s exceeded (stuck in a long call)")
        error, results = f"stopped: {run.stopped}", {}
    return ExecutionResult(
        ok=error is None, error=error, results=results, calls=list(run.calls), output="".join(run.output),
        steps=run.steps, elapsed_s=time.monotonic() - run.started, mutations=run.mutations,
    )  # fmt: skip


def _collect(results: Any, limits: SandboxLimits) -> tuple[str | None, dict[str, Any]]:
    try:
        text = json.dumps(results, default=str)
    except (TypeError, ValueError) as error:
        return f"results could not be stored: {error}", {}
    if len(text) > limits.max_result_chars:
        return f"results are too large ({len(text)} characters, limit {limits.max_result_chars})", {}
    return None, json.loads(text)


def _plain(value: Any) -> Any:
    """Plain JSON data only: sandboxed code never receives an object with methods of ours."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=str))


def _describe(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == FILENAME]
    where = f"line {frames[-1].lineno}: " if frames else ""
    return f"{where}{type(error).__name__}: {error}"


def _rss() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
