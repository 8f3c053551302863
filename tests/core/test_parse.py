"""Parsing text into an AST goes through selfheal._parse, one thread at a time.

CPython 3.11 keeps the AST constructor's recursion depth per interpreter: two threads parsing
at once can raise ``SystemError: AST constructor recursion depth mismatch`` (seen in
tests/scale/test_heal_many.py, where one of three parallel heals ended in that error)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import selfheal
from selfheal._parse import ast_parse, literal

PACKAGE = Path(selfheal.__file__).parent
NODE_ARGUMENTS = {"probes.py": 1, "roles/debugger.py": 1, "failcall.py": 1, "testchecks.py": 1}
"""Modules that call ``ast.literal_eval`` on an AST node (no parse): how many times."""


def _calls(tree: ast.AST, name: str) -> int:
    return sum(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == name
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "ast"
        for n in ast.walk(tree)
    )


def test_the_package_parses_text_only_through_the_lock() -> None:
    raw: dict[str, tuple[int, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "_parse.py" or rel.startswith("kernel_sandbox/_harness/"):
            continue  # the harness runs in the sandbox kernel, one thread
        tree = ast.parse(path.read_text())
        parses, literals = _calls(tree, "parse"), _calls(tree, "literal_eval")
        if parses or literals != NODE_ARGUMENTS.get(rel, 0):
            raw[rel] = (parses, literals)
    assert raw == {}, (
        "call selfheal._parse.ast_parse / literal instead of ast.parse / ast.literal_eval "
        f"on text: (ast.parse, ast.literal_eval) calls per module: {raw}"
    )


def test_the_locked_forms_parse_as_ast_does() -> None:
    assert ast.dump(ast_parse("x = [1, 2]")) == ast.dump(ast.parse("x = [1, 2]"))
    assert isinstance(ast_parse("f(1)", mode="eval"), ast.Expression)
    assert literal("  {'a': (1, 2.5), 'b': None}") == {"a": (1, 2.5), "b": None}
    with pytest.raises(SyntaxError):
        ast_parse("def (")
    with pytest.raises(ValueError):
        literal("f(1)")
