"""The examples written in a spec: what the user says a call returns; they become trusted tests
(the forms read: docs/usage.md, "Examples in the spec"). Every form is strict, since a misread
example is a trusted test failing right code: ``f(x) = y`` examples are dropped when a
function's examples give values of different kinds (HumanEval/130's ``tri``), and what cannot
be read is kept with the reason (``Unread``), to tell the user."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from selfheal._parse import ast_parse, literal, parse_or_none
from selfheal._record import Record
from selfheal.example_bare import bare_examples
from selfheal.example_named import named_examples, parameters
from selfheal.example_tables import table_rows
from selfheal.example_values import (
    WORD_VALUES,
    Names,
    PutValues,
    balanced_end,
    has_constant,
    is_expr,
    longest,
    same_expression,
    value_at,
)
from selfheal.expected import expected_problem, import_lines
from selfheal.state.cases import Example
from selfheal.tolerance import abs_tol_for, stated_tolerance

_SYMBOL_ARROWS = r"==>|==|->|=>|➞|→|≈"
_ARROW_RE = re.compile(
    rf"^\s*`?\s*(?:#\s*)?(?:(?P<symbol>{_SYMBOL_ARROWS})|should return|returns|gives|is)\s*`?\s*"
)
_EQUALS_RE = re.compile(r"^\s*=(?![=>])\s*")
_REPR_RE = re.compile(r"^\s*`?<[^<>\n]+>")
"""``<Counter object at 0x7f...>``: how Python shows an object it cannot write as a value."""
_REPR_WHY = (
    "the expected value is how Python shows an object, not a value that can be built; write "
    "an expression that builds an equal one (`Counter({'a': 1})`), or a test of yours that "
    "checks it (--test, tests=)"
)
_RESULT_WRAPPERS = frozenset({"round", "sorted", "list", "tuple", "set", "abs", "len", "str"})
"""Builtins a doctest may apply to the function's result (its first argument)."""


class Unread(Record):
    """An example written in a spec that could not be read as a test."""

    example: str
    """The example as written, e.g. ``f(x) -> foo(3)``."""
    why: str
    """Why it could not be read and what to write instead."""


def _calls_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _call_args(expr: str, name: str) -> list[str] | None:
    """The argument sources of ``expr`` as a call of ``name`` (a doctest may round or sort the
    result: ``round(f([1, 2]), 2)``, the wrapper's other arguments then count as arguments
    too), or None when it is not one."""
    tree = parse_or_none(expr.strip(), "eval")
    if tree is None:
        return None
    call, extra = tree.body, list[ast.expr]()
    wrapper = call
    if (
        isinstance(wrapper, ast.Call)
        and isinstance(wrapper.func, ast.Name)
        and wrapper.func.id in _RESULT_WRAPPERS
        and wrapper.args
        and not wrapper.keywords
        and _calls_name(wrapper.args[0], name)
    ):
        call, extra = wrapper.args[0], wrapper.args[1:]
    if not isinstance(call, ast.Call) or not _calls_name(call, name):
        return None
    return [ast.unparse(a) for a in [*call.args, *(k.value for k in call.keywords), *extra]]


def _args_problem(call: str, name: str, asked: Names) -> str | None:
    """Why the arguments of ``call`` cannot be built without the candidate, or None."""
    for arg in _call_args(call, name) or []:
        problem = expected_problem(arg, asked)
        if problem is not None:
            return f"the argument `{arg}` {problem}"
    return None


def _checked(call: str, expected: str, name: str, asked: Names) -> Example | str:
    """The example ``call`` -> ``expected``, or why it cannot be read."""
    problem = expected_problem(expected, asked)
    if problem is not None:
        return f"the expected value {problem}"
    args = _args_problem(call, name, asked)
    if args is not None:
        return args
    both = expected_problem(f"[{', '.join(_call_args(call, name) or [])}, {expected}]", asked)
    return f"the example {both}" if both else Example(call=call, expected=expected)


