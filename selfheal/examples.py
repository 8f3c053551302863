"""The examples written in a spec: what the user says a call returns. They become trusted tests.

The forms read, each only when the call's arguments and the value are plain values:

* doctests: ``>>> f(x)`` and the value on the lines after it;
* inline: ``f(x) -> y`` (or ``==>``, ``==``, ``=>``, ``➞``, ``→``, "returns", "should return",
  "gives", "is", a comment ``# returns y`` / ``# => y``), and ``f(x) = y`` when ``y`` is the
  rest of its line;
* named inputs: ``For xs = [1, 2], k = 3 the output should be 5`` (or "the result", "the
  return value"), the names being exactly the function's parameters;
* blocks: ``Input: xs = [1, 2], k = 3`` (or the bare arguments), then ``Output: 5``.

A value written as a whole ``true``, ``false`` or ``none`` reads as ``True``, ``False``,
``None``. A misread example would be a trusted test failing right code, so every form is strict,
and ``f(x) = y`` examples are dropped when a function's examples give values of different
kinds (HumanEval/130 writes ``tri(4) = 3`` for its sequence and ``tri(3) = [1, 3, 2, 8]`` for
the function).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from selfheal._parse import ast_parse, literal, parse_or_none
from selfheal.state import Spec
from selfheal.state.cases import Example

_ARROW_RE = re.compile(r"^\s*(?:#\s*)?(?:==>|==|->|=>|➞|→|should return|returns|gives|is)\s*")
_EQUALS_RE = re.compile(r"^\s*=(?![=>])\s*")
_FOR_RE = re.compile(
    r"\bFor\s+(?P<args>.+?)\s*,?\s+(?:the\s+)?(?:output|result|return value)\s+"
    r"(?:should|will|must)\s+be\s+(?P<value>.+)$",
    re.IGNORECASE,
)
_INPUT_RE = re.compile(r"^\s*Input\s*:\s*(?P<args>\S.*)$", re.IGNORECASE)
_OUTPUT_RE = re.compile(r"^\s*Output\s*:\s*(?P<value>\S.*)$", re.IGNORECASE)
_WORD_VALUES = {"true": "True", "false": "False", "none": "None"}
_NAMES = frozenset({"True", "False", "None", "float", "inf", "nan"})
"""The names a literal-like value may use."""
_LITERAL_NODES: tuple[type[ast.AST], ...] = (ast.Expression, ast.Constant, ast.List, ast.Tuple)
_LITERAL_NODES += (ast.Set, ast.Dict, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load, ast.Name)
_LITERAL_NODES += (ast.Call, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div)
"""The syntax a literal-like value may use (``float('inf')``, ``-1``, ``1 + 2j``, ...)."""


def _is_expr(src: str) -> bool:
    return parse_or_none(src, "eval") is not None


def _calls(expr: str, name: str) -> bool:
    """True if ``expr`` is a call of ``name`` whose arguments are plain values."""
    tree = parse_or_none(expr, "eval")
    if tree is None:
        return False
    call = tree.body
    # a doctest may round or sort the result: ``round(find_zero([1, 2]), 2)``
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id in _RESULT_WRAPPERS
        and call.args
        and not call.keywords
        and all(_literal_like(ast.unparse(a)) for a in call.args[1:])
    ):
        call = call.args[0]
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name
    ):
        return False
    args = [*call.args, *(k.value for k in call.keywords)]
    return all(_literal_like(ast.unparse(a)) for a in args)


_RESULT_WRAPPERS = frozenset({"round", "sorted", "list", "tuple", "set", "abs", "len", "str"})
"""Builtins a doctest may apply to the function's result (its first argument), with plain
values as their other arguments."""


def find_examples(text: str, name: str) -> tuple[Example, ...]:
    """The examples of ``name`` written in ``text``, in every form the module reads, in order,
    without repeats."""
    found = _doctests(text, name)
    inline, loose = _inline_examples(text, name)
    params = _parameters(text, name)
    named = _named_examples(text, name, params) if params else []
    found += inline + named
    if loose and len({_kind(e.expected) for e in [*found, *loose]}) == 1:
        found += loose
    return tuple(dict.fromkeys(found))  # without repeats, in order


def _doctests(text: str, name: str) -> list[Example]:
    """``>>> name(args)`` and the value on the lines after it."""
    found: list[Example] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(">>>"):
            call = stripped[3:].strip()
            # continuation lines
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("..."):
                call += " " + lines[j].strip()[3:].strip()
                j += 1
            out_lines = []
            while j < len(lines):
                s = lines[j].strip()
                if not s or s.startswith(">>>") or s.startswith('"""') or s.startswith("'''"):
                    break
                out_lines.append(s)
                j += 1
            expected = " ".join(out_lines).strip()
            if expected and _calls(call, name) and _is_expr(call) and _is_expr(expected):
                if "#" in call:  # a trailing comment would swallow the assertion's `== value`
                    call = ast.unparse(ast_parse(call, mode="eval").body)
                found.append(Example(call=call, expected=expected))
            i = j
            continue
        i += 1
    return found


