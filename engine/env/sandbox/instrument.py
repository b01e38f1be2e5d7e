"""Instrumentation of checked code: step ticks and size-checked operators.

Runs after the guard, so user code can never name the helpers it inserts (their names start with
``_``). Every loop body, comprehension, function and lambda calls ``_sandbox_tick()``, which
enforces the step, time and memory limits: ``sys.settrace`` would not do, since on Python 3.11
``while True: pass`` emits no line event at all. ``+ * ** << %``, f-string format specs and calls
of methods that can build a huge result in one C call (``join``, ``replace``, ``translate``,
``extend``, ``strftime``) go through size-checked helpers.
"""

from __future__ import annotations

import ast

from engine.env.sandbox.namespace import SIZED_METHODS

__all__ = ["BINOP", "FORMAT", "METHOD", "TICK", "instrument"]

TICK, BINOP, FORMAT, METHOD = "_sandbox_tick", "_sandbox_binop", "_sandbox_format", "_sandbox_method"


def instrument(tree: ast.Module) -> ast.Module:
    """Insert ticks and size checks into a module the guard accepted (modified in place)."""
    return ast.fix_missing_locations(_Instrument().visit(tree))


_OPS = {ast.Add: "add", ast.Mult: "mul", ast.Pow: "pow", ast.LShift: "lshift", ast.Mod: "mod"}


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _tick() -> ast.Expr:
    return ast.Expr(value=_call(TICK))


def _as_load(target: ast.expr) -> ast.expr:
    copy = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(copy, target)


class _Instrument(ast.NodeTransformer):
    def visit_While(self, node: ast.While) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(_tick(), node))
        return node

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(_tick(), node))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(_tick(), node))
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        node.body = ast.BoolOp(op=ast.And(), values=[_call(TICK), node.body])
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        node.ifs.insert(0, _call(TICK))
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        op = _OPS.get(type(node.op))
        if op is None:
            return node
        return ast.copy_location(_call(BINOP, ast.Constant(op), node.left, node.right), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        op = _OPS.get(type(node.op))
        if op is None:
            return node
        # x[i] op= v becomes x[i] = binop(op, x[i], v): the target expression is evaluated twice.
        value = _call(BINOP, ast.Constant(op), _as_load(node.target), node.value)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in SIZED_METHODS):
            return node
        call = ast.Call(func=ast.Name(id=METHOD, ctx=ast.Load()), args=[func.value, ast.Constant(func.attr), *node.args],
                        keywords=node.keywords)  # fmt: skip
        return ast.copy_location(call, node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        self.generic_visit(node)
        if node.format_spec is None:
            return node
        formatted = _call(FORMAT, node.value, node.format_spec, ast.Constant(node.conversion))
        return ast.copy_location(ast.FormattedValue(value=formatted, conversion=-1, format_spec=None), node)
