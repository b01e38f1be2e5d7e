"""SandboxPool: a few pre-started sandbox processes that run generated code under OS-enforced limits.

Each process is ``child.py`` started with ``subprocess`` (fork + exec of a fresh interpreter: a Dask
worker has threads, so a bare fork of it is unsafe). The process caps its own address space and
CPU time (``RLIMIT_AS``, ``RLIMIT_CPU``); the pool kills it at the execution's wall-clock deadline
(plus a short grace for the cooperative stop) and starts a replacement. Tool calls come back over
the pipe and run here, on the actor's event loop, through a :class:`ToolBroker`: env state never
leaves the actor. Nothing here blocks the loop: the pipes are non-blocking and read or written when
the loop reports them ready, processes are reaped by polling, and a process is started by one
``fork``/``exec`` in a short-lived thread, whose interpreter start-up runs while the loop goes on.

The pool bounds concurrency: at most ``size`` executions run at once; up to ``max_waiting`` more
wait in order for a process, later ones are refused (:class:`SandboxUnavailableError`). Nothing in
the pool is tied to one event loop, so it may be used from any loop, one at a time.
"""

from __future__ import annotations

import asyncio
import marshal
import signal
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any

from engine.env.sandbox.broker import SandboxTool, ToolBroker, plain
from engine.env.sandbox.errors import SandboxUnavailableError
from engine.env.sandbox.executor import ExecutionResult
from engine.env.sandbox.limits import SandboxLimits
from engine.env.sandbox.process import SandboxProcess, terminate_all

__all__ = ["PoolStats", "SandboxPool"]

_KILL_GRACE_S = 0.25  #: past the time limit, before the process is killed (the cooperative stop comes first)


@dataclass
class PoolStats:
    """What the pool did (for benchmarks and tests)."""

    started: int = 0  #: processes started
    killed: int = 0  #: processes killed at a deadline or for breaking the protocol
    replaced: int = 0  #: processes retired (killed, ended, over memory, recycled) and replaced
    executions: int = 0
    start_s: float = 0.0  #: seconds from the first start to every process ready, in :meth:`SandboxPool.start`


