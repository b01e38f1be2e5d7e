"""The AST guard: generated code is parsed, checked against an allow-list, then instrumented.

The guard is an allow-list of syntax, not a deny-list: a node type missing from ``_ALLOWED_NODES``
is refused (classes, ``with``, ``global``/``nonlocal``, ``async``/``await``, ``yield``, ``match``,
``except*``). On top of that it refuses

- every name, attribute, argument, keyword or import alias starting with ``_`` (dunders and
  private members: ``().__class__``, ``re._compile``, ``x._secret``), but for the throwaway
  variable ``_`` itself (``for _ in range(3)``), an ordinary name;
- introspection builtins (``getattr``, ``type``, ``vars``, ``eval``, ``open``, ...) by name;
- attributes that lead to frames, code objects or formatting with attribute access, even without
  underscores (``tb_frame``, ``gi_frame``, ``f_globals``, ``co_code``, ``func_globals``, ``mro``,
  ``format``, ``format_map``, ``obj``) and padding methods that allocate at will (``ljust``, ``zfill``);
- attribute assignment and deletion, decorators, bare ``except`` and ``except`` of a class that
  is not a plain exception, imports outside the allow-list, star and relative imports;
- literal resource bombs (``'a' * 10**10``, ``2 ** 10**10``);
- rebinding what the sandbox provides (``results``, ``ctx``, ``variables``, tool names), also
  through ``import ... as`` and ``from ... import ... as``.

Checked code is then instrumented (``instrument.py``) and compiled. Whatever ``compile`` itself
refuses (``return`` or ``break`` outside their place, ``def f(a, a)``, a walrus in a
comprehension's iterable) is a refusal too: every problem with the code is a
:class:`CodeRejectedError`, which the router feeds back to the LLM.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping
from types import CodeType

from engine.env.sandbox.attributes import FORBIDDEN_ATTRIBUTE_PREFIXES, FORBIDDEN_ATTRIBUTES, SIZED_METHODS
from engine.env.sandbox.errors import CodeRejectedError
from engine.env.sandbox.instrument import instrument
from engine.env.sandbox.namespace import ALLOWED_EXCEPTIONS, MAX_SEQUENCE
from engine.env.sandbox.offered import MODULE_MEMBERS
from engine.env.sandbox.runtime import FILENAME

__all__ = [
    "FILENAME",
    "FORBIDDEN_ATTRIBUTES",
    "FORBIDDEN_ATTRIBUTE_PREFIXES",
    "FORBIDDEN_NAMES",
    "MAX_CODE_CHARS",
    "check_code",
    "compile_guarded",
]

MAX_CODE_CHARS = 20_000

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.While, ast.If, ast.Break,
    ast.Continue, ast.Pass, ast.Raise, ast.Try, ast.ExceptHandler, ast.Assert, ast.Delete, ast.FunctionDef,
    ast.Return, ast.Import, ast.ImportFrom, ast.alias, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Lambda,
    ast.IfExp, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension,
    ast.Compare, ast.Call, ast.keyword, ast.FormattedValue, ast.JoinedStr, ast.Constant, ast.Attribute,
    ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice, ast.NamedExpr, ast.arguments,
    ast.arg, ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip
_REFUSED_HINTS = {
    ast.ClassDef: "class definitions", ast.With: "'with' blocks", ast.AsyncWith: "'async with' blocks",
    ast.Global: "'global'", ast.Nonlocal: "'nonlocal'", ast.AsyncFunctionDef: "async functions",
    ast.AsyncFor: "'async for'", ast.Await: "'await' (tool calls are plain calls)", ast.Yield: "generators ('yield')",
    ast.YieldFrom: "generators ('yield from')", ast.Match: "'match' statements", ast.TryStar: "'except*'",
}  # fmt: skip
#: Builtins that reach interpreter internals or the outside world.
FORBIDDEN_NAMES = frozenset({
    "getattr", "setattr", "delattr", "hasattr", "type", "dir", "vars", "eval", "exec", "open", "compile",
    "globals", "locals", "input", "breakpoint", "help", "memoryview", "super", "object", "classmethod",
    "staticmethod", "property", "exit", "quit", "id", "iter", "next", "aiter", "anext", "issubclass",
    "bytearray", "callable", "BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit",
})  # fmt: skip
_POW_EXPONENT_LIMIT = 10_000


def check_code(code: str, *, reserved: Iterable[str] = (), modules: Mapping[str, Collection[str]] = MODULE_MEMBERS) -> ast.Module:
    """Parse ``code`` and refuse anything outside the sandbox's language.

    Args:
        code: the generated Python source.
        reserved: names the code may read but not rebind (``results``, ``ctx``, tool names).
        modules: what code may import: module name -> its names (the sandbox's modules; another
            set measures the guard as it was, see ``benchmarks/codegen_guard.py``).

    Returns:
        The parsed module (not yet instrumented).

    Raises:
        CodeRejectedError: a syntax error or refused constructs, each named with its line.
    """
    if len(code) > MAX_CODE_CHARS:
        raise CodeRejectedError([f"line 1: code is longer than {MAX_CODE_CHARS} characters"])
    try:
        with _compiler_warnings_ignored():
            tree = ast.parse(code, filename=FILENAME, mode="exec")
    except SyntaxError as error:
        raise CodeRejectedError([f"line {error.lineno or 1}: syntax error: {error.msg}"]) from None
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        raise CodeRejectedError([f"line 1: unparsable code: {type(error).__name__}"]) from None
    problems = _Checker(frozenset(reserved), modules).run(tree)
    if problems:
        raise CodeRejectedError(problems)
    return tree


def compile_guarded(code: str, *, reserved: Iterable[str] = ()) -> CodeType:
    """Check, instrument and compile ``code`` for the executor (the same code and names compile once).

    Raises:
        CodeRejectedError: see :func:`check_code`; also what the compiler refuses, with its line.
    """
    return _compile(code, frozenset(reserved))


@contextlib.contextmanager
def _compiler_warnings_ignored() -> Iterator[None]:
    # What the compiler warns about generated code (an invalid escape sequence such as "\d", ``is``
    # with a literal) is for no one to read, and under an ``error`` warning filter it would turn into
    # a SyntaxError: the code is valid Python and runs as such.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.filterwarnings("ignore", r"invalid (octal )?escape sequence", DeprecationWarning)  # Python 3.11
        yield


@functools.lru_cache(maxsize=256)
def _compile(code: str, reserved: frozenset[str]) -> CodeType:
    # Code objects are immutable: a cached one is safe to run again (template-cache hits repeat code).
    tree = instrument(check_code(code, reserved=reserved))
    try:
        with _compiler_warnings_ignored():
            return compile(tree, FILENAME, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise CodeRejectedError([f"line {error.lineno or 1}: syntax error: {error.msg}"]) from None
    except (ValueError, RecursionError, MemoryError) as error:  # absurd nesting
        raise CodeRejectedError([f"line 1: uncompilable code: {type(error).__name__}"]) from None


class _Checker(ast.NodeVisitor):
    def __init__(self, reserved: frozenset[str], modules: Mapping[str, Collection[str]]) -> None:
        self.reserved = reserved
        self.modules = modules
        self.problems: list[str] = []
        self.called: set[int] = set()  # ids of Attribute nodes that are called right away

    def run(self, tree: ast.AST) -> list[str]:
        self.visit(tree)
        return list(dict.fromkeys(self.problems))  # one line per distinct problem, in order

    def refuse(self, node: ast.AST, what: str) -> None:
        self.problems.append(f"line {getattr(node, 'lineno', 1)}: {what}")

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, _ALLOWED_NODES):
            hint = next((text for kind, text in _REFUSED_HINTS.items() if isinstance(node, kind)), None)
            self.refuse(node, f"{hint or type(node).__name__ + ' nodes'} are not allowed")
            return
        super().generic_visit(node)

    def _identifier(self, node: ast.AST, name: str, what: str) -> None:
        if name.startswith("_") and not (name == "_" and isinstance(node, (ast.Name, ast.arg))):
            self.refuse(node, f"{what} {name!r} is not allowed (names starting with '_' are private)")
        elif name in FORBIDDEN_NAMES:
            self.refuse(node, f"{what} {name!r} is not allowed in the sandbox")

    def visit_Name(self, node: ast.Name) -> None:
        self._identifier(node, node.id, "name")
        if not isinstance(node.ctx, ast.Load) and node.id in self.reserved:
            self.refuse(node, f"{node.id!r} is provided by the sandbox and cannot be rebound or deleted")

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute):
            self.called.add(id(node.func))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in SIZED_METHODS and id(node) not in self.called:
            self.refuse(node, f"'.{attr}' must be called directly, as in x.{attr}(...)")
        if attr.startswith("_"):
            self.refuse(node, f"attribute {attr!r} is not allowed (names starting with '_' are private)")
        elif attr in FORBIDDEN_ATTRIBUTES or attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
            self.refuse(node, f"attribute {attr!r} is not allowed in the sandbox")
        if not isinstance(node.ctx, ast.Load):
            self.refuse(node, "assigning or deleting attributes is not allowed")
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._identifier(node, node.arg, "argument")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None and node.arg.startswith("_"):
            self.refuse(node, f"keyword {node.arg!r} is not allowed (names starting with '_' are private)")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._identifier(node, node.name, "function name")
        if node.name in self.reserved:
            self.refuse(node, f"{node.name!r} is provided by the sandbox and cannot be redefined")
        if node.decorator_list:
            self.refuse(node, "decorators are not allowed")
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is None:
            self.refuse(node, "a bare 'except:' is not allowed; name the exception (e.g. 'except Exception:')")
        else:
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            for item in names:
                if not (isinstance(item, ast.Name) and item.id in ALLOWED_EXCEPTIONS):
                    self.refuse(node, f"'except' may only name {', '.join(ALLOWED_EXCEPTIONS)}")
                    break
        if node.name is not None:
            self._identifier(node, node.name, "exception name")
            if node.name in self.reserved:
                self.refuse(node, f"{node.name!r} is provided by the sandbox and cannot be rebound")
        self.generic_visit(node)

    def _binding(self, node: ast.AST, name: str) -> None:
        if name in self.reserved:
            self.refuse(node, f"{name!r} is provided by the sandbox and cannot be rebound by an import")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            if alias.asname:
                self._identifier(node, alias.asname, "import alias")
            self._binding(node, alias.asname or alias.name.partition(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.refuse(node, "relative imports are not allowed")
            return
        self._module(node, node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.refuse(node, "'import *' is not allowed")
            elif node.module is not None and node.module in self.modules and alias.name not in self.modules[node.module]:
                self.refuse(node, f"{node.module}.{alias.name} is not available in the sandbox")
            self._identifier(node, alias.asname or alias.name, "imported name")
            self._binding(node, alias.asname or alias.name)

    def _module(self, node: ast.AST, name: str) -> None:
        if name not in self.modules:
            self.refuse(node, f"import of {name!r} is not allowed; available: {', '.join(sorted(self.modules))}")

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if not isinstance(target, (ast.Name, ast.Subscript)):
                self.refuse(node, "'del' may only remove variables and items")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Pow):
            exponent = _const_int(node.right)
            if exponent is not None and exponent > _POW_EXPONENT_LIMIT and _const_int(node.left) not in (0, 1, -1):
                self.refuse(node, f"'**' with an exponent above {_POW_EXPONENT_LIMIT} is not allowed")
        elif isinstance(node.op, ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                count = _const_int(side)
                if count is not None and count > MAX_SEQUENCE and _is_sequence_literal(other):
                    self.refuse(node, f"repeating a sequence {count} times is not allowed (limit {MAX_SEQUENCE})")
        self.generic_visit(node)


def _is_sequence_literal(node: ast.AST) -> bool:
    return isinstance(node, (ast.List, ast.Tuple, ast.JoinedStr)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
    )


def _const_int(node: ast.AST, depth: int = 0) -> int | None:
    """The value of a small constant integer expression, or None when it is not one.

    Powers are evaluated only while they stay small, so ``10**10**10`` never runs here.
    """
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _const_int(node.operand, depth + 1)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.Mult, ast.Add)):
        left, right = _const_int(node.left, depth + 1), _const_int(node.right, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow):
            if right < 0 or (abs(left) > 1 and left.bit_length() * right > 4096):
                return 1 << 4096 if right >= 0 else None  # "huge": larger than any limit
            return int(left**right)
        if isinstance(node.op, ast.Mult):
            return left * right if left.bit_length() + right.bit_length() <= 4096 else 1 << 4096
        return left + right
    return None
