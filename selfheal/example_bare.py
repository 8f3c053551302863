"""Examples written without the call, for a function of one argument: ``Examples: "$1,234.50"
-> 123450, "-$3" -> -300`` or ``(2.5 -> 3.0, -2.5 -> -3.0)`` in prose.

Strict, since a misread is a trusted test failing right code: the function's signature (a
``def`` line, or ``name(text: str, digits: int = 0)`` in prose) must have exactly one
parameter without a default; the arrow is a symbol (``->``, ``=>``, ``→``, ``➞``); both sides
are values that can be built without the candidate, each holding a literal, neither a tuple
without its parentheses (``2.5 -> 3.0, -2.5`` is two examples, not a tuple), and the arrows
do not chain (``1 -> 2 -> 3`` is a linked list)."""

from __future__ import annotations

import ast
import re

from selfheal._parse import parse_or_none
from selfheal.example_values import Names, balanced_end, has_constant, longest
from selfheal.expected import expected_problem
from selfheal.state.cases import Example

_ARROW_RE = re.compile(r"->|=>|→|➞")
_ARROW_END_RE = re.compile(r"(?:->|=>|→|➞)\s*`?\s*$")
_BOUNDARY = " \t([{,;:`"
"""What may stand just before the value on the left of an arrow."""


def required_parameters(text: str, name: str) -> int | None:
    """How many parameters without a default the signature of ``name`` in ``text`` has (a
    ``def`` line or a signature in prose), or None when ``text`` writes none."""
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\s*\(", text):
        end = balanced_end(text.replace("\n", " "), m.end() - 1)
        if end is None:
            continue
        tree = parse_or_none(f"def _{text[m.end() - 1 : end]}: pass")
        fn = tree.body[0] if tree else None
        if isinstance(fn, ast.FunctionDef):
            args = fn.args
            positional = [*args.posonlyargs, *args.args]
            kw = [a for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
            return len(positional) - len(args.defaults) + len(kw)
    return None


def _bare_tuple(src: str) -> bool:
    tree = parse_or_none(src.strip(), "eval")
    return tree is not None and isinstance(tree.body, ast.Tuple) and src.strip()[:1] != "("


def _ok(src: str, asked: Names) -> bool:
    return expected_problem(src, asked) is None and not _bare_tuple(src) and has_constant(src)


def _value_before(before: str, asked: Names) -> str | None:
    """The longest value that ends ``before`` and starts after a space or punctuation."""
    for start in range(len(before)):
        if start and before[start - 1] not in _BOUNDARY:
            continue
        cand = before[start:].strip()
        if cand and _ok(cand, asked):
            return cand
    return None


def bare_examples(text: str, name: str, asked: Names) -> list[Example]:
    """The ``value -> value`` examples of ``name`` in ``text``, when it takes one argument."""
    if required_parameters(text, name) != 1:
        return []
    out: list[Example] = []
    for m in _ARROW_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[max(line_start, m.start() - 200) : m.start()].rstrip().rstrip("`")
        call = before.rfind(f"{name}(")
        if call >= 0 and balanced_end(before, call + len(name)) == len(before):
            continue  # `f(x) -> y`: the call's own arrow
        arg = _value_before(before.rstrip(), asked)
        if arg is None or _ARROW_END_RE.search(before.rstrip()[: -len(arg)]):
            continue  # `1 -> 2 -> 3`: a chain (a linked list), not examples
        rest = text[m.end() :].split("\n", 1)[0].lstrip().lstrip("`")
        value = longest(rest, lambda src: _ok(src, asked))
        if value is not None and not _ARROW_RE.match(rest[len(value) :].lstrip(" `")):
            out.append(Example(call=f"{name}({arg})", expected=value))
    return out
