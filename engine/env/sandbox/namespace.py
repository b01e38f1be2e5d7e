"""What generated code can reach: a few safe builtins, proxies of allowed modules, guarded operators.

Nothing here is a real module or an interpreter object with reachable internals. Allowed modules
are exposed as ``SimpleNamespace`` proxies holding only whitelisted members, so ``json.decoder`` or
``math.__loader__`` simply do not exist. The guard (``guard.py``) keeps code away from names and
attributes that start with ``_``; this module keeps the objects that remain from allocating
unbounded memory in a single C call (``'a' * 10**10``, ``2 ** 10**10``, ``f"{x:>9999999999}"``).
"""

from __future__ import annotations

import builtins
import datetime as _datetime
import json as _json
import math as _math
import re
import statistics as _statistics
from collections import deque
from collections.abc import Callable, Mapping, Sized
from types import SimpleNamespace
from typing import Any

from engine.env.sandbox.attributes import SIZED_METHODS

__all__ = [
    "ALLOWED_EXCEPTIONS",
    "MAX_INT_BITS",
    "MAX_SEQUENCE",
    "SAFE_MODULES",
    "ToolError",
    "SIZED_METHODS",
    "binop",
    "call_method",
    "format_value",
    "safe_builtins",
]

#: Longest string, list or tuple one operator or builtin may produce (characters or items).
MAX_SEQUENCE = 1_000_000
#: Largest integer (in bits) one ``*``, ``**`` or ``<<`` may produce.
MAX_INT_BITS = 100_000
_SEQUENCES = (str, bytes, list, tuple, deque)
_MAX_JSON_INDENT = 8


def _json_dumps(obj: Any, *, indent: int | None = None, sort_keys: bool = False, ensure_ascii: bool = True) -> str:
    if indent is not None and (not isinstance(indent, int) or not 0 <= indent <= _MAX_JSON_INDENT):
        raise ValueError(f"json.dumps indent must be an integer from 0 to {_MAX_JSON_INDENT}")
    return _json.dumps(obj, indent=indent, sort_keys=bool(sort_keys), ensure_ascii=bool(ensure_ascii))


def _json_loads(text: str) -> Any:
    return _json.loads(text)


def _proxy(module: Any, names: tuple[str, ...], **overrides: Any) -> SimpleNamespace:
    return SimpleNamespace(**{name: getattr(module, name) for name in names}, **overrides)


# math: no factorial/comb/perm/prod/lcm, whose big-integer work runs in C for as long as it likes.
_MATH = ("pi", "e", "tau", "inf", "nan", "sqrt", "floor", "ceil", "trunc", "fabs", "exp", "log", "log2",
         "log10", "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "hypot", "degrees", "radians",
         "isclose", "isfinite", "isinf", "isnan", "fsum", "gcd", "isqrt", "copysign", "fmod", "modf", "dist")  # fmt: skip
_STATISTICS = ("mean", "fmean", "median", "median_low", "median_high", "mode", "multimode", "stdev", "pstdev",
               "variance", "pvariance", "quantiles", "StatisticsError")  # fmt: skip
_DATETIME = ("datetime", "date", "time", "timedelta", "timezone")

#: Module name -> its proxy, for the modules that need nothing of the execution (the others, and
#: ``re`` on RE2 rather than Python's backtracking engine, are in ``offered/``).
SAFE_MODULES: dict[str, SimpleNamespace] = {
    "math": _proxy(_math, _MATH),
    "statistics": _proxy(_statistics, _STATISTICS),
    "datetime": _proxy(_datetime, _DATETIME),
    "json": SimpleNamespace(dumps=_json_dumps, loads=_json_loads, JSONDecodeError=_json.JSONDecodeError),
}


class ToolError(Exception):
    """A tool call made by sandboxed code failed (the message says why)."""


#: Exception classes code may raise and name in ``except`` (all subclasses of Exception, so a
#: limit, which is not, can never be caught).
ALLOWED_EXCEPTIONS: dict[str, type[Exception]] = {
    name: getattr(builtins, name)
    for name in (
        "Exception",
        "ValueError",
        "KeyError",
        "TypeError",
        "IndexError",
        "LookupError",
        "ZeroDivisionError",
        "ArithmeticError",
        "RuntimeError",
        "AssertionError",
    )  # fmt: skip
} | {"ToolError": ToolError}


