"""What a candidate's source defines, read from its AST: its entry point, a formatting-blind
form for comparing versions, and the spec prelude's imports and helpers it still needs."""

from __future__ import annotations

import ast

from selfheal._parse import ast_parse


def with_prelude(code: str, prelude: str) -> str:
    """Prepend what the spec's prelude defines and the code lacks: its imports
    (``from typing import List``) and its helper functions (HumanEval/32's ``poly``)."""
    if not prelude:
        return code
    try:
        defined = {
            n.name
            for n in ast_parse(code).body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
    except SyntaxError:
        defined = set()
    try:
        blocks = ast_parse(prelude).body
    except SyntaxError:
        blocks = []
    missing: list[str] = []
    for node in blocks:
        src = ast.get_source_segment(prelude, node) or ""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name not in defined:
                missing.append(src)
        elif src.strip() and src.strip() not in code:
            missing.append(src)
    return "\n".join([*missing, code]) if missing else code


def normalized(code: str) -> str:
    """The code's AST dump (comments and formatting ignored), or the stripped text."""
    try:
        return ast.dump(ast_parse(code))
    except SyntaxError:
        return code.strip()


def entry_point_of(code: str) -> str | None:
    """The last top-level function the code defines (the usual shape of a reply)."""
    try:
        tree = ast_parse(code)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return names[-1] if names else None
