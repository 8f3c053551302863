"""The call that raised, as evidence for ``%selfheal``: the failing call rebuilt from the
traceback as a trusted "must not raise" test, plus the value a docstring or your message
states for it (docs/notebook.md). Pure functions over a traceback and text (no IPython)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any, Literal

from selfheal._parse import literal, parse_or_none
from selfheal._record import Record
from selfheal.cells import cell_source
from selfheal.state import TestCase

_MAX_REPR = 2000
"""Longest argument text a test from the failing call may have."""


class FailingCall(Record):
    """The call of the healed function that raised, as far as a test can repeat it."""

    function: str
    """The function being healed."""
    exc_type: str
    """The exception it raised, e.g. ``ZeroDivisionError``."""
    builtin: bool
    """Whether that exception is a builtin one (a test can name it without importing it)."""
    written: str = ""
    """The call as the cell wrote it (empty when it could not be found)."""
    call: str | None = None
    """The call with every argument as a literal, e.g. ``mean_of_positive([-1, -2])``; None
    when it cannot be rebuilt without your kernel (``why`` says why)."""
    why: str = ""
    """Why no test can repeat the call (when ``call`` is None)."""


class StatedReturn(Record):
    """What the docstring or your message says the function returns in the failing case."""

    value: str
    """The value as Python source, e.g. ``0.0``, ``None``."""
    source: Literal["docstring", "message"]
    """Where it was read."""
    quote: str
    """The words it was read from."""


def _entries(tb: TracebackType | None) -> list[tuple[FrameType, int, int]]:
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno, tb.tb_lasti))
        tb = tb.tb_next
    return out


def _position(frame: FrameType, lasti: int) -> tuple[int | None, ...] | None:
    """The source span (line, end line, column, end column) of the instruction at ``lasti``."""
    try:
        return tuple(list(frame.f_code.co_positions())[lasti // 2])
    except (IndexError, ValueError):
        return None


def _call_node(source: str, function: str, line: int, span: Any) -> ast.Call | None:
    """The call of ``function`` at ``line`` of ``source`` (the exact one when several share it)."""
    tree = parse_or_none(source)
    if tree is None:
        return None
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == function
        and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    exact = [
        n
        for n in calls
        if span and (n.lineno, n.end_lineno, n.col_offset, n.end_col_offset) == span
    ]
    if len(exact) == 1:
        return exact[0]
    return calls[0] if len(calls) == 1 else None


def plain(value: Any) -> bool:
    """Whether ``value``'s ``repr`` reads back (as a literal) as an equal value of its type."""
    try:
        text = repr(value)
        if len(text) > _MAX_REPR:
            return False
        back = literal(text)
    except Exception:
        return False
    try:
        return type(back) is type(value) and bool(back == value)
    except Exception:
        return False


class _Unreadable(Exception):
    """An argument a test cannot rebuild; the message says which and why."""


