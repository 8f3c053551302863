"""Host-side rewriting of test code so comparisons cannot be fooled by candidate objects:
every comparison becomes a call to the harness's ``__sh_cmp__`` and every ``assert`` one to
``__sh_assert__`` / ``__sh_assert_cmp__`` (docs/sandbox.md, "Comparisons that cannot be
fooled", says what is and is not covered)."""

from __future__ import annotations

import ast
import functools
from typing import Any

from selfheal._parse import ast_parse


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


class _Rewriter(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        operands = [node.left, *node.comparators]
        parts: list[ast.expr] = [
            _call("__sh_cmp__", ast.Constant(type(op).__name__), operands[i], operands[i + 1])
            for i, op in enumerate(node.ops)
        ]
        if len(parts) == 1:
            return parts[0]
        # a chain: every operand is evaluated once per pair it appears in (no side effects
        # are expected in test comparisons); short-circuits like Python does
        return ast.BoolOp(op=ast.And(), values=parts)

    def visit_Assert(self, node: ast.Assert) -> Any:
        src = ast.unparse(node.test)
        msg = self.visit(node.msg) if node.msg is not None else ast.Constant(None)
        test = node.test
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            # assert a and b  ->  assert a; assert b
            return [self.visit_Assert(ast.Assert(test=v, msg=node.msg)) for v in test.values]
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left = self.visit(test.left)
            right = self.visit(test.comparators[0])
            call = _call(
                "__sh_assert_cmp__",
                ast.Constant(type(test.ops[0]).__name__),
                left,
                right,
                ast.Constant(src),
                msg,
            )
        else:
            value = self.visit(test)
            call = _call("__sh_assert__", value, ast.Constant(src), msg)
        return ast.Expr(value=call)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.UnaryOp(op=ast.Not(), operand=_call("__sh_truth__", node.operand))
        return node


HELPERS = ("__sh_cmp__", "__sh_assert__", "__sh_assert_cmp__", "__sh_truth__", "__sh_pytest__")
"""Names of the harness helpers, in the order the test function takes them."""


@functools.lru_cache(maxsize=4096)
def rewrite_test(code: str) -> tuple[str, bool]:
    """Return ``(code, wrapped)``: ``code`` with comparisons and asserts routed through
    the harness helpers, wrapped (when possible) in ``def __sh_test__(<helpers>): ...`` so
    the helpers are the test's locals, which a candidate cannot swap by editing globals.

    Raises ``SyntaxError`` if ``code`` does not compile (the caller sends it unchanged so
    the harness reports the error). Cached: an agent re-runs the same tests on every
    candidate."""
    compile(code, "<test>", "exec", dont_inherit=True)
    tree = _Rewriter().visit(ast_parse(code))
    body = tree.body or [ast.Pass()]
    (func,) = ast_parse(f"def __sh_test__({', '.join(HELPERS)}): pass").body
    assert isinstance(func, ast.FunctionDef)
    func.body = body
    wrapped = ast.unparse(func)
    try:
        compile(wrapped, "<test>", "exec", dont_inherit=True)
    except SyntaxError:  # e.g. ``from m import *`` is only legal at module level
        return ast.unparse(ast.Module(body=body, type_ignores=[])), False
    return wrapped, True


def split_snippet(code: str) -> tuple[str, str | None]:
    """Split a snippet into (statements, last expression or None), like a notebook cell."""
    tree = ast_parse(code)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        return ast.unparse(tree), ast.unparse(last)
    return code, None


def pytest_item_test(module: str, cls: str | None, func: str, k: int) -> str:
    """The test code for one item pytest collected from ``module``: the module's statements,
    then the item run by the harness (``_harness/pytest_item.py``) with parameter set ``k``."""
    return f"{module}\n__sh_pytest__('run', dict(locals()), {cls!r}, {func!r}, {int(k)})\n"
