"""One execution of guarded code: ticks, captured print, tool functions, the namespace, the outcome.

Stdlib only: the same code runs in the sandbox process (``child.py``) and, for comparison, in a
thread of the actor (``ThreadExecutor``). What generated code may touch is built here; how a tool
call reaches the environment is the caller's ``transport``, which returns a reply
``{"kind": "ok" | "type" | "tool" | "stop", "value" | "error": ...}`` (see ``broker.py``).
Everything that leaves an execution is bounded: printed text, ``results`` (plain JSON data only,
encoded piece by piece so an oversized value is refused before it is built) and error messages
(a bounded repr, never ``str()`` of a huge argument).
"""

from __future__ import annotations

import datetime
import json
import reprlib
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import CodeType, MappingProxyType
from typing import Any

from engine.env.sandbox.instrument import BINOP, FORMAT, METHOD, TICK
from engine.env.sandbox.limits import SandboxLimits
from engine.env.sandbox.namespace import ToolError, binop, call_method, format_value, safe_builtins
from engine.env.sandbox.offered import module_table

__all__ = [
    "CHECKPOINT_S",
    "FILENAME",
    "RESERVED_NAMES",
    "Run",
    "Stop",
    "ToolSpec",
    "Transport",
    "build_namespace",
    "collect",
    "describe",
    "describe_message",
    "exec_code",
    "memory_message",
]

FILENAME = "<sandbox>"
#: Names the sandbox provides that code may not rebind (tool names are reserved as well).
RESERVED_NAMES = frozenset({"results", "ctx", "variables"})
CHECKPOINT_S = 0.005  #: how often a tick calls the executor's checkpoint (in-thread: GIL hand-over, RSS check)
_MAX_ERROR_CHARS = 2_000

#: ``(name, positional parameters, names the environment fills in)`` of one tool, as code sees it.
ToolSpec = tuple[str, tuple[str, ...], tuple[str, ...]]
#: Carries one tool call out of the execution and returns the broker's reply.
Transport = Callable[[str, dict[str, Any]], dict[str, Any]]


class Stop(BaseException):
    """Raised at a tick once a limit is hit; not an Exception, so sandboxed code cannot catch it."""


def memory_message(limit_mb: int) -> str:
    return f"stopped: memory limit of {limit_mb} MB exceeded (the code used more than {limit_mb} MB)"


class Run:
    """The counters and limits of one execution.

    Args:
        limits: the limits.
        transport: carries tool calls to the broker.
        checkpoint: called from a tick every :data:`CHECKPOINT_S`; may raise :class:`Stop`.
    """

    def __init__(self, limits: SandboxLimits, transport: Transport, checkpoint: Callable[[Run], None] | None = None) -> None:
        self.limits = limits
        self.transport = transport
        self.checkpoint = checkpoint
        self.started = time.monotonic()
        self.deadline = self.started + limits.timeout_s
        self.steps = 0
        self.stopped: str | None = None
        self.output: list[str] = []
        self.output_chars = 0
        self.next_checkpoint = self.started + CHECKPOINT_S

    def stop(self, reason: str) -> Stop:
        self.stopped = self.stopped or reason
        return Stop(self.stopped)

    def tick(self) -> bool:
        self.steps += 1
        if self.stopped:
            raise Stop(self.stopped)
        if self.steps > self.limits.max_steps:
            raise self.stop(f"step limit of {self.limits.max_steps} loop iterations and calls exceeded")
        now = time.monotonic()
        if now > self.deadline:
            raise self.stop(f"time limit of {self.limits.timeout_s} s exceeded")
        if self.checkpoint is not None and now >= self.next_checkpoint:
            self.next_checkpoint = now + CHECKPOINT_S
            self.checkpoint(self)
        return True


class _Print:
    """The captured ``print``: keeps at most ``max_output_chars``, building no more text than that."""

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    def __call__(self, *args: Any, sep: str | None = " ", end: str | None = "\n") -> None:
        run = self._run
        room = run.limits.max_output_chars - run.output_chars
        if room <= 0:
            return
        sep = " " if sep is None else str(sep)
        end = "\n" if end is None else str(end)
        pieces: list[str] = []
        for i, arg in enumerate(args):
            for piece in ((sep,) if i else ()) + (str(arg),):
                pieces.append(piece[:room])
                room -= len(pieces[-1])
                if room <= 0:
                    break
            if room <= 0:
                break
        if room > 0:
            pieces.append(end[:room])
        text = "".join(pieces)
        run.output.append(text)
        run.output_chars += len(text)

    def __repr__(self) -> str:
        return "<built-in function print>"