def _too_big(what: str) -> ValueError:
    return ValueError(f"{what} is too large for the sandbox")


def binop(op: str, a: Any, b: Any) -> Any:
    """``a <op> b`` for ``+ * ** << %``, refusing results past the sandbox's size limits.

    Raises:
        ValueError: the result would be too large.
    """
    if op == "add":
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES) and len(a) + len(b) > MAX_SEQUENCE:
            raise _too_big(f"a {type(a).__name__} of {len(a) + len(b)} items")
        return a + b
    if op == "mul":
        if isinstance(a, int) and isinstance(b, int):
            if a.bit_length() + b.bit_length() > MAX_INT_BITS:
                raise _too_big("an integer product")
        elif isinstance(a, _SEQUENCES) and isinstance(b, int) and len(a) * b > MAX_SEQUENCE:
            raise _too_big(f"a {type(a).__name__} repeated {b} times")
        elif isinstance(b, _SEQUENCES) and isinstance(a, int) and len(b) * a > MAX_SEQUENCE:
            raise _too_big(f"a {type(b).__name__} repeated {a} times")
        return a * b
    if op == "pow":
        if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > MAX_INT_BITS:
            raise _too_big(f"{a} ** {b}")
        return a**b
    if op == "lshift":
        if isinstance(a, int) and isinstance(b, int) and a and a.bit_length() + b > MAX_INT_BITS:
            raise _too_big(f"{a} << {b}")
        return a << b
    if op == "mod":
        if isinstance(a, (str, bytes)):
            _check_percent_format(a if isinstance(a, str) else a.decode("latin-1"))
        return a % b
    raise ValueError(f"unknown operator {op!r}")


_WIDTH = re.compile(r"\d+")
_STRFTIME_WIDTH = re.compile(r"%[-_0^#]*(\d*)")
_MAX_WIDTH = 10_000
_DIGITS = "0123456789"
_STRFTIME_FIELD = 64  #: the longest a directive without a width expands to (``%c`` in a long locale)


def _percent_widths(text: str) -> list[str]:
    """The width and precision of every ``%`` conversion, parsed as CPython parses them.

    A mapping key may hold nested parentheses (``%(a(b)c)s`` names the key ``a(b)c``), which a
    regular expression misreads.
    """
    parts: list[str] = []
    i, n = 0, len(text)
    while (i := text.find("%", i)) >= 0:
        i += 1
        if i < n and text[i] == "(":
            depth, i = 1, i + 1
            while i < n and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
        while i < n and text[i] in "#0- +":
            i += 1
        for part in ("width", "precision"):
            if i < n and text[i] == "*":
                parts.append("*")
                i += 1
            else:
                start = i
                while i < n and text[i] in _DIGITS:
                    i += 1
                parts.append(text[start:i])
            if part == "width" and i < n and text[i] == ".":
                i += 1
            else:
                break
        i += 1  # the conversion character (or the second '%' of '%%')
    return parts


def _check_percent_format(text: str) -> None:
    total = len(text)
    for part in _percent_widths(text):
        if part == "*":
            raise ValueError("'*' widths in % formatting are not allowed in the sandbox")
        if part and int(part) > _MAX_WIDTH:
            raise _too_big(f"a % format width of {part}")
        total += int(part or 0)
    if total > MAX_SEQUENCE:
        raise _too_big(f"a % format whose widths add up to {total} characters")


def _check_strftime(fmt: str) -> None:
    total = len(fmt)
    for number in _STRFTIME_WIDTH.findall(fmt):
        if number and int(number) > _MAX_WIDTH:
            raise _too_big(f"a strftime width of {number}")
        total += int(number) if number else _STRFTIME_FIELD
    if total > MAX_SEQUENCE:
        raise _too_big(f"a strftime format that expands to about {total} characters")


