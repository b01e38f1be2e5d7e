"""The sandbox process: runs compiled, guarded code for the env actor under limits the OS enforces.

The pool starts it as ``python -I -S -W ignore child.py MAX_MEMORY_MB RE2_DIR`` (no site, no
environment, stdlib only: the engine package is never imported, only this package's stdlib-only
modules ``wire``, ``limits``, ``attributes``, ``namespace``, ``instrument``, ``runtime`` and
``offered``, and ``engine.linear_regex`` with the one package it needs, ``re2``, loaded from
``RE2_DIR``, the directory the actor found it in). It starts in an empty, read-only working
directory. Before it reads any code it confines itself (:func:`_confine`): a network namespace of
its own, with no interface up, where the kernel allows one (as root always; otherwise in a new user
namespace, where unprivileged ones are enabled), and, started as root, the unprivileged uid and gid
65534 (``nobody``), so that ``RLIMIT_NPROC`` binds it. What it achieved goes to the pool in its
``ready`` message, which logs a warning when there is no network namespace. Then it
sets its own limits: no core files, no file writes, no new processes, few file descriptors, a
lower CPU priority than the actor, and a hard address-space cap of its start-up size plus
``MAX_MEMORY_MB``. Per execution it lowers the address-space limit (``RLIMIT_AS``) to the start-up
size plus the execution's memory limit and sets ``RLIMIT_CPU`` a second past the time limit: one C
call that allocates or computes without end is stopped by the kernel (``MemoryError``, ``SIGXCPU``)
or by the actor, which kills the process at its wall-clock deadline.

Protocol (``wire`` frames; the actor sends marshal, this process answers JSON):

- ``-> {"op": "ready", "pid", "base_mb", "confined"}`` once started (``confined``: what :func:`_confine` did);
- ``<- {"op": "run", "code", "tools", "ctx", "variables", "limits", "seed"}``;
- ``-> {"op": "call", "tool", "arguments"}`` and ``<- {"kind", "value" | "error"}`` per tool call;
- ``-> {"op": "done", "error", "results", "output", "steps", "recycle"}``.

End of input (the actor closed the pipe or died) ends the process.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import json
import marshal
import os
import resource
import sys
import types
from typing import Any

__all__ = ["main"]

_RECYCLE_GROWTH = 64 * 2**20  #: address-space growth after which the process asks to be replaced
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _load_sandbox() -> tuple[Any, Any, Any]:
    """Import this package's stdlib-only modules without running the engine's package ``__init__`` files."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    for name in ("engine", "engine.env", "engine.env.sandbox"):
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = package
    from engine.env.sandbox import limits, runtime, wire

    return limits, runtime, wire


def _load_re2(location: str) -> None:
    """Import ``re2`` (behind the sandbox's ``re``) from ``location`` alone: site-packages is not on the path."""
    spec = importlib.machinery.PathFinder.find_spec("re2", [location])
    if spec is None or spec.loader is None:
        raise ImportError(f"re2 is not in {location}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["re2"] = module
    spec.loader.exec_module(module)


def _vm_size() -> int:
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[0]) * _PAGE


_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000
_NOBODY = 65534


def _confine() -> dict[str, Any]:
    """Leave the actor's network and, as root, its privileges; return what was achieved (for the pool to log)."""
    libc = ctypes.CDLL(None, use_errno=True)
    root = os.geteuid() == 0
    # A non-root process may make a network namespace only inside a user namespace of its own.
    if libc.unshare(_CLONE_NEWNET if root else _CLONE_NEWUSER | _CLONE_NEWNET) == 0:
        netns: str | None = None
    else:
        netns = os.strerror(ctypes.get_errno())
    if root:  # after unshare, which needs the capability
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
    return {"netns": netns is None, "netns_error": netns, "uid": os.geteuid(), "cwd": os.getcwd()}


def _set_limits(max_memory_mb: int) -> int:
    """The process-wide limits; returns the start-up address-space size."""
    for limit, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NPROC, 0),
                         (resource.RLIMIT_NOFILE, 32)):  # fmt: skip
        resource.setrlimit(limit, (value, value))
    os.nice(10)  # code that burns a core yields it to the actor's event loop
    base = _vm_size()
    resource.setrlimit(resource.RLIMIT_AS, (base + max_memory_mb * 2**20,) * 2)
    return base


class _Channel:
    def __init__(self, reader: int, writer: int, wire: Any) -> None:
        self.reader, self.writer, self.wire = reader, writer, wire
        self.buffer = wire.FrameBuffer()
        self.pending: list[bytes] = []

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(self.wire.frame(json.dumps(message).encode()))
        while data:
            data = data[os.write(self.writer, data) :]

    def receive(self) -> dict[str, Any]:
        while not self.pending:
            chunk = os.read(self.reader, 1 << 16)
            if not chunk:
                raise SystemExit(0)  # the actor is gone
            self.pending += self.buffer.feed(chunk)
        return marshal.loads(self.pending.pop(0))


def _run_one(message: dict[str, Any], channel: _Channel, base: int, limits_mod: Any, runtime: Any) -> dict[str, Any]:
    limits = limits_mod.SandboxLimits(**message["limits"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(usage.ru_utime + usage.ru_stime + limits.timeout_s) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (min(base + limits.max_memory_growth_mb * 2**20, hard), hard))

    def transport(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        channel.send({"op": "call", "tool": name, "arguments": arguments})
        return channel.receive()

    run = runtime.Run(limits, transport)
    namespace = runtime.build_namespace(run, message["tools"], message["ctx"], message["variables"], message["seed"])
    error, results, out_of_memory = runtime.exec_code(message["code"], run, namespace)
    del namespace
    output = "".join(run.output)
    return {
        "op": "done", "error": error, "results": results, "output": output, "steps": run.steps,
        "recycle": out_of_memory or _vm_size() - base > _RECYCLE_GROWTH,
    }  # fmt: skip


def main(argv: list[str]) -> None:
    """Serve executions on fds 0 (in) and 1 (out) until the actor closes the pipe."""
    reader, writer = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # nothing the interpreter prints can corrupt the protocol
        os.dup2(null, fd)
    os.close(null)
    try:
        _load_re2(argv[2])
        limits_mod, runtime, wire = _load_sandbox()
        channel = _Channel(reader, writer, wire)
        confined = _confine()
        base = _set_limits(int(argv[1]))
    except (ImportError, OSError, ValueError, IndexError) as error:  # reported to the pool as the start error
        body = json.dumps({"op": "fatal", "error": f"{type(error).__name__}: {error}"}).encode()
        os.write(writer, len(body).to_bytes(4, "big") + body)
        raise SystemExit(1) from None
    channel.send({"op": "ready", "pid": os.getpid(), "base_mb": round(base / 2**20, 1), "confined": confined})
    while True:
        message = channel.receive()
        if message.get("op") != "run":
            return
        try:
            outcome = _run_one(message, channel, base, limits_mod, runtime)
        except MemoryError:
            limit = message["limits"]["max_memory_growth_mb"]
            outcome = {"op": "done", "error": runtime.memory_message(limit), "results": {}, "output": "", "steps": 0,
                       "recycle": True}  # fmt: skip
        channel.send(outcome)
        if outcome["recycle"]:
            return


if __name__ == "__main__":
    main(sys.argv)