def example_assert(example: Example) -> str:
    """The assertion a trusted example test runs."""
    return f"assert {example.call} == {example.expected}"


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the parenthesis closing the one at ``start``."""
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
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "\n" and depth == 0:
            return None
        i += 1
    return None


def _inline_examples(text: str, name: str) -> tuple[list[Example], list[Example]]:
    """``name(args) -> value`` written inside prose, several per line allowed; and apart, the
    ``name(args) = value`` lines (kept only when their values are of one kind)."""
    out: list[Example] = []
    loose: list[Example] = []
    for m in re.finditer(rf"(?<![\w.])({re.escape(name)})\s*\(", text):
        before = text[max(0, m.start() - 4) : m.start()]
        if before.endswith("def "):
            continue
        end = _balanced_end(text, m.end() - 1)
        if end is None:
            continue
        call = text[m.start() : end]
        if not _calls(call, name):
            continue
        arrow = _ARROW_RE.match(text[end:])
        if arrow:
            exp = _value(text[end + arrow.end() :].split("\n", 1)[0])
            if exp is not None:
                out.append(Example(call=call, expected=exp))
            continue
        equals = _EQUALS_RE.match(text[end:])
        if equals:  # the whole rest of the line must be the value
            rest = text[end + equals.end() :].split("\n", 1)[0].strip().rstrip(".").rstrip()
            exp = _WORD_VALUES.get(rest.lower()) or _value(rest)
            if exp is not None and (exp in _WORD_VALUES.values() or _same_expression(exp, rest)):
                loose.append(Example(call=call, expected=exp))
    return out, loose


def _value(rest: str) -> str | None:
    """The value that starts ``rest``: a literal-like expression, or a whole word ``true``,
    ``false``, ``none``."""
    word = re.match(r"\s*([A-Za-z]+)\b", rest)
    if word and word.group(1).lower() in _WORD_VALUES:
        after = rest[word.end() :].strip()
        if not after or after[0] in ".,;#(":
            return _WORD_VALUES[word.group(1).lower()]
    value = _longest_expression(rest)
    if value is not None and "#" in value:  # "24 # sum of 21 + 3": the comment is not the value
        value = ast.unparse(ast_parse(value, mode="eval").body)
    return value


def _same_expression(a: str, b: str) -> bool:
    """``a`` and ``b`` are the same Python expression (a comment aside)."""
    if not (_is_expr(a) and _is_expr(b)):
        return False
    return ast.dump(ast_parse(a, mode="eval")) == ast.dump(ast_parse(b, mode="eval"))


def _kind(value: str) -> str:
    """What kind of value ``value`` is (numbers are one kind)."""
    try:
        v = literal(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return "other"
    if isinstance(v, bool):
        return "bool"
    return "number" if isinstance(v, int | float) else type(v).__name__


def _parameters(text: str, name: str) -> list[str] | None:
    """The positional parameters of ``def name(...)`` in ``text``, or None when it has none."""
    m = re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", text, re.MULTILINE)
    if m is None:
        return None
    end = _balanced_end(text.replace("\n", " "), m.end() - 1)
    if end is None:
        return None
    tree = parse_or_none(f"def _{text[m.end() - 1 : end]}: pass")
    fn = tree.body[0] if tree else None
    if not isinstance(fn, ast.FunctionDef):
        return None
    names = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    return names or None


def _call_from_inputs(name: str, params: Sequence[str], inputs: str) -> str | None:
    """``name(...)`` from written inputs: ``a = 1, b = [2]`` naming exactly the parameters, or
    the bare values of all of them; None otherwise."""
    tree = parse_or_none(f"_({inputs})", "eval")
    node = tree.body if tree else None
    if not isinstance(node, ast.Call):
        return None
    if node.keywords and not node.args:
        given = {k.arg: k.value for k in node.keywords if k.arg}
        if sorted(given) != sorted(params) or len(node.keywords) != len(params):
            return None
        values = [given[p] for p in params]
    elif node.args and not node.keywords and len(node.args) == len(params):
        values = list(node.args)
    else:
        return None
    args = [ast.get_source_segment(f"_({inputs})", v) or ast.unparse(v) for v in values]
    if not all(_literal_like(a) for a in args):
        return None
    return f"{name}({', '.join(args)})"


def _for_example(line: str, name: str, params: Sequence[str]) -> Example | None:
    """The example of a ``For a = 1, b = 2 the output should be 3`` line, or None. The inputs
    follow one of the line's "for"s ("For example, for n = 5 the output should be 120") and are
    the longest run of its comma-separated parts that reads as them ("For N = 1000, the sum
    of digits will be 1 the output should be ...")."""
    for start in re.finditer(r"\bfor\b", line, re.IGNORECASE):
        m = _FOR_RE.match(line, start.start())
        if m is None:
            continue
        args = m.group("args")
        cuts = [len(args), *(j for j in range(len(args) - 1, 0, -1) if args[j] == ",")]
        for j in cuts:
            call = _call_from_inputs(name, params, args[:j])
            if call is not None:
                exp = _value(m.group("value"))
                return None if exp is None else Example(call=call, expected=exp)
    return None


def _named_examples(text: str, name: str, params: Sequence[str]) -> list[Example]:
    """``For a = 1, b = 2 the output should be 3`` lines, and ``Input: ...`` lines followed by
    an ``Output: ...`` line."""
    out: list[Example] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        named = _for_example(line, name, params)
        if named is not None:
            out.append(named)
            continue
        m = _INPUT_RE.match(line)
        if m:
            following = [s for s in lines[i + 1 : i + 3] if s.strip()][:1]
            out_m = _OUTPUT_RE.match(following[0]) if following else None
            call = _call_from_inputs(name, params, m.group("args").strip())
            exp = _value(out_m.group("value")) if out_m and call else None
            if call and exp is not None:
                out.append(Example(call=call, expected=exp))
    return out


def _longest_expression(rest: str) -> str | None:
    """The longest prefix of ``rest`` (cut at a space or punctuation) that is a literal-like expression."""
    rest = rest[:200]
    cuts = range(len(rest), 0, -1)
    for cut in cuts:
        tail = rest[cut:]
        if tail and not (
            tail[0] in " \t"
            or tail.startswith(("'''", '"""'))
            or (tail[0] in ".,;:" and (len(tail) == 1 or tail[1] in " \t"))
        ):
            continue  # the value must end at a word boundary, not inside a token
        cand = rest[:cut].strip()
        while cand.endswith((".", ",", ";", ":")):
            cand = cand[:-1].rstrip()
        if cand and _is_expr(cand) and _literal_like(cand):
            return cand
    return None


def _literal_like(src: str) -> bool:
    """Values only: literals, containers of them, negative numbers, True/False/None, float('inf')."""
    tree = parse_or_none(src, "eval")
    if tree is None:
        return False
    for node in ast.walk(tree):
        if not isinstance(node, _LITERAL_NODES):
            return False
        if isinstance(node, ast.Name) and node.id not in _NAMES:
            return False
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "float"
        ):
            return False
    return True


