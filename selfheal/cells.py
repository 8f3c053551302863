"""Notebook cells as text, for the magics: a spec cell split from its tests, the function a
traceback came from and the cell that defines it, that cell with the function replaced, and
the spec ``%selfheal`` heals. Pure functions (no IPython)."""

from __future__ import annotations

import ast
import linecache
from collections.abc import Sequence
from types import TracebackType

from selfheal._parse import parse_or_none
from selfheal.errors import ConfigError

_PYTEST_START = ("def test", "class Test", "@pytest.", "import pytest", "from pytest ")


def split_spec_and_tests(body: str) -> tuple[str, list[str]]:
    """Split a ``%%selfheal --tests`` cell into the spec and its trusted tests.

    With pytest-style tests (a line at column 0 starting ``def test``, ``class Test``,
    ``@pytest.`` or ``import pytest``), everything from the first such line is one pytest
    module. Otherwise the spec is every line before the first line starting with ``assert`` at
    column 0; from there, each such line begins a test and indented (or blank-then-indented)
    lines continue it. Other unindented lines after the first test are an error."""
    lines = body.splitlines()
    py = next((i for i, ln in enumerate(lines) if ln.startswith(_PYTEST_START)), None)
    if py is not None:
        return "\n".join(lines[:py]).strip(), ["\n".join(lines[py:])]
    first = next((i for i, ln in enumerate(lines) if ln.startswith("assert")), None)
    if first is None:
        return body.strip(), []
    tests: list[list[str]] = []
    for n, ln in enumerate(lines[first:], start=first + 1):
        if ln.startswith("assert"):
            tests.append([ln])
        elif not ln.strip():
            continue
        elif ln[0] in " \t":
            tests[-1].append(ln)
        else:
            raise ConfigError(
                f"Line {n} of the cell is after the tests but is not a test: {ln!r}. With "
                "--tests, write the spec first, then one `assert ...` per test (indent a "
                "continuation line)."
            )
    return "\n".join(lines[:first]).strip(), ["\n".join(t) for t in tests]


def definition(cell: str, function: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level ``def function`` of ``cell`` (None if it has none or does not parse)."""
    tree = parse_or_none(cell)
    for node in tree.body if tree else []:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            return node
    return None


def fixed_cell(cell: str, function: str, new_code: str) -> str:
    """``cell`` with the top-level ``def function`` replaced by ``new_code`` (appended in
    front when the cell has no such definition)."""
    node = definition(cell, function)
    if node is None:
        return new_code.rstrip() + "\n\n" + cell
    lines = cell.splitlines()
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    end = node.end_lineno or node.lineno
    return "\n".join([*lines[:start], *new_code.rstrip().splitlines(), *lines[end:]])


def cell_source(filename: str, cells: Sequence[str]) -> str | None:
    """The notebook cell a frame of ``filename`` ran in (IPython keeps each cell's source in
    ``linecache`` under its code name), if it is one of ``cells``; None for library code."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    text = "".join(lines).rstrip("\n")
    return next((c for c in reversed(cells) if c.rstrip("\n") == text), None)


def failing_function(tb: TracebackType | None, cells: Sequence[str]) -> tuple[str, str] | None:
    """The innermost function of the traceback defined in a notebook cell, with that cell."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name != "<module>":
            cell = cell_source(code.co_filename, cells)
            if cell is not None:
                found = (code.co_name, cell)
        tb = tb.tb_next
    return found


def repair_spec(cell: str, function: str, error: str, message: str) -> str:
    """The spec ``%selfheal`` heals: the intent (cell + message) and what went wrong."""
    intent = message.strip() or "Keep what the cell intends; make it work without the error."
    indented = "\n".join("    " + ln for ln in cell.rstrip().splitlines())
    err = "\n".join("    " + ln for ln in error.rstrip().splitlines()[-12:])
    return (
        f"Fix the function {function} from this notebook cell. {intent}\n\n"
        f"The cell:\n\n{indented}\n\nRunning it raised:\n\n{err}\n"
    )