def find_examples(text: str, name: str) -> tuple[Example, ...]:
    """The examples of ``name`` written in ``text``, in every form the module reads, in order,
    without repeats."""
    return read_examples(text, name)[0]


def read_examples(text: str, name: str) -> tuple[tuple[Example, ...], tuple[Unread, ...]]:
    """The examples of ``name`` written in ``text`` (as ``find_examples``), and those that look
    like examples but could not be read, each with the reason."""
    asked = frozenset({name, *re.findall(r"^\s*(?:async\s+)?def\s+(\w+)", text, re.M)})
    unread: list[Unread] = []
    found = _doctests(text, name, asked, unread)
    inline, loose = _inline_examples(text, name, asked, unread)
    params = parameters(text, name)
    named = named_examples(text, name, params, asked) if params else []
    found += inline + named + bare_examples(text, name, asked)
    for call, expected, row in table_rows(text, name, params):
        example = _checked(call, expected, name, asked)
        if isinstance(example, Example):
            found.append(example)
        else:
            unread.append(Unread(example=row, why=example))
    if loose and len({_kind(e.expected) for e in [*found, *loose]}) == 1:
        found += loose
    tolerance = stated_tolerance(text)
    found = [e.model_copy(update={"abs_tol": abs_tol_for(e.expected, tolerance)}) for e in found]
    return tuple(dict.fromkeys(found)), tuple(dict.fromkeys(unread))


def _forget(bound: dict[str, str], node: ast.AST | None, *, methods_only: bool = False) -> None:
    """Forget the values of the names ``node`` uses (``methods_only``: those whose method or
    attribute it uses, ``xs.pop()``), which it may have changed."""
    for n in ast.walk(node) if node is not None else ():
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            bound.pop(n.value.id, None)
        elif isinstance(n, ast.Name) and not methods_only:
            bound.pop(n.id, None)


def _doctests(text: str, name: str, asked: Names, unread: list[Unread]) -> list[Example]:
    """``>>> name(args)`` and the value on the lines after it."""
    found: list[Example] = []
    bound: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped.startswith(">>>"):
            i += 1
            continue
        call = written = stripped[3:].strip()
        j = i + 1  # continuation lines, then the output
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
        i = j
        tree = parse_or_none(call)
        one = tree.body[0] if tree is not None and len(tree.body) == 1 else None
        if isinstance(one, ast.Assign) and [type(t) for t in one.targets] == [ast.Name]:
            target = one.targets[0]
            assert isinstance(target, ast.Name)
            value = ast.unparse(PutValues(bound).visit(one.value))
            _forget(bound, one.value, methods_only=True)
            if expected_problem(value, asked) is None:
                bound[target.id] = value
            else:
                bound.pop(target.id, None)
            continue
        if not isinstance(one, ast.Expr):
            _forget(bound, tree)  # `df['b'] = 2` changes df: its value is no longer known
            continue
        put = PutValues(bound).visit(one.value)
        _forget(bound, one.value)  # the call may change its arguments (`pop_first(xs)`)
        if "#" in call or ast.dump(put) != ast.dump(ast_parse(call, mode="eval").body):
            call = ast.unparse(put)  # a comment would swallow the assertion's `== value`
        expected = " ".join(out_lines).strip()
        if not expected or _call_args(call, name) is None:
            continue
        example = _checked(call, expected, name, asked)
        if isinstance(example, Example):
            found.append(example)
        elif not expected.startswith("Traceback"):
            if not is_expr(expected):
                example = (
                    f"the expected output `{expected[:40]}` is not a Python expression; write "
                    "the value as one (a table as `pd.DataFrame({...})`)"
                )
            unread.append(Unread(example=f">>> {written}"[:100], why=example))
    return found