_LOOKS_LIKE_RE = re.compile(
    r"^\s*(?:>>>|Input\s*:|Output\s*:)|\b(?:output|result|return value)\s+(?:should|will|must)\s+be\b",
    re.IGNORECASE,
)


def unread_examples(spec: Spec, *, limit: int = 2) -> list[str]:
    """Lines of the spec that look like examples of its function (a call of it followed by a
    value mark, a doctest, ``Input:``/``Output:``, "the output should be") when none was read
    as one (``spec.examples``, parsed once with the spec): what to show a user whose examples
    could not become trusted tests. Empty when any example was read."""
    name = spec.entry_point
    if spec.examples or not name:
        return []
    call = re.compile(
        rf"(?<![\w.]){re.escape(name)}\s*\(.*(?:->|=>|==|=|➞|→|\breturns?\b|\bshould\b|#)"
    )
    found: list[str] = []
    for line in spec.text.splitlines():
        stripped = line.strip()
        if not stripped or re.match(r"(?:async\s+)?def\s", stripped):
            continue
        if call.search(stripped) or _LOOKS_LIKE_RE.search(stripped):
            found.append(stripped[:120])
            if len(found) >= limit:
                break
    return found


def no_trusted_test(spec: Spec) -> str:
    """What a result without a trusted test says: add an example, or, when the spec has lines
    that look like examples selfheal could not read, which one and the form to write it in."""
    unread = unread_examples(spec, limit=1)
    if unread:
        return (
            f"no trusted test (`{unread[0]}` looks like an example but could not be read: "
            f"write it as `{spec.entry_point}(args) -> value` to verify)"
        )
    return "no trusted test (add an example to the spec to verify)"
