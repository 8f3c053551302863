"""Your tests checked before any model call: names they import from the code under test that
the code does not define, tests that contradict each other (the same call, different expected
values), and tests that check no value (smoke tests: they must pass, and cannot make a result
``verified`` on their own). The first two are a ``ConfigError`` naming the tests; no model
time is spent on tests that no code can pass."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from selfheal._parse import parse_or_none
from selfheal.errors import ConfigError
from selfheal.state import TestCase
from selfheal.state.cases import Example
from selfheal.usertests import UserTest

_CHECK_CALLS = frozenset({"raises", "warns", "deprecated_call", "fail", "approx"})
"""Calls that check a value or an exception besides ``assert*`` (``pytest.raises`` ...)."""


def defined_names(code: str) -> set[str] | None:
    """The names ``code`` defines at its top level (functions, classes, assignments, imports);
    None when they cannot be known without running it (``import *``, a module ``__getattr__``,
    ``globals()``)."""
    tree = parse_or_none(code)
    if tree is None:
        return None
    names: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    dynamic = any(isinstance(n, ast.Name) and n.id == "globals" for n in ast.walk(tree))
    return None if dynamic or "__getattr__" in names else names


def _top_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements at module level, those inside ``if``/``try``/``with`` blocks included."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            for part in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, part, ()):
                    yield from _top_level(
                        child.body if isinstance(child, ast.ExceptHandler) else [child]
                    )


def check_imports(tests: Sequence[UserTest], code: str, entry_point: str | None) -> None:
    """A ``ConfigError`` for a name a test imports from the code under test (``from buggy
    import chunkz``) that ``code`` does not define, unless it is ``entry_point`` (the function
    the spec asks for). It names the name, the test and its line, and what the code defines,
    closest first."""
    names = defined_names(code)
    if names is None:
        return
    missing: list[tuple[str, str, str, int]] = []
    for t in tests:
        tree = parse_or_none(t.text)
        for imp in t.imports:
            used = [imp.name] if imp.name is not None else _attributes(tree, imp.module)
            missing += [
                (n, imp.module, t.origin, imp.line) for n in used if n not in names | {entry_point}
            ]
    if not missing:
        return
    name, module, origin, line = missing[0]
    where = f"line {line} of {origin}" if origin.startswith("test ") else f"{origin}, line {line}"
    close = sorted(
        (n for n in names if not n.startswith("_")),
        key=lambda n: -difflib.SequenceMatcher(None, name, n).ratio(),
    )
    defines = ", ".join(close[:10]) + (", ..." if len(close) > 10 else "") or "no public name"
    more = f" ({len(missing) - 1} more such import(s))" if len(missing) > 1 else ""
    raise ConfigError(
        f"Your test imports {name!r} from {module} ({where}), but the code you gave does not "
        f"define it{more}; it defines: {defines}. Fix the import"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f", or, if {name!r} is the function to write, say so in the spec (--entry-point "
        f"{name}). No model was asked: no code could pass a test that imports a missing name."
    )


def _attributes(tree: ast.Module | None, alias: str) -> list[str]:
    """The attributes a test reads from the module it imports as ``alias`` (``stats.median``)."""
    if tree is None:
        return []
    found = (
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == alias
    )
    return list(dict.fromkeys(found))


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _checks_here(node: ast.AST) -> bool:
    """An assert, a raise, or a checking call (``self.assertEqual``, ``pytest.raises``,
    ``np.testing.assert_allclose``, ``pytest.approx``) anywhere in ``node``."""
    return any(
        isinstance(n, ast.Assert | ast.Raise)
        or (
            isinstance(n, ast.Call)
            and (_call_name(n).startswith("assert") or _call_name(n) in _CHECK_CALLS)
        )
        for n in ast.walk(node)
    )


def _checks_value(module: ast.Module, cls: str | None, func: str) -> bool:
    """The test function ``func`` (of class ``cls``) checks a value: itself, or through a
    helper it calls (a function of the module, a method of its class)."""
    helpers: dict[str, ast.AST] = {
        n.name: n for n in module.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if cls is not None:
        node = next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        for n in node.body if node is not None else ():
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                helpers[n.name] = n
    todo, seen = [func], set()
    while todo:
        name = todo.pop()
        fn = helpers.get(name)
        if name in seen or fn is None:
            continue
        seen.add(name)
        if _checks_here(fn):
            return True
        todo += [_call_name(n) for n in ast.walk(fn) if isinstance(n, ast.Call)]
    return False


def is_smoke(test: TestCase) -> bool:
    """``test`` (one of yours) calls the code and checks no value: no assert, no raise, no
    ``pytest.raises``/``approx``, no ``assert*`` call."""
    if test.pytest_module is not None and test.pytest_item is not None:
        import json

        item = json.loads(test.pytest_item)
        tree = parse_or_none(test.pytest_module)
        return tree is not None and not _checks_value(tree, item["cls"], item["func"])
    tree = parse_or_none(test.code) if test.code is not None else None
    return tree is not None and not _checks_here(tree)


def marked(tests: Iterable[TestCase]) -> tuple[TestCase, ...]:
    """``tests`` with ``smoke`` set on those that check no value."""
    return tuple(t.model_copy(update={"smoke": True}) if is_smoke(t) else t for t in tests)


@dataclass(frozen=True)
class _Claim:
    """A test's claim that a call returns a value."""

    call: str
    """The call as written (``chunks([1, 2, 3], 2)``)."""
    key: tuple[str, str, str]
    """The function and the reprs of its arguments (so spacing cannot hide a repeat)."""
    value: Any
    """The value it must return."""
    shown: str
    """The test line as written, and where it is."""


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _claim(
    call: ast.expr, value: ast.expr, known: set[str], text: str, where: str
) -> _Claim | None:
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    if call.func.id not in known:
        return None
    parts = [_literal(a) for a in call.args] + [_literal(k.value) for k in call.keywords]
    ok, expected = _literal(value)
    if not ok or not all(p[0] for p in parts) or any(k.arg is None for k in call.keywords):
        return None
    args = repr(tuple(p[1] for p in parts[: len(call.args)]))
    kwargs = repr(
        sorted(
            (k.arg or "", repr(p[1]))
            for k, p in zip(call.keywords, parts[len(call.args) :], strict=True)
        )
    )
    return _Claim(
        call=ast.unparse(call),
        key=(call.func.id, args, kwargs),
        value=expected,
        shown=f"{where}: {text}",
    )


