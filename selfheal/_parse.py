"""Python source parsed into an AST, one thread at a time: CPython 3.11's AST constructor is not
safe on two threads at once (python/cpython#106905), so every parse of a string goes through
:func:`ast_parse` or :func:`literal` (tests/core/test_parse.py checks it)."""

from __future__ import annotations

import ast
import threading
from typing import Any, Literal, overload

_LOCK = threading.Lock()


@overload
def ast_parse(source: str, mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def ast_parse(source: str, mode: Literal["eval"]) -> ast.Expression: ...
def ast_parse(source: str, mode: Literal["exec", "eval"] = "exec") -> ast.Module | ast.Expression:
    """``ast.parse(source, mode=mode)``, under the one lock."""
    with _LOCK:
        return ast.parse(source, mode=mode)  # type: ignore[return-value]


@overload
def parse_or_none(source: str, mode: Literal["exec"] = "exec") -> ast.Module | None: ...
@overload
def parse_or_none(source: str, mode: Literal["eval"]) -> ast.Expression | None: ...
def parse_or_none(
    source: str, mode: Literal["exec", "eval"] = "exec"
) -> ast.Module | ast.Expression | None:
    """:func:`ast_parse`, or None where ``source`` does not parse (or is too deep or large)."""
    try:
        return ast_parse(source, mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def normalized(code: str) -> str:
    """The code's AST dump (comments and formatting ignored), or the stripped text."""
    tree = parse_or_none(code)
    return ast.dump(tree) if tree else code.strip()


def literal(source: str) -> Any:
    """``ast.literal_eval(source)`` for text: parsed under the lock, evaluated outside it."""
    return ast.literal_eval(ast_parse(source.lstrip(" \t"), mode="eval"))
