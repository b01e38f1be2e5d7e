"""``re`` for sandboxed code, on RE2: a search takes time linear in the text, whatever the pattern.

Patterns compile with :func:`engine.linear_regex.compile_untrusted` (RE2 syntax: no backreferences
or lookaround; such a pattern raises ``re.error``, a ValueError whose message says why). Compiled
patterns and matches are wrapped: code sees ``pattern``, ``groups``, ``search``, ``group``, ``span``
and their like, never the RE2 objects or their options. ``sub``, ``subn`` and ``expand`` check the
size of what they build, so a replacement cannot multiply the text past the sandbox's limit; a
callable replacement receives a wrapped match. Every match that ``finditer``, ``findall``,
``split``, ``sub`` and ``subn`` visit is a step: the binding's per-match cost (some 25
microseconds on a str) makes a text of many matches a long run, which the step and time limits
stop. Flags ``I``, ``M``, ``S`` and ``A`` are offered (as RE2 inline flags; RE2's ``\\w``,
``\\d``, ``\\b`` are ASCII anyway); ``X`` (verbose) is not.
"""

from __future__ import annotations

import re as _re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

from engine.env.sandbox.namespace import MAX_SEQUENCE
from engine.env.sandbox.offered.iteration import Tick
from engine.linear_regex import UnsupportedPatternError, compile_untrusted

__all__ = ["RE", "Match", "Pattern", "re_proxy"]

_FLAGS = {"IGNORECASE": 2, "MULTILINE": 8, "DOTALL": 16, "ASCII": 256}
_SHORT = {"I": "IGNORECASE", "M": "MULTILINE", "S": "DOTALL", "A": "ASCII"}
_INLINE = {2: "i", 8: "m", 16: "s"}
_KNOWN = sum(_FLAGS.values())
_GROUP_REFERENCE = _re.compile(r"\\(?:\d|g<)")  # a reference in a replacement template; ours, not the code's
#: Every name the ``re`` proxy holds.
RE = ("compile", "search", "match", "fullmatch", "findall", "finditer", "split", "sub", "subn", "escape", "error",
      *_FLAGS, *_SHORT)  # fmt: skip


def _compile(pattern: Any, flags: int, tick: Tick) -> Pattern:
    if isinstance(pattern, Pattern):
        if flags:
            raise ValueError("cannot give flags when the pattern is already compiled")
        return pattern
    if not isinstance(pattern, str):
        raise TypeError("patterns in the sandbox are strings")
    if not isinstance(flags, int) or flags & ~_KNOWN:
        raise ValueError("unsupported regular expression flags (the sandbox offers re.I, re.M, re.S and re.A)")
    inline = "".join(letter for bit, letter in _INLINE.items() if flags & bit)
    return Pattern(compile_untrusted(f"(?{inline}){pattern}" if inline else pattern), pattern, flags, tick)


def _too_big(size: int) -> ValueError:
    return ValueError(f"a replacement result of {size} characters is too large for the sandbox (limit {MAX_SEQUENCE})")


def _expand(raw: Any, template: Any, room: int) -> Any:
    """``raw.expand(template)``, refused when it could come out longer than ``room``."""
    if not isinstance(template, (str, bytes)):
        raise TypeError("a replacement must be a string or a function")
    text = template if isinstance(template, str) else template.decode("latin-1")
    start, end = raw.span()
    bound = len(template) + len(_GROUP_REFERENCE.findall(text)) * (end - start)
    if bound > room:
        raise _too_big(bound)
    return raw.expand(template)