class _Tool:
    """A tool as generated code calls it: ``name(*params, **named)``; the broker runs it."""

    __slots__ = ("_bound", "_name", "_params", "_run")

    def __init__(self, run: Run, spec: ToolSpec) -> None:
        self._run = run
        self._name, self._params, self._bound = spec

    def __repr__(self) -> str:
        return f"<tool {self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run, name, params = self._run, self._name, self._params
        run.tick()
        if len(args) > len(params):
            raise TypeError(f"{name}() takes at most {len(params)} positional arguments")
        arguments = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            if key in self._bound:
                raise TypeError(f"{name}(): {key} is filled in by the environment; do not pass it")
            if key in arguments:
                raise TypeError(f"{name}() got multiple values for {key!r}")
            arguments[key] = value
        try:
            arguments = json.loads(json.dumps(arguments))
        except (TypeError, ValueError, RecursionError):
            raise TypeError(f"{name}(): arguments must be plain values (str, int, float, bool, list, dict)") from None
        reply = run.transport(name, arguments)
        kind = reply.get("kind")
        if kind == "ok":
            return reply.get("value")
        error = str(reply.get("error", ""))
        if kind == "type":
            raise TypeError(error)
        if kind == "tool":
            raise ToolError(error)
        raise run.stop(error or f"{name} could not be called")


def build_namespace(
    run: Run, tools: Iterable[ToolSpec], ctx: Mapping[str, Any], variables: Mapping[str, Any], seed: int = 0
) -> dict[str, Any]:
    """The globals of one execution; ``ctx`` and ``variables`` must already be plain data.

    Args:
        seed: the request's seed, for ``random`` (the same seed draws the same numbers).
    """
    modules = module_table(run.tick, seed)
    return {
        "__builtins__": safe_builtins(_Print(run), modules),
        TICK: run.tick, BINOP: binop, FORMAT: format_value, METHOD: call_method,
        **modules,
        "results": {},
        "ctx": MappingProxyType(dict(ctx)),
        "variables": MappingProxyType(dict(variables)),
        **{spec[0]: _Tool(run, spec) for spec in tools},
    }  # fmt: skip


def exec_code(compiled: CodeType, run: Run, namespace: dict[str, Any]) -> tuple[str | None, dict[str, Any], bool]:
    """Run ``compiled`` in ``namespace``.

    Returns:
        ``(error, results, out_of_memory)``: the error text for the LLM (None when it ran to the
        end), the collected ``results`` and whether the code ran out of memory.
    """
    try:
        exec(compiled, namespace)  # noqa: S102 - guarded, instrumented code in a bare namespace
    except Stop as stop:
        return f"stopped: {stop}", {}, False
    except MemoryError:
        namespace.clear()  # free what the code holds before anything else is built
        return memory_message(run.limits.max_memory_growth_mb), {}, True
    except BaseException as error:  # noqa: BLE001 - the execution's top level: everything is reported as text
        try:
            return describe(error), {}, False
        except MemoryError:
            return memory_message(run.limits.max_memory_growth_mb), {}, True
    if run.stopped:
        return f"stopped: {run.stopped}", {}, False
    try:
        failure, results = collect(namespace["results"], run.limits.max_result_chars)
    except MemoryError:
        namespace.clear()
        return memory_message(run.limits.max_memory_growth_mb), {}, True
    return failure, results, False


class _TooLarge(Exception):
    pass


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, datetime.timezone)):
        return str(value)
    if isinstance(value, (set, frozenset, deque)):
        return list(value)
    what = "a function" if callable(value) else f"a {type(value).__name__}"
    raise TypeError(
        f"{what} is not plain data; store str, int, float, bool, None, lists and dicts "
        "(convert values with str(), list() or dict() first)"
    )


def collect(results: Any, limit: int) -> tuple[str | None, dict[str, Any]]:
    """``results`` as plain JSON data of at most ``limit`` characters, encoded piece by piece.

    Returns:
        ``(error, results)``: an error text and ``{}`` when they cannot be stored.
    """
    encoder = json.JSONEncoder(default=_json_default)
    pieces: list[str] = []
    size = 0
    try:
        for piece in encoder.iterencode(results):
            size += len(piece)
            if size > limit:
                raise _TooLarge
            pieces.append(piece)
    except _TooLarge:
        return f"results are too large (more than {limit} characters as JSON, limit {limit})", {}
    except (TypeError, ValueError, RecursionError) as error:
        return f"results could not be stored: {describe_message(error)}", {}
    return None, json.loads("".join(pieces))


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 10


def describe_message(error: BaseException) -> str:
    """``str(error)``, bounded: a huge argument is shown abbreviated, never built in full."""
    args = error.args
    if isinstance(error, KeyError) and len(args) == 1:
        text = _REPR.repr(args[0])
    elif type(error).__str__ is not BaseException.__str__:
        text = str(error)  # builtin exceptions with their own message (UnicodeError, OSError): bounded
    elif len(args) == 1 and isinstance(args[0], str):
        text = args[0]
    elif not args:
        text = ""
    else:
        text = _REPR.repr(args[0] if len(args) == 1 else args)
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."


def describe(error: BaseException) -> str:
    """``line N: Kind: message`` for the LLM (the line of the generated code that raised)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == FILENAME]
    where = f"line {frames[-1].lineno}: " if frames else ""
    return f"{where}{type(error).__name__}: {describe_message(error)}"
