"""The value an example writes after its call: the longest expression that starts the rest of
the line and can be evaluated without the candidate (``selfheal.expected``), or a whole word
``true``, ``false``, ``none``; and the small parsing helpers the example forms share."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Iterator

from selfheal._parse import ast_parse, parse_or_none
from selfheal.expected import expected_problem, written_together

Names = frozenset[str]
"""The functions the spec asks for: an example's values may not use them."""

WORD_VALUES = {"true": "True", "false": "False", "none": "None"}


def is_expr(src: str) -> bool:
    return parse_or_none(src, "eval") is not None


def scan(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """Each character of ``text`` from ``start`` that is outside string quotes, with the depth
    of brackets after it (an opening bracket counts itself)."""
    depth = 0
    quote: str | None = None
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        else:
            depth += (c in "([{") - (c in ")]}")
            yield i, c, depth
        i += 1


def balanced_end(text: str, start: int) -> int | None:
    """Index just past the parenthesis closing the one at ``start``."""
    for i, c, depth in scan(text, start):
        if depth == 0 and c in ")]}":
            return i + 1
        if depth == 0 and c == "\n":
            return None
    return None


def value_at(rest: str, asked: Names) -> str | None:
    """The value that starts ``rest``: an expression that can be evaluated without the
    candidate, or a whole word ``true``, ``false``, ``none``."""
    word = re.match(r"\s*([A-Za-z]+)\b", rest)
    if word and word.group(1).lower() in WORD_VALUES:
        after = rest[word.end() :].strip()
        if not after or after[0] in ".,;#(`":
            return WORD_VALUES[word.group(1).lower()]
    value = longest(rest, lambda src: expected_problem(src, asked) is None)
    if value is not None and "#" in value:  # "24 # sum of 21 + 3": the comment is not the value
        value = ast.unparse(ast_parse(value, mode="eval").body)
    return value


def same_expression(a: str, b: str) -> bool:
    """``a`` and ``b`` are the same Python expression (a comment aside)."""
    if not (is_expr(a) and is_expr(b)):
        return False
    return ast.dump(ast_parse(a, mode="eval")) == ast.dump(ast_parse(b, mode="eval"))


def longest(rest: str, ok: Callable[[str], bool]) -> str | None:
    """The longest prefix of ``rest`` (cut at a space, a backtick, a closing parenthesis or
    punctuation) that is an
    expression ``ok`` accepts, unless a longer expression it does not accept holds it."""
    rest = rest[:200]
    for cut in range(len(rest), 0, -1):
        tail = rest[cut:]
        if tail and not (
            tail[0] in " \t`)"
            or tail.startswith(("'''", '"""'))
            or (tail[0] in ".,;:" and (len(tail) == 1 or tail[1] in " \t`"))
        ):
            continue  # the value must end at a word boundary, not inside a token
        cand = rest[:cut].strip()
        while cand.endswith((".", ",", ";", ":")):
            cand = cand[:-1].rstrip()
        tree = parse_or_none(cand, "eval") if cand else None
        if tree is None:
            continue
        if ok(cand):
            return cand
        if not _may_end_inside(tree.body, cand):
            return None  # `d - datetime.timedelta(1)`: a shorter prefix is not the value
    return None


def _may_end_inside(node: ast.expr, src: str) -> bool:
    """Whether the value may end inside ``node``, a longer expression (``src``) that was not
    accepted: a tuple (``2, f(2) -> 4``: the next example), ``and``/``or``/``if``/``is``
    (prose), a call of what is not a function (``5 (10 / 2)``: a remark), or a dot with a
    space after it (``4.5. Then``: the end of a sentence)."""
    if isinstance(node, ast.Attribute):
        return not written_together(node, src)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return not written_together(node.func, src)
    if isinstance(node, ast.Call):
        return not isinstance(node.func, ast.Name)
    return isinstance(node, ast.Tuple | ast.BoolOp | ast.Compare | ast.IfExp)


def has_constant(*srcs: str) -> bool:
    """Whether any of ``srcs`` holds a literal."""
    trees = [parse_or_none(s, "eval") for s in srcs]
    return any(isinstance(n, ast.Constant) for t in trees if t for n in ast.walk(t))


class PutValues(ast.NodeTransformer):
    """Puts the values given to names earlier (``>>> xs = [3, 1]``, ``df = pd.DataFrame(...)``,
    as source) in place of the names' reads, in a copy of the node."""

    def __init__(self, bound: dict[str, str]) -> None:
        self.bound = bound

    def visit_Name(self, node: ast.Name) -> ast.expr:
        src = self.bound.get(node.id) if isinstance(node.ctx, ast.Load) else None
        return ast_parse(src, mode="eval").body if src is not None else node

    def visit(self, node: ast.AST) -> ast.AST:
        return super().visit(copy.deepcopy(node))  # type: ignore[no-any-return]