def format_value(value: Any, spec: str, conversion: int) -> str:
    """An f-string field (``{value!conversion:spec}``) with a bounded width and precision.

    Raises:
        ValueError: a width or precision above the limit.
    """
    if conversion == ord("r"):
        value = repr(value)
    elif conversion == ord("s"):
        value = str(value)
    elif conversion == ord("a"):
        value = ascii(value)
    for number in _WIDTH.findall(spec):
        if int(number) > _MAX_WIDTH:
            raise _too_big(f"a format width of {number}")
    return format(value, spec)


def call_method(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.name(*args, **kwargs)`` for a name in :data:`SIZED_METHODS`, refusing oversized results.

    Raises:
        ValueError: the result would be too large.
    """
    unbound = isinstance(obj, type) and bool(args)  # str.join(sep, items)
    target = args[0] if unbound else obj
    rest = list(args[1:] if unbound else args)
    size = 0
    if isinstance(target, (str, bytes)) and rest:
        if name == "join":
            rest[0] = items = list(rest[0])
            size = sum(len(x) for x in items if isinstance(x, (str, bytes))) + len(target) * max(0, len(items) - 1)
        elif name == "replace" and len(rest) >= 2 and all(isinstance(x, (str, bytes)) for x in rest[:2]):
            count = target.count(rest[0])
            limit = rest[2] if len(rest) > 2 else kwargs.get("count", -1)
            count = min(count, limit) if isinstance(limit, int) and limit >= 0 else count
            size = len(target) + count * max(0, len(rest[1]) - len(rest[0]))
        elif name == "translate":
            table = rest[0]
            values = table.values() if isinstance(table, dict) else table if isinstance(table, (list, tuple)) else ()
            longest = max((len(v) for v in values if isinstance(v, (str, bytes))), default=1)
            size = len(target) * max(1, longest)
    elif isinstance(target, list) and name == "extend" and rest and isinstance(rest[0], Sized):
        size = len(target) + len(rest[0])
    if name == "strftime" and rest and isinstance(rest[0], str):
        _check_strftime(rest[0])
    if size > MAX_SEQUENCE:
        raise _too_big(f"the result of .{name}() ({size} items)")
    return getattr(obj, name)(*([target] if unbound else []), *rest, **kwargs)


def _safe_range(*args: int) -> range:
    r = range(*args)
    try:
        size = len(r)
    except OverflowError:
        size = MAX_SEQUENCE + 1
    if size > MAX_SEQUENCE:
        raise _too_big(f"a range of {r.stop - r.start if r.step == 1 else 'that many'} numbers")
    return r


def _safe_sum(iterable: Any, start: int | float = 0) -> Any:
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise TypeError("sum() in the sandbox adds numbers only; use ''.join(...) or a loop")
    return builtins.sum(iterable, start)


class _Importer:
    """The ``__import__`` of sandboxed code: proxies of the execution's modules only."""

    __slots__ = ("_modules",)

    def __init__(self, modules: Mapping[str, Any]) -> None:
        self._modules = modules

    def __call__(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:  # noqa: A002
        if level != 0 or name not in self._modules:
            raise ImportError(f"import of {name!r} is not allowed; available: {', '.join(sorted(self._modules))}")
        return self._modules[name]

    def __repr__(self) -> str:
        return "<built-in function __import__>"


_PLAIN_BUILTINS = ("len", "min", "max", "sorted", "reversed", "enumerate", "zip", "map", "filter", "any", "all",
                   "abs", "round", "divmod", "int", "float", "str", "bool", "list", "dict", "set", "frozenset",
                   "tuple", "isinstance", "repr", "chr", "ord")  # fmt: skip


def safe_builtins(print_fn: Callable[..., None], modules: Mapping[str, Any] = SAFE_MODULES) -> dict[str, Any]:
    """The ``__builtins__`` of one execution.

    Args:
        print_fn: the captured ``print``.
        modules: what ``import`` finds (module name -> proxy).
    """
    table: dict[str, Any] = {name: getattr(builtins, name) for name in _PLAIN_BUILTINS}
    table.update(ALLOWED_EXCEPTIONS)
    table.update(range=_safe_range, sum=_safe_sum, print=print_fn, __import__=_Importer(modules))
    return table
