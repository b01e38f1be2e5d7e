"""One sandbox process (``child.py``) and its two pipes, read and written without blocking the loop.

The process is started with ``subprocess`` (fork + exec of a fresh interpreter: a Dask worker has
threads, so a bare fork of it is unsafe), from a short-lived thread. Messages are read when the
running event loop reports the pipe readable (``add_reader``, registered per message, so no loop
is tied to the process), written when it is writable, and the process is reaped by polling
``wait4``, which also gives its peak RSS. Its working directory is an empty, read-only one
(:func:`empty_dir`), made once per actor process.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from engine.env.sandbox.wire import FrameBuffer, FrameTooLargeError, frame

__all__ = ["CHILD", "SandboxProcess", "empty_dir", "terminate_all"]

#: The sandbox process's entry point.
CHILD = Path(__file__).with_name("child.py")
_RE2 = importlib.util.find_spec("re2")
#: Where the sandbox process finds ``re2`` (it starts without site-packages on its path).
RE2_DIR = str(Path(_RE2.origin).parent.parent) if _RE2 is not None and _RE2.origin else ""
_READ = 1 << 16
_EMPTY: list[str] = []
logger = logging.getLogger(__name__)


def empty_dir() -> str:
    """An empty directory no one may write to (mode 0555), the sandbox processes' working directory; made once per
    process and removed at its exit."""
    with _EMPTY_LOCK:
        if not _EMPTY:
            path = tempfile.mkdtemp(prefix="polis-sandbox-cwd-")
            os.chmod(path, 0o555)
            atexit.register(os.rmdir, path)
            _EMPTY.append(path)
        return _EMPTY[0]


_EMPTY_LOCK = threading.Lock()
_WARNED: list[str] = []


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class SandboxProcess:
    """One sandbox process and its two pipes, read and written without blocking.

    The ``fork``/``exec`` runs in a short-lived thread: it took 7-30 ms here on a loaded machine,
    too long to hold the actor's event loop.
    """

    def __init__(self, max_memory_mb: int) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.to_child = self.from_child = -1
        self.frames = FrameBuffer()
        self.pending: deque[bytes] = deque()
        self.eof = False
        self.runs = 0
        self.killed_for: str | None = None  #: "time" or "protocol" once the pool killed it
        self.returncode: int | None = None
        self.peak_kb: int | None = None  #: ru_maxrss once reaped
        self.ready_info: dict[str, Any] | None = None
        self.start_error: str | None = None
        self._lock = threading.Lock()
        self._launched = threading.Event()
        threading.Thread(target=self._launch, args=(max_memory_mb,), name="polis-sandbox-start", daemon=True).start()

    def _launch(self, max_memory_mb: int) -> None:
        env = {key: os.environ[key] for key in ("PATH", "LD_LIBRARY_PATH") if key in os.environ}
        try:
            proc = subprocess.Popen(  # noqa: S603 - our own interpreter and entry point
                [sys.executable, "-I", "-S", "-W", "ignore", str(CHILD), str(max_memory_mb), RE2_DIR],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=empty_dir(), env=env,
                close_fds=True,
            )  # fmt: skip
        except OSError as error:
            self.start_error = f"it could not be started: {error}"
            self.eof = True
            self._launched.set()
            return
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)
        with self._lock:
            self.proc, self.pid = proc, proc.pid
            self.to_child, self.from_child = proc.stdin.fileno(), proc.stdout.fileno()
            killed = self.killed_for is not None
        if killed:  # killed (the pool closed) while it started
            os.kill(proc.pid, signal.SIGKILL)
        self._launched.set()

    async def launched(self, timeout_s: float) -> bool:
        """Wait (polling, off the loop's back) until the process exists; False if it could not be started."""
        deadline, delay = time.monotonic() + timeout_s, 0.0005
        while not self._launched.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        return self.pid is not None

    # ---- pipes ---------------------------------------------------------------------------------
    def _drain(self) -> None:
        while not self.eof:
            try:
                chunk = os.read(self.from_child, _READ)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
                return
            try:
                self.pending.extend(self.frames.feed(chunk))
            except FrameTooLargeError:
                self.kill("protocol")
                self.eof = True

    def _readable(self, waiter: asyncio.Future[None]) -> None:
        self._drain()
        if self.pending or self.eof:
            _resolve(waiter)

    async def receive(self) -> dict[str, Any] | None:
        """The next message, or None once the process ended (or broke the protocol and was killed)."""
        while not self.pending:
            if self.eof:
                return None
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self.from_child, self._readable, waiter)
            try:
                await waiter
            finally:
                loop.remove_reader(self.from_child)
        try:
            message = json.loads(self.pending.popleft())
        except (ValueError, RecursionError):
            message = None
        if not isinstance(message, dict):
            self.kill("protocol")
            self.eof = True
            return None
        return message

    async def send(self, body: bytes) -> bool:
        """Write one frame; False when the process is gone."""
        data = memoryview(frame(body))
        while data:
            try:
                data = data[os.write(self.to_child, data) :]
            except BlockingIOError:
                loop = asyncio.get_running_loop()
                writable: asyncio.Future[None] = loop.create_future()
                loop.add_writer(self.to_child, _resolve, writable)
                try:
                    await writable
                finally:
                    loop.remove_writer(self.to_child)
            except OSError:  # BrokenPipeError: it ended
                return False
        return True

    async def ready(self, timeout_s: float) -> bool:
        """Wait for the start-up message once; False when the process did not come up."""
        if self.ready_info is None and self.start_error is None and not await self.launched(timeout_s):
            self.start_error = self.start_error or f"it did not start within {timeout_s:g} s"
            self.kill("start")
        if self.ready_info is None and self.start_error is None:
            try:
                message = await asyncio.wait_for(self.receive(), timeout_s)
            except TimeoutError:
                message = None
            if message is not None and message.get("op") == "ready":
                self.ready_info = message
                _warn_unconfined(message.get("confined") or {})
            else:
                self.start_error = str(message.get("error")) if message else "no start-up message"
                self.kill("start")
        return self.ready_info is not None

    # ---- life and death ------------------------------------------------------------------------
    @property
    def confined(self) -> dict[str, Any]:
        """What the process did to confine itself (``netns``, ``netns_error``, ``uid``, ``cwd``); empty before ready."""
        return dict((self.ready_info or {}).get("confined") or {})

    @property
    def alive(self) -> bool:
        return self.returncode is None and self.killed_for is None and not self.eof

    def exited(self) -> bool:
        """True when the process ended on its own while idle (reaped now; one ``wait4`` without blocking)."""
        if self.returncode is None and self.pid is not None:
            try:
                pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._reaped(None, None)
            else:
                if pid:
                    self._reaped(status, usage.ru_maxrss)
        return self.returncode is not None

    def kill(self, reason: str) -> None:
        with self._lock:
            if self.killed_for is None:
                self.killed_for = reason
            pid = self.pid
        if pid is not None and self.returncode is None:
            try:
                os.kill(pid, signal.SIGKILL)  # never Popen.kill: its poll() would reap without rusage
            except ProcessLookupError:
                pass

    def _reaped(self, status: int | None, peak_kb: int | None) -> None:
        self.returncode = os.waitstatus_to_exitcode(status) if status is not None else -signal.SIGKILL
        self.peak_kb = peak_kb
        if self.proc is None:
            return
        self.proc.returncode = self.returncode
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    async def reap(self) -> None:
        """Collect the exit status and peak RSS of an ending process, polling (never blocking the loop)."""
        if not await self.launched(30.0):
            self._reaped(None, None)
            return
        assert self.pid is not None
        delay, deadline = 0.0005, time.monotonic() + 5.0
        while self.returncode is None:
            try:
                pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._reaped(None, None)
                return
            if pid:
                self._reaped(status, usage.ru_maxrss)
                return
            if time.monotonic() > deadline:
                self.kill(self.killed_for or "stuck")
                deadline = time.monotonic() + 5.0
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def reap_blocking(self) -> None:
        self._launched.wait(30.0)
        if self.pid is None:
            self._reaped(None, None)
        elif self.returncode is None:
            try:
                _, status, usage = os.wait4(self.pid, 0)
            except ChildProcessError:
                self._reaped(None, None)
            else:
                self._reaped(status, usage.ru_maxrss)

    def retire(self) -> None:
        """Kill it and reap it in a thread (off the loop; killed processes end within milliseconds)."""
        if self.returncode is None:
            self.kill(self.killed_for or "retired")
            threading.Thread(target=self.reap_blocking, name="polis-sandbox-reaper", daemon=True).start()

    def peak_rss_kb(self) -> int | None:
        """The process's peak RSS so far, from ``/proc/<pid>/status`` (or its rusage once reaped)."""
        if self.returncode is not None or self.pid is None:
            return self.peak_kb
        try:
            with open(f"/proc/{self.pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"VmHWM:"):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None


def terminate_all(processes: set[SandboxProcess]) -> None:
    for process in list(processes):
        process.kill(process.killed_for or "closed")
        process.reap_blocking()
    processes.clear()


def _warn_unconfined(confined: dict[str, Any]) -> None:
    """Log once per actor process that the sandbox runs in the actor's network namespace."""
    if confined.get("netns") is False and not _WARNED:
        _WARNED.append("netns")
        logger.warning("sandbox processes share this host's network: the kernel refused a network namespace (%s); "
                       "the guard still refuses socket and os imports", confined.get("netns_error"))