_NAN = frozenset({"nan", "math.nan", "np.nan", "numpy.nan", "float('nan')", 'float("nan")'})
"""A NaN value as written: it never equals itself, so its test is ``math.isnan(call)``."""


def example_assert(example: Example) -> str:
    """The test a trusted example runs: the import lines its values need, then ``assert call
    == expected`` (``math.isclose`` with the stated tolerance for a float value,
    ``math.isnan`` for NaN)."""
    call, expected = example.call, example.expected
    if expected.strip() in _NAN:
        imports = import_lines(call, extra=["import math"])
        line = f"assert math.isnan({call})"
    elif example.abs_tol is None:
        imports = import_lines(call, expected)
        line = f"assert {call} == {expected}"
    else:
        imports = import_lines(call, expected, extra=["import math"])
        line = f"assert math.isclose({call}, {expected}, abs_tol={example.abs_tol!r})"
    return "\n".join([*imports, line])


def _names(srcs: Sequence[str]) -> set[str]:
    trees = [parse_or_none(s, "eval") for s in srcs]
    return {n.id for t in trees if t for n in ast.walk(t) if isinstance(n, ast.Name)}


def _inline_examples(
    text: str, name: str, asked: Names, unread: list[Unread]
) -> tuple[list[Example], list[Example]]:
    """``name(args) -> value`` written inside prose, several per line allowed; and apart, the
    ``name(args) = value`` lines (kept only when their values are of one kind)."""
    out: list[Example] = []
    loose: list[Example] = []
    for m in re.finditer(rf"(?<![\w.])({re.escape(name)})\s*\(", text):
        before = text[max(0, m.start() - 4) : m.start()]
        if before.endswith("def "):
            continue
        end = balanced_end(text, m.end() - 1)
        if end is None:
            continue
        call = text[m.start() : end]
        args = _call_args(call, name)
        if args is None:
            continue
        arrow = _ARROW_RE.match(text[end:])
        if arrow:
            rest = text[end + arrow.end() :].split("\n", 1)[0]
            exp = value_at(rest, asked)
            example = _checked(call, exp, name, asked) if exp is not None else None
            if isinstance(example, Example):
                out.append(example)
                continue
            attempt = longest(rest, lambda src: True) or ""
            if _REPR_RE.match(rest):
                written = text[m.start() : end + arrow.end()] + rest.strip()
                unread.append(Unread(example=" ".join(written.split())[:100], why=_REPR_WHY))
                continue
            if not has_constant(*args, attempt) or _names(args) & _names([attempt]):
                continue  # a signature, a rule (`f(n) -> f(n - 1) + 1`) or prose, not an example
            parsed = parse_or_none(attempt, "eval")
            is_word = parsed is not None and isinstance(parsed.body, ast.Name)
            word_ok = _args_problem(call, name, asked) is None and attempt and not is_word
            if arrow.group("symbol") or word_ok:
                why = example or (
                    f"the expected value {expected_problem(attempt, asked)}"
                    if attempt
                    else "nothing after the arrow reads as a Python value"
                )
                shown = " ".join((text[m.start() : end + arrow.end()] + attempt).split())
                unread.append(Unread(example=shown[:100], why=why))
            continue
        equals = _EQUALS_RE.match(text[end:])
        if equals:  # the whole rest of the line must be the value
            rest = text[end + equals.end() :].split("\n", 1)[0].strip().rstrip(".").rstrip()
            exp = WORD_VALUES.get(rest.lower()) or value_at(rest, asked)
            same = exp is not None and (exp in WORD_VALUES.values() or same_expression(exp, rest))
            if same and isinstance(_checked(call, str(exp), name, asked), Example):
                loose.append(Example(call=call, expected=str(exp)))
    return out, loose


def _kind(value: str) -> str:
    """What kind of value ``value`` is (numbers are one kind)."""
    try:
        v = literal(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return "other"
    if isinstance(v, bool):
        return "bool"
    return "number" if isinstance(v, int | float) else type(v).__name__