class SandboxPool:
    """Pre-started sandbox processes that run guarded code (the :class:`Executor` CodeGenRouter uses).

    Args:
        size: processes, hence executions at once.
        limits: the default limits; ``limits.max_memory_growth_mb`` is also every process's hard
            address-space cap (an execution may ask for less, never more).
        max_waiting: executions that may wait for a process; more are refused.
        recycle_after: executions after which a process is replaced.
        start_timeout_s: how long a process may take to start.
    """

    def __init__(
        self,
        size: int = 2,
        *,
        limits: SandboxLimits | None = None,
        max_waiting: int = 4096,
        recycle_after: int = 1000,
        start_timeout_s: float = 30.0,
    ) -> None:
        if size < 1:
            raise ValueError("a sandbox pool needs at least one process")
        self.size = size
        self.limits = limits or SandboxLimits()
        self.max_waiting = max_waiting
        self.recycle_after = recycle_after
        self.start_timeout_s = start_timeout_s
        self.stats = PoolStats()
        self._processes: set[SandboxProcess] = set()  # started and not retired
        self._idle: list[SandboxProcess] = []
        self._waiters: deque[asyncio.Future[SandboxProcess | None]] = deque()
        self._closed = False
        self._finalizer = weakref.finalize(self, terminate_all, self._processes)

    # ---- lifecycle -----------------------------------------------------------------------------
    def prestart(self) -> None:
        """Start the missing processes now; their interpreters come up while the caller goes on."""
        while not self._closed and len(self._processes) < self.size:
            self._idle.append(self._spawn())

    async def start(self) -> float:
        """Start every process and wait until all are ready; returns the seconds that took.

        Raises:
            SandboxUnavailableError: a process did not start.
        """
        started = time.perf_counter()
        self.prestart()
        for process in list(self._idle):
            if not await process.ready(self.start_timeout_s):
                self._drop(process)
                raise SandboxUnavailableError(f"a sandbox process did not start: {process.start_error}")
        self.stats.start_s = time.perf_counter() - started
        return self.stats.start_s

    def pids(self) -> list[int]:
        """The live processes' ids."""
        return [p.pid for p in self._processes if p.pid is not None and p.returncode is None]

    async def close(self) -> None:
        """Kill every process (idle or running) and refuse further executions."""
        self._closed = True
        processes = list(self._processes)
        self._idle.clear()
        for process in processes:
            process.kill(process.killed_for or "closed")
        try:
            for process in processes:
                await process.reap()
        finally:  # each stays in the set (the finalizer's) until reaped, even if this close is cancelled or abandoned
            self._processes.difference_update(p for p in processes if p.returncode is not None)
        while self._waiters:
            self._wake(self._waiters.popleft(), None)

    def terminate(self) -> None:
        """:meth:`close` for callers without an event loop (blocks while the processes are reaped)."""
        self._closed = True
        self._idle.clear()
        terminate_all(self._processes)

    # ---- processes -----------------------------------------------------------------------------
    def _spawn(self) -> SandboxProcess:
        process = SandboxProcess(self.limits.max_memory_growth_mb)
        self._processes.add(process)
        self.stats.started += 1
        return process

    def _drop(self, process: SandboxProcess) -> None:
        self._processes.discard(process)
        if process in self._idle:
            self._idle.remove(process)
        process.retire()

    @staticmethod
    def _wake(waiter: asyncio.Future[SandboxProcess | None], process: SandboxProcess | None) -> bool:
        if waiter.done():
            return False
        try:
            waiter.set_result(process)
        except RuntimeError:  # its loop is closed
            return False
        return True

    async def _acquire(self) -> SandboxProcess:
        while True:
            if self._closed:
                raise SandboxUnavailableError("the sandbox pool is closed")
            process = self._idle.pop() if self._idle else None
            if process is None and len(self._processes) < self.size:
                process = self._spawn()
            if process is None:
                if len(self._waiters) >= self.max_waiting:
                    raise SandboxUnavailableError(f"the sandbox is busy: {len(self._waiters)} executions are waiting")
                waiter: asyncio.Future[SandboxProcess | None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    process = await waiter
                except asyncio.CancelledError:
                    ready = waiter.result() if waiter.done() and not waiter.cancelled() else None
                    if ready is not None:
                        self._release(ready, healthy=True)
                    raise
                finally:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                if process is None:
                    continue  # a process was retired: there is room to start one
            try:
                ok = await process.ready(self.start_timeout_s)
            except asyncio.CancelledError:
                self._release(process, healthy=True)
                raise
            if ok and process.alive and not process.exited():
                return process
            self._drop(process)  # did not start, or ended while idle (it is never blamed on the next code)
            if not ok:
                raise SandboxUnavailableError(f"a sandbox process did not start: {process.start_error}")

    def _release(self, process: SandboxProcess, *, healthy: bool) -> None:
        if self._closed:
            self._drop(process)
            return
        if not (healthy and process.alive and process.runs < self.recycle_after):
            self._drop(process)
            self.stats.replaced += 1
            process = self._spawn()
        while self._waiters:
            if self._wake(self._waiters.popleft(), process):
                return
        self._idle.append(process)

    # ---- executions ----------------------------------------------------------------------------
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
        """Run compiled, guarded code in a sandbox process (waits for a free one).

        Raises:
            SandboxUnavailableError: no process can take the code.
        """
        limits = limits or self.limits
        broker = ToolBroker(tools, limits, readonly=readonly)
        message = marshal.dumps({
            "op": "run", "code": compiled, "tools": broker.specs(), "ctx": plain(dict(ctx or {})),
            "variables": plain(dict(variables or {})), "limits": limits.as_dict(), "seed": int(seed),
        })  # fmt: skip
        process = await self._acquire()
        process.runs += 1
        self.stats.executions += 1
        started = time.monotonic()
        kill = asyncio.get_running_loop().call_later(limits.timeout_s + _KILL_GRACE_S, process.kill, "time")
        healthy = False
        error: str | None
        results: dict[str, Any]
        try:
            outcome = await self._converse(process, message, broker, started + limits.timeout_s, limits)
            if outcome is None:
                await process.reap()
                self.stats.killed += process.killed_for in ("time", "protocol")
                error, results, output, steps = _ended(process, limits), {}, "", 0
            else:
                error, results, output, steps, recycle = outcome
                healthy = process.killed_for is None and not recycle
        finally:
            kill.cancel()
            peak = process.peak_rss_kb()
            self._release(process, healthy=healthy)
        return ExecutionResult(
            ok=error is None, error=error, results=results, calls=broker.calls, output=output, steps=steps,
            elapsed_s=time.monotonic() - started, mutations=broker.mutations,
            peak_memory_mb=None if peak is None else round(peak / 1024, 1), sandbox_pid=process.pid,
        )  # fmt: skip

    async def _converse(
        self, process: SandboxProcess, message: bytes, broker: ToolBroker, deadline: float, limits: SandboxLimits
    ) -> tuple[str | None, dict[str, Any], str, int, bool] | None:
        """Send the code, serve its tool calls, return its outcome; None when the process ended first."""
        if not await process.send(message):
            return None
        while True:
            reply = await process.receive()
            if reply is None:
                return None
            op = reply.get("op")
            if op == "done":
                return _outcome(process, reply)
            if op != "call":
                process.kill("protocol")
                return None
            tool = reply.get("tool")
            try:
                answer = await asyncio.wait_for(broker.call(tool, reply.get("arguments")), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                answer = {"kind": "stop", "error": f"time limit of {limits.timeout_s} s exceeded while {str(tool)[:80]} ran"}
            if not await process.send(marshal.dumps(answer)):
                return None


def _outcome(process: SandboxProcess, reply: dict[str, Any]) -> tuple[str | None, dict[str, Any], str, int, bool] | None:
    error, results, output, steps = reply.get("error"), reply.get("results"), reply.get("output"), reply.get("steps")
    if not (
        (error is None or isinstance(error, str)) and isinstance(results, dict) and isinstance(output, str)
        and isinstance(steps, int)
    ):  # fmt: skip
        process.kill("protocol")
        return None
    return error, results, output, steps, bool(reply.get("recycle"))


def _ended(process: SandboxProcess, limits: SandboxLimits) -> str:
    """Why an execution's process ended before it answered, for the LLM."""
    code = process.returncode
    if process.killed_for == "time" or code == -signal.SIGXCPU:
        return (f"stopped: time limit of {limits.timeout_s} s exceeded (the code ran past {limits.timeout_s} s "
                "and its sandbox process was killed)")  # fmt: skip
    if process.killed_for == "protocol":
        return "stopped: the sandbox process broke the protocol and was killed"
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"stopped: the sandbox process was ended by {name}"
    return f"stopped: the sandbox process ended unexpectedly (exit status {code})"
