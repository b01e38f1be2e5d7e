"""Regular expressions written outside the project (by an LLM or a user), compiled with RE2.

Python's ``re`` backtracks: ``(a|a)*b`` on 26 characters takes seconds, ``a*a*a*a*a*a*a*b`` on 120
characters minutes, and no filter of "dangerous shapes" catches them all. RE2 never backtracks: a
search takes time linear in the text (times the compiled program's size, which
:data:`MAX_PROGRAM_SIZE` bounds), so a bounded text gives a bounded search. RE2 also releases the
GIL while it searches, so a search in a thread does not stall the event loop beside it.

The price is syntax: RE2 has no backreferences (``\\1``) and no lookaround (``(?=...)``,
``(?<!...)``); such a pattern is refused with :class:`UnsupportedPatternError`, whose message says
why. Patterns the project writes itself stay on ``re``.
"""

from __future__ import annotations

import functools
import re as _re
from typing import TypeAlias

import re2

__all__ = ["MAX_PROGRAM_SIZE", "LinearPattern", "UnsupportedPatternError", "compile_untrusted"]

#: The largest compiled program accepted: a search costs at most about this many steps per character.
#: (``(.{1,100}){1,10}x`` compiles to about 9,000 instructions and takes some 80 ms per 1,000 characters.)
MAX_PROGRAM_SIZE = 4096
#: RE2's memory budget for one pattern (its default is 8 MiB); bigger programs fail to compile.
_MAX_MEM = 1 << 22

LinearPattern: TypeAlias = re2._Regexp  #: a compiled RE2 pattern (``search``, ``match``, ``fullmatch``, ``findall``, ...)

# Only consulted after RE2 refused a pattern, to say why in words.
_BACKREFERENCE = _re.compile(r"(?<!\\)(?:\\\\)*\\(?:[1-9]|g<|k<)|\(\?P=")
_LOOKAROUND = _re.compile(r"\(\?<?[=!]")


class UnsupportedPatternError(ValueError):
    """A pattern that is invalid, or valid for Python's ``re`` but outside RE2's linear-time syntax."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.max_mem = _MAX_MEM
    return options


@functools.lru_cache(maxsize=256)
def compile_untrusted(pattern: str) -> LinearPattern:
    """Compile ``pattern`` with RE2 (linear-time search); results are cached.

    Args:
        pattern: a regular expression in RE2 syntax (Python's ``re`` syntax without backreferences
            or lookaround).

    Returns:
        The compiled pattern.

    Raises:
        UnsupportedPatternError: the pattern is invalid, uses a feature RE2 lacks, or compiles to a
            program larger than :data:`MAX_PROGRAM_SIZE`. The message says which, for the model or
            user to fix the pattern.
    """
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise UnsupportedPatternError(_explain(pattern, str(reason))) from None
    except (TypeError, ValueError) as error:  # e.g. a lone surrogate that cannot become UTF-8
        raise UnsupportedPatternError(f"invalid regular expression: {error}") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise UnsupportedPatternError(
            f"the pattern is too large ({compiled.programsize} instructions, at most {MAX_PROGRAM_SIZE}); "
            "use fewer or smaller counted repetitions such as {1,100}"
        )
    return compiled


def _explain(pattern: str, reason: str) -> str:
    if _BACKREFERENCE.search(pattern):
        return "backreferences (\\1, (?P=name)) are not supported (RE2 syntax); match the repeated text itself"
    if _LOOKAROUND.search(pattern):
        return "lookahead and lookbehind ((?=...), (?!...), (?<=...), (?<!...)) are not supported (RE2 syntax)"
    if "too large" in reason or "too big" in reason:
        return f"the pattern is too large ({reason}); use fewer or smaller counted repetitions such as {{1,100}}"
    return f"invalid regular expression: {reason}"
