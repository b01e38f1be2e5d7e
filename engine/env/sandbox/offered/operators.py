"""``operator`` for sandboxed code: the size-checked arithmetic, and attribute names checked by the guard's rule.

``operator.mul("a", 10**10)`` would skip the checks that ``"a" * 10**10`` goes through, so the
operators that can build a huge value call :func:`~engine.env.sandbox.namespace.binop`.
``attrgetter`` and ``methodcaller`` take attribute names as strings, out of the guard's sight:
each name is checked here, by :func:`~engine.env.sandbox.attributes.attribute_refusal`, so
``attrgetter("__class__")`` or ``methodcaller("format", ...)`` is refused like ``x.__class__``.
"""

from __future__ import annotations

import operator as _operator
from types import SimpleNamespace
from typing import Any

from engine.env.sandbox.attributes import attribute_refusal
from engine.env.sandbox.namespace import binop

__all__ = ["OPERATOR", "operator_proxy"]

#: Taken from ``operator`` as they are: none builds a value larger than its operands.
_PLAIN = ("sub", "truediv", "floordiv", "neg", "pos", "abs", "rshift", "and_", "or_", "xor", "invert", "inv",
          "not_", "truth", "eq", "ne", "lt", "le", "gt", "ge", "is_", "is_not", "contains", "countOf", "indexOf",
          "getitem", "setitem", "delitem", "itemgetter", "index", "length_hint")  # fmt: skip
_SIZED = {"add": "add", "concat": "add", "mul": "mul", "pow": "pow", "lshift": "lshift", "mod": "mod"}
#: Every name the ``operator`` proxy holds.
OPERATOR = (*_PLAIN, *_SIZED, "attrgetter", "methodcaller")


def _checked(name: str) -> str:
    for part in name.split(".") if isinstance(name, str) else (name,):
        problem = attribute_refusal(part)
        if problem is not None:
            raise ValueError(problem)
    return name


def _attrgetter(attr: str, *attrs: str) -> Any:
    return _operator.attrgetter(*(_checked(a) for a in (attr, *attrs)))


def _methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Any:
    if isinstance(name, str) and "." in name:
        raise ValueError(f"methodcaller takes a method name, not a path: {name!r}")
    return _operator.methodcaller(_checked(name), *args, **kwargs)


def _sized(op: str) -> Any:
    def apply(a: Any, b: Any) -> Any:
        return binop(op, a, b)

    return apply


def operator_proxy() -> SimpleNamespace:
    """The ``operator`` module as sandboxed code sees it."""
    functions: dict[str, Any] = {name: getattr(_operator, name) for name in _PLAIN}
    for name, op in _SIZED.items():
        functions[name] = _sized(op)
        functions[name].__name__ = functions[name].__qualname__ = name
    return SimpleNamespace(**functions, attrgetter=_attrgetter, methodcaller=_methodcaller)
