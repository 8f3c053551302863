"""Examples written as a table of inputs and outputs: a markdown table whose header names the
call (``| x | f(x) |``, ``| a | b | f(a, b) |``) or says which column is which (``| input |
output |``, ``args``/``result``/``expected``...), with or without the outer pipes.

This module only finds the rows and says which call and value each one writes; the example
reader (``selfheal.examples``) checks them like every other example."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from selfheal._parse import parse_or_none
from selfheal.example_values import scan

_SEP_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$")
"""The line under a table's header: ``|---|---|``, ``--- | :---:``."""
_OUTPUT_WORDS = frozenset(
    ["output", "outputs", "result", "results", "returns", "return", "expected", "value", "answer"]
    + ["return value", "expected output", "expected value"]
)
_INPUT_WORDS = frozenset(["input", "inputs", "args", "arguments", "argument", "call"])


def _cells(line: str) -> list[str]:
    """The cells of a table row: split at the pipes outside quotes and brackets (``\\|`` is a
    pipe inside a cell), each stripped of spaces and of the backticks around it."""
    s = line.strip()
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") and not s.endswith("\\|") else s
    cuts = [i for i, c, depth in scan(s) if c == "|" and depth == 0 and s[i - 1 : i] != "\\"]
    bounds = zip([-1, *cuts], [*cuts, len(s)], strict=True)
    cells = [s[a + 1 : b].replace("\\|", "|") for a, b in bounds]
    return [c.strip().strip("`").strip() for c in cells]


def _header_call(cell: str, name: str) -> list[str] | None:
    """The parameter names of a header written as the call ``name(a, b)``, or None."""
    tree = parse_or_none(cell, "eval")
    node = tree.body if tree else None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    if node.func.id != name or node.keywords:
        return None
    names = [a.id for a in node.args if isinstance(a, ast.Name)]
    return names if len(names) == len(node.args) else None


def _call(name: str, args: Sequence[str], one_parameter: bool) -> str:
    """``name(args)``; a single cell holding several values for a one-parameter function
    is one tuple."""
    if one_parameter and len(args) == 1:
        tree = parse_or_none(f"_({args[0]})", "eval")
        if tree is not None and isinstance(tree.body, ast.Call) and len(tree.body.args) > 1:
            return f"{name}(({args[0]}))"
    return f"{name}({', '.join(args)})"


def _columns(
    header: list[str], name: str, params: Sequence[str] | None
) -> tuple[int, list[int], bool] | None:
    """Which column is the value and which are the arguments (in call order), and whether the
    function takes one parameter; None when the header does not say."""
    lowered = [h.lower() for h in header]
    for out, cell in enumerate(header):
        named = _header_call(cell, name)
        if named is not None:
            break
        if lowered[out] in _OUTPUT_WORDS:
            named = None
            break
    else:
        return None
    others = [i for i in range(len(header)) if i != out]
    by_name = {h: i for i, h in enumerate(header) if i != out}
    wanted = named if named is not None else list(params or [])
    if wanted and all(p in by_name for p in wanted):
        return out, [by_name[p] for p in wanted], len(wanted) == 1
    inputs = [i for i in others if lowered[i] in _INPUT_WORDS]
    if len(inputs) == 1:
        one = (named is not None and len(named) == 1) or (params is not None and len(params) == 1)
        return out, inputs, one
    return None


def table_rows(text: str, name: str, params: Sequence[str] | None) -> list[tuple[str, str, str]]:
    """``(call, expected, row)`` for each row of each table of inputs and outputs in ``text``:
    the call of ``name`` the row writes, its value (both as written, unchecked), and the row as
    written."""
    lines = text.splitlines()
    found: list[tuple[str, str, str]] = []
    for i in range(1, len(lines)):
        if not _SEP_RE.match(lines[i]) or "|" not in lines[i - 1]:
            continue
        header = _cells(lines[i - 1])
        columns = _columns(header, name, params)
        if columns is None:
            continue
        out, inputs, one = columns
        for row in lines[i + 1 :]:
            if "|" not in row or not row.strip():
                break
            cells = _cells(row)
            if len(cells) != len(header) or not all(cells[j] for j in [out, *inputs]):
                continue
            call = _call(name, [cells[j] for j in inputs], one)
            found.append((call, cells[out], row.strip()))
    return found