class Pattern:
    """A compiled pattern (what ``re.compile`` returns)."""

    __slots__ = ("_compiled", "_tick", "flags", "pattern")

    def __init__(self, compiled: Any, pattern: str, flags: int, tick: Tick) -> None:
        self._compiled, self.pattern, self.flags, self._tick = compiled, pattern, flags, tick

    def __repr__(self) -> str:
        return f"re.compile({self.pattern[:100]!r})"

    @property
    def groups(self) -> int:
        return int(self._compiled.groups)

    @property
    def groupindex(self) -> dict[str, int]:
        return dict(self._compiled.groupindex)

    def _wrap(self, raw: Any) -> Match | None:
        return None if raw is None else Match(raw, self)

    def _visit(self, raw: Any) -> Match:
        self._tick()
        return Match(raw, self)

    def search(self, string: Any, pos: int | None = None, endpos: int | None = None) -> Match | None:
        return self._wrap(self._compiled.search(string, pos, endpos))

    def match(self, string: Any, pos: int | None = None, endpos: int | None = None) -> Match | None:
        return self._wrap(self._compiled.match(string, pos, endpos))

    def fullmatch(self, string: Any, pos: int | None = None, endpos: int | None = None) -> Match | None:
        return self._wrap(self._compiled.fullmatch(string, pos, endpos))

    def findall(self, string: Any, pos: int | None = None, endpos: int | None = None) -> list[Any]:
        found = []
        groups = self._compiled.groups
        for raw in self._compiled.finditer(string, pos, endpos):
            self._tick()
            found.append(raw.group(groups) if groups <= 1 else raw.groups(string[:0]))
        return found

    def finditer(self, string: Any, pos: int | None = None, endpos: int | None = None) -> Iterator[Match]:
        return map(self._visit, self._compiled.finditer(string, pos, endpos))

    def split(self, string: Any, maxsplit: int = 0) -> list[Any]:
        pieces, last, groups = [], 0, self._compiled.groups
        if maxsplit >= 0:
            for n, raw in enumerate(self._compiled.finditer(string)):
                if maxsplit and n >= maxsplit:
                    break
                self._tick()
                start, end = raw.span()
                pieces.append(string[last:start])
                pieces += [raw.group(g) for g in range(1, groups + 1)]
                last = end
        pieces.append(string[last:])
        return pieces

    def subn(self, repl: Any, string: Any, count: int = 0) -> tuple[Any, int]:
        if not isinstance(string, (str, bytes)):
            raise TypeError("re.sub() needs a string to work on")
        made = [len(string)]  # an upper bound of the result's size so far

        def replace(raw: Any) -> Any:
            self._tick()
            room = MAX_SEQUENCE - made[0]
            piece = repl(Match(raw, self)) if callable(repl) else _expand(raw, repl, room)
            if not isinstance(piece, type(string)):
                raise TypeError(f"a replacement function must return a {type(string).__name__}")
            made[0] += len(piece)
            if made[0] > MAX_SEQUENCE:
                raise _too_big(made[0])
            return piece

        result, n = self._compiled.subn(replace, string, count)
        return result, n

    def sub(self, repl: Any, string: Any, count: int = 0) -> Any:
        return self.subn(repl, string, count)[0]


class Match:
    """One match (what ``search`` returns); ``m[1]`` is ``m.group(1)``."""

    __slots__ = ("_raw", "re")

    def __init__(self, raw: Any, pattern: Pattern) -> None:
        self._raw, self.re = raw, pattern

    def __repr__(self) -> str:
        return f"<re.Match span={self._raw.span()}, match={self._raw.group()[:100]!r}>"

    def __getitem__(self, group: int | str) -> Any:
        return self._raw.group(group)

    def __bool__(self) -> bool:
        return True

    @property
    def string(self) -> Any:
        return self._raw.string

    @property
    def pos(self) -> int:
        return int(self._raw.pos)

    @property
    def endpos(self) -> int:
        return int(self._raw.endpos)

    @property
    def lastindex(self) -> int | None:
        return self._raw.lastindex

    @property
    def lastgroup(self) -> str | None:
        return self._raw.lastgroup

    def group(self, *groups: int | str) -> Any:
        return self._raw.group(*groups)

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        return tuple(self._raw.groups(default))

    def groupdict(self, default: Any = None) -> dict[str, Any]:
        return dict(self._raw.groupdict(default))

    def start(self, group: int | str = 0) -> int:
        return int(self._raw.start(group))

    def end(self, group: int | str = 0) -> int:
        return int(self._raw.end(group))

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return tuple(self._raw.span(group))

    def expand(self, template: Any) -> Any:
        return _expand(self._raw, template, MAX_SEQUENCE)


def _escape(pattern: Any) -> Any:
    if isinstance(pattern, str):
        return _re.escape(pattern)
    if isinstance(pattern, bytes):
        return _re.escape(pattern)
    raise TypeError("re.escape() takes a string")


def _function(method: Callable[..., Any], flagged: int, tick: Tick) -> Callable[..., Any]:
    """``re.<name>(pattern, *args, flags=0)`` as ``compile(pattern, flags).<name>(*args)``."""

    def call(pattern: Any, *args: Any, flags: int = 0, **kwargs: Any) -> Any:
        if len(args) > flagged:  # flags given by position, as in re.search(p, s, re.I)
            args, flags = args[:flagged], args[flagged]
        return method(_compile(pattern, flags, tick), *args, **kwargs)

    call.__name__ = call.__qualname__ = method.__name__
    return call


def re_proxy(tick: Tick) -> SimpleNamespace:
    """The ``re`` module of one execution, each match a tick of ``tick``."""
    functions = {name: _function(getattr(Pattern, name), 1, tick) for name in ("search", "match", "fullmatch",
                                                                                "findall", "finditer")}  # fmt: skip
    functions |= {"split": _function(Pattern.split, 2, tick), "sub": _function(Pattern.sub, 3, tick),
                  "subn": _function(Pattern.subn, 3, tick)}  # fmt: skip
    flags = {**_FLAGS, **{short: _FLAGS[long] for short, long in _SHORT.items()}}
    return SimpleNamespace(compile=lambda pattern, flags=0: _compile(pattern, flags, tick), escape=_escape,
                           error=UnsupportedPatternError, **functions, **flags)  # fmt: skip