def _value(node: ast.expr, names: dict[str, Any], source: str) -> Any:
    """The value of an argument: a literal, a plain-data variable, or a container of those."""
    with_names = any(isinstance(n, ast.Name) for n in ast.walk(node))
    if not with_names:
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise _Unreadable(f"`{node.id}` is not defined where the call ran")
        value = names[node.id]
        if not plain(value):
            raise _Unreadable(
                f"`{node.id}` is not plain data (a {type(value).__name__} whose repr does not "
                "read back as the same value)"
            )
        return value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_value(e, names, source) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {
            _value(k, names, source): _value(v, names, source)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    raise _Unreadable(
        f"the argument `{text}` is an expression, and selfheal does not run your code to rebuild it"
    )


def _arguments(call: ast.Call, names: dict[str, Any], source: str) -> str:
    parts: list[tuple[str | None, ast.expr]] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            raise _Unreadable("it passes `*args`")
        parts.append((None, arg))
    for kw in call.keywords:
        if kw.arg is None:
            raise _Unreadable("it passes `**kwargs`")
        parts.append((kw.arg, kw.value))
    texts = []
    for key, node in parts:
        as_written = not any(isinstance(n, ast.Name) for n in ast.walk(node))
        value = _value(node, names, source)
        text = ast.get_source_segment(source, node) if as_written else None
        text = text or repr(value)
        if len(text) > _MAX_REPR:
            raise _Unreadable(f"an argument's text is over {_MAX_REPR} characters")
        texts.append(text if key is None else f"{key}={text}")
    return ", ".join(texts)


def failing_call(
    tb: TracebackType | None,
    etype: type[BaseException],
    function: str,
    cells: Sequence[str],
) -> FailingCall:
    """The outermost call of ``function`` in the traceback, as a test can repeat it."""
    found = FailingCall(
        function=function, exc_type=etype.__name__, builtin=etype.__module__ == "builtins"
    )
    entries = _entries(tb)
    k = next(
        (
            i
            for i, (f, _, _) in enumerate(entries)
            if f.f_code.co_name == function and cell_source(f.f_code.co_filename, cells)
        ),
        None,
    )
    if not k:  # not found, or nothing called it (k == 0)
        return found.model_copy(update={"why": "the call that raised is not in the traceback"})
    frame, line, lasti = entries[k - 1]
    source = cell_source(frame.f_code.co_filename, cells)
    if source is None:
        why = f"{function}() was called from library code, not from a cell"
        return found.model_copy(update={"why": why})
    node = _call_node(source, function, line, _position(frame, lasti))
    if node is None:
        why = f"the call of {function}() on line {line} of the cell could not be read"
        return found.model_copy(update={"why": why})
    written = ast.get_source_segment(source, node) or ast.unparse(node)
    names = {**frame.f_globals, **frame.f_locals}
    try:
        args = _arguments(node, names, source)
    except _Unreadable as exc:
        why = f"the failing call `{written}` cannot become a test: {exc}"
        return found.model_copy(update={"written": written, "why": why})
    return found.model_copy(update={"written": written, "call": f"{function}({args})"})


_LIT = r"`?(None|True|False|-?\d+(?:\.\d+)?|'[^'\n]*'|\"[^\"\n]*\"|\[\]|\{\}|\(\))`?"
_VERB = r"(?:returns?|returning|should\s+return|should\s+be|gives?|is|be)"
_AFTER = re.compile(
    rf"(?:\b{_VERB}\s+|^\s*|[;:,.(]\s*){_LIT}\s+(?:if|when|for|on)\s+([^.;\n]*)", re.I | re.M
)
_BEFORE = re.compile(
    rf"\b(?:if|when|for|on)\s+([^,.;\n]*?),?\s+(?:it\s+)?(?:should\s+)?{_VERB}\s+{_LIT}", re.I
)
_PLAIN = re.compile(rf"\b{_VERB}\s+{_LIT}", re.I)
_EDGE = re.compile(r"\b(none|empty|no|nothing|zero|missing)\b", re.I)
EDGE_ERRORS = ("ZeroDivisionError", "IndexError", "StopIteration", "ValueError", "KeyError")
"""Exceptions an empty or missing input raises: a docstring's value for such a case (``0.0 if
there are none``) is taken to be the value for a call that raised one of them."""


def _stated(text: str) -> list[tuple[str, str, str]]:
    """``(value, case, quote)`` for each value the text states a return for: ``0.0 if there
    are none`` (case ``there are none``), or with no case, ``should return 0.0``."""
    found = [(m.group(1), m.group(2), m.group(0)) for m in _AFTER.finditer(text)]
    found += [(m.group(2), m.group(1), m.group(0)) for m in _BEFORE.finditer(text)]
    if not found:
        found = [(m.group(1), "", m.group(0)) for m in _PLAIN.finditer(text)]
    return [(value, case, quote.strip(" ;:,.(")) for value, case, quote in found]


def _tied(text: str, exc_type: str, *, caseless: bool) -> tuple[str, str] | None:
    """The one value ``text`` ties to the failing call: stated for an empty/none case when the
    call raised an exception such a case raises (``EDGE_ERRORS``), or, with ``caseless``,
    stated with no case at all. None when there is none or several."""
    values = [
        (value, quote)
        for value, case, quote in _stated(text)
        if (caseless and not case) or (_EDGE.search(case) and exc_type in EDGE_ERRORS)
    ]
    return values[0] if values and len({v for v, _ in values}) == 1 else None


def stated_return(docstring: str, message: str, exc_type: str) -> StatedReturn | None:
    """The value your message (first) or the docstring says the function returns for the call
    that raised, read without a model: a value stated with no case in the message (you called
    ``%selfheal`` on this call), or one stated for an empty/none case (``0.0 if there are
    none``) when the call raised an exception an empty input raises. None when nothing is
    stated or it is not sure (several values). A message with an explicit example (``f(x) ->
    y``) is left to the spec's examples."""
    if "->" in message:
        return None
    if _stated(message):
        said = _tied(message, exc_type, caseless=True)
        return StatedReturn(value=said[0], source="message", quote=said[1]) if said else None
    said = _tied(docstring, exc_type, caseless=False)
    return StatedReturn(value=said[0], source="docstring", quote=said[1]) if said else None


def must_not_raise(call: str, exc_type: str, *, builtin: bool) -> str:
    """A test that fails when ``call`` raises ``exc_type`` (or a subclass); any other outcome
    passes (this test says nothing about the value)."""
    said = f"{call} raised {exc_type}, as in your notebook"
    if builtin:
        return (
            f"try:\n    {call}\nexcept {exc_type}:\n    raise AssertionError({said!r})\n"
            "except Exception:\n    pass  # another outcome is not this failure"
        )
    return (
        f"try:\n    {call}\nexcept Exception as exc:\n"
        f"    if {exc_type!r} in [c.__name__ for c in type(exc).__mro__]:\n"
        f"        raise AssertionError({said!r})"
    )


def evidence_tests(found: FailingCall, stated: StatedReturn | None) -> tuple[TestCase, ...]:
    """The trusted tests of the failing call: it must not raise again (``u1``) and, when a
    value is stated for it, it returns that value (``u2``)."""
    if found.call is None:
        return ()
    tests = [
        TestCase(
            id="u1",
            origin="user",
            trusted=True,
            smoke=True,  # it checks that the call does not raise, not what it returns
            code=must_not_raise(found.call, found.exc_type, builtin=found.builtin),
            rationale=f"the call that raised {found.exc_type} in your notebook must not raise it",
        )
    ]
    if stated is not None:
        op = "is" if stated.value in ("None", "True", "False") else "=="
        tests.append(
            TestCase(
                id="u2",
                origin="user",
                trusted=True,
                code=f"assert {found.call} {op} {stated.value}",
                rationale=f"the {stated.source} says: {stated.quote!r}",
            )
        )
    return tuple(tests)


def evidence_line(found: FailingCall, stated: StatedReturn | None) -> str:
    """The progress line the magic prints: what the failing call became, or why nothing."""
    if found.call is None:
        return (
            f"selfheal: {found.why}; this run has no test from the failure (add an example to "
            f"your message: %selfheal ... {found.function}(<args>) -> <expected>)."
        )
    line = (
        f"selfheal: evidence from the failing call (trusted): `{found.call}` must not raise "
        f"{found.exc_type}"
    )
    if stated is not None:
        line += f"; it returns {stated.value} (the {stated.source}: {stated.quote!r})"
    return line + "."
