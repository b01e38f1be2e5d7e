"""Run guarded code against tools, plain data and safe builtins: the result type and the executors.

Two executors meet one protocol (:class:`Executor`):

- :class:`~engine.env.sandbox.pool.SandboxPool` runs code in separate, killable processes whose
  memory and CPU limits the OS enforces (what CodeGenRouter uses);
- :class:`ThreadExecutor` runs code in a thread of the actor. Its limits are cooperative: ticks
  check steps, time and RSS growth, so one long C call (``a == b`` on deep structures,
  ``(1).to_bytes(10**9, "big")``) escapes them and holds the actor's GIL. Kept to measure the
  process path against and for callers without a pool.

Either way the tool calls run in the actor through a :class:`~engine.env.sandbox.broker.ToolBroker`,
and failures are returned as text (``ExecutionResult.error``) to feed back to the LLM.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any, Protocol

from engine.env.sandbox.broker import SandboxTool, ToolBroker, plain
from engine.env.sandbox.guard import compile_guarded
from engine.env.sandbox.limits import SandboxLimits
from engine.env.sandbox.runtime import RESERVED_NAMES, Run, build_namespace, exec_code

__all__ = ["RESERVED_NAMES", "ExecutionResult", "Executor", "SandboxLimits", "SandboxTool", "ThreadExecutor", "execute"]

_GRACE_S = 1.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


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
    #: peak RSS of the sandbox process so far (MB), read by the actor; None in-thread
    peak_memory_mb: float | None = None
    sandbox_pid: int | None = None  #: the process that ran the code; None in-thread


class Executor(Protocol):
    """Runs compiled, guarded code; tool calls go through a broker in the caller's process."""

    async def run(
        self,
        compiled: CodeType,
        tools: Iterable[SandboxTool],
        *,
        ctx: Mapping[str, Any] | None = None,
        variables: Mapping[str, Any] | None = None,
        limits: SandboxLimits | None = None,
        readonly: bool = False,
        seed: int = 0,
    ) -> ExecutionResult: ...


async def execute(
    code: str | CodeType,
    tools: Iterable[SandboxTool],
    *,
    ctx: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
    limits: SandboxLimits | None = None,
    readonly: bool = False,
    executor: Executor | None = None,
    seed: int = 0,
) -> ExecutionResult:
    """Check and run generated code.

    Args:
        code: the source (checked by the guard here) or code already built by ``compile_guarded``.
        tools: the tools the code may call, by name.
        ctx: read-only context visible as ``ctx`` (copied as plain data).
        variables: read-only template variables visible as ``variables``.
        limits: the limits (defaults: 2 s, 100k steps, 20 tool calls, 512 MB).
        readonly: offer and allow only read-only tools.
        executor: where the code runs (a ``SandboxPool``); None runs it in a thread (cooperative limits only).
        seed: the request's seed for ``random`` (the same seed draws the same numbers).

    Returns:
        The outcome; failures inside the code are in ``error``, never raised.

    Raises:
        CodeRejectedError: the guard refused ``code``.
        SandboxUnavailableError: the executor has no process to run it.
    """
    tools = list(tools)
    compiled = code if isinstance(code, CodeType) else compile_guarded(code, reserved=RESERVED_NAMES | {t.name for t in tools})
    return await (executor or ThreadExecutor()).run(
        compiled, tools, ctx=ctx, variables=variables, limits=limits, readonly=readonly, seed=seed
    )


class ThreadExecutor:
    """Runs code in a fresh daemon thread of this process (cooperative limits; see the module docstring)."""

    async def run(
        self,
        compiled: CodeType,
        tools: Iterable[SandboxTool],
        *,
        ctx: Mapping[str, Any] | None = None,
        variables: Mapping[str, Any] | None = None,
        limits: SandboxLimits | None = None,
        readonly: bool = False,
        seed: int = 0,
    ) -> ExecutionResult:
        limits = limits or SandboxLimits()
        loop = asyncio.get_running_loop()
        broker = ToolBroker(tools, limits, readonly=readonly)
        rss0 = _rss()

        def checkpoint(run: Run) -> None:
            # Hand the GIL over. The interpreter's forced switch reached the thread waiting for it (the
            # actor's event loop, serving every agent) only 1-5 times in a 1 s run on this kind of VM;
            # with this, 20-50 times, at no measurable cost to the sandboxed code.
            time.sleep(0)
            rss = _rss() if rss0 is not None else None
            if rss is not None and rss0 is not None and rss - rss0 > limits.max_memory_growth_mb * 2**20:
                raise run.stop(f"memory limit of {limits.max_memory_growth_mb} MB exceeded")

        def transport(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            future = asyncio.run_coroutine_threadsafe(broker.call(name, arguments), loop)
            try:
                return future.result(timeout=max(0.0, run.deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                future.cancel()
                return {"kind": "stop", "error": f"time limit of {limits.timeout_s} s exceeded while {name} ran"}

        run = Run(limits, transport, checkpoint)
        namespace = build_namespace(run, broker.specs(), plain(dict(ctx or {})), plain(dict(variables or {})), seed)
        done: asyncio.Future[tuple[str | None, dict[str, Any]]] = loop.create_future()

        def finish(outcome: tuple[str | None, dict[str, Any]]) -> None:
            if not done.done():
                done.set_result(outcome)

        def body() -> None:
            error, results, _ = exec_code(compiled, run, namespace)
            try:
                loop.call_soon_threadsafe(finish, (error, results))
            except RuntimeError:  # the caller's loop closed while abandoned code was still running
                pass

        threading.Thread(target=body, name="polis-sandbox", daemon=True).start()
        try:
            error, results = await asyncio.wait_for(asyncio.shield(done), limits.timeout_s + _GRACE_S)
        except TimeoutError:
            run.stop(f"time limit of {limits.timeout_s} s exceeded (stuck in a long call)")
            error, results = f"stopped: {run.stopped}", {}
        return ExecutionResult(
            ok=error is None, error=error, results=results, calls=list(broker.calls), output="".join(run.output),
            steps=run.steps, elapsed_s=time.monotonic() - run.started, mutations=broker.mutations,
        )  # fmt: skip


def _rss() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