def _claims_in(text: str, origin: str, known: set[str]) -> Iterator[_Claim]:
    """``assert f(...) == value`` and ``self.assertEqual(f(...), value)`` with literal
    arguments and value, outside tests marked skip or xfail."""
    tree = parse_or_none(text)
    if tree is None:
        return
    lines = text.splitlines()
    skipped: set[int] = set()
    scopes: dict[int, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            span = range(fn.lineno, (fn.end_lineno or fn.lineno) + 1)
            marks = " ".join(ast.unparse(d) for d in fn.decorator_list)
            if "skip" in marks or "xfail" in marks:
                skipped.update(span)
            scopes.update({i: fn.name for i in span})
    for n in ast.walk(tree):
        pair: tuple[ast.expr, ast.expr] | None = None
        if isinstance(n, ast.Assert) and isinstance(n.test, ast.Compare):
            cmp = n.test
            if len(cmp.ops) == 1 and isinstance(cmp.ops[0], ast.Eq):
                pair = (cmp.left, cmp.comparators[0])
        elif isinstance(n, ast.Call) and _call_name(n) == "assertEqual" and len(n.args) == 2:
            pair = (n.args[0], n.args[1])
        if pair is None or not isinstance(n, ast.stmt | ast.expr) or n.lineno in skipped:
            continue
        at = n.lineno
        scope = f" ({scopes[at]})" if at in scopes else ""
        where = f"{origin}, line {at}{scope}"
        line = lines[at - 1].strip()
        for call, value in (pair, pair[::-1]):
            claim = _claim(call, value, known, line, where)
            if claim is not None:
                yield claim
                break


def check_contradictions(
    tests: Sequence[UserTest],
    examples: Sequence[Example],
    known: set[str],
    extra: Sequence[TestCase] = (),
) -> None:
    """A ``ConfigError`` quoting two tests (yours, or a spec's example) that expect different
    values from the same call of the code under test (a function in ``known``): no code can
    pass both."""
    claims: list[_Claim] = []
    for t in tests:
        claims += _claims_in(t.text, t.origin, known)
    for case in extra:
        if case.code is not None:
            claims += _claims_in(case.code, f"test {case.id}", known)
    for ex in examples:
        tree = parse_or_none(f"{ex.call} == {ex.expected}")
        if tree is None or not tree.body or not isinstance(tree.body[0], ast.Expr):
            continue
        cmp = tree.body[0].value
        if isinstance(cmp, ast.Compare):
            text = f"{ex.call} -> {ex.expected}"
            c = _claim(cmp.left, cmp.comparators[0], known, text, "the spec's example")
            claims += [c] if c is not None else []
    seen: dict[tuple[str, str, str], _Claim] = {}
    clashes: list[tuple[_Claim, _Claim]] = []
    for c in claims:
        first = seen.setdefault(c.key, c)
        if first is not c and _differ(first.value, c.value):
            clashes.append((first, c))
    if not clashes:
        return
    shown = "\n".join(f"  {a.shown}\n  {b.shown}\n  (both call {a.call})" for a, b in clashes[:3])
    raise ConfigError(
        "Your tests contradict each other: they expect different values from the same call, "
        f"so no code can pass both:\n{shown}\nFix or remove the wrong one. No model was asked."
    )


def _differ(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except Exception:  # a value that cannot be compared contradicts nothing
        return False
