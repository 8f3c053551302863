"""Probe inputs made from the spec alone (mutations of its examples, the calls inside model-written
tests, values from the signature's type hints); a probe carries no expected value (docs/loop.md).
Pure and deterministic."""

from __future__ import annotations

import ast
import contextlib
import datetime
import decimal
import random
from collections.abc import Iterable, Sequence
from typing import Any

from selfheal._parse import parse_or_none
from selfheal.example_values import PutValues
from selfheal.expected import expected_problem, import_lines
from selfheal.kernel_sandbox.hosteval import HostEval
from selfheal.kernel_sandbox.types import ProbeCall
from selfheal.state import ProbeInput, Spec, TestCase

_MAX_REPR = 400
"""Longest argument text a mutated probe may have (a probe is an input, not a stress test)."""


def _parse_call(call: str, name: str | None) -> tuple[list[Any], dict[str, Any]] | None:
    """Literal positional and keyword arguments of ``name(...)``, or None when not literal."""
    tree = parse_or_none(call.strip(), "eval")
    node = tree.body if tree else None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    if name is not None and node.func.id != name:
        return None
    if any(k.arg is None for k in node.keywords):
        return None
    try:
        args = [_value(a) for a in node.args]
        kwargs = {k.arg: _value(k.value) for k in node.keywords if k.arg}
    except Exception:  # a value the host cannot build: no mutations of this example
        return None
    return args, kwargs


def _value(node: ast.expr) -> Any:
    """A literal, or a value built without the candidate (``datetime.date(2024, 3, 5)``,
    ``Decimal('1.10')``), evaluated by the host's own evaluator."""
    with contextlib.suppress(ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ast.literal_eval(node)
    src = ast.unparse(node)
    problem = expected_problem(src)
    if problem is not None:
        raise ValueError(problem)
    ev = HostEval()
    imports = parse_or_none("\n".join(import_lines(src)))
    ev.run(imports.body if imports else (), assert_hook=_no_assert)
    return ev.expr(node)


def _built(node: ast.expr) -> bool:
    """Whether the host builds this argument's value without the candidate, and without error."""
    try:
        _value(node)
    except Exception:
        return False
    return True


def _no_assert(node: ast.Assert, ev: HostEval) -> None:
    raise ValueError("an import line holds no assert")


def _variants(value: Any, rng: random.Random, depth: int = 0) -> list[Any]:
    """Values of the same shape as ``value``: the edge cases and small changes a spec's
    rules usually turn on (empty, one element, order, sign, case, duplicates)."""
    out: list[Any] = []
    if isinstance(value, datetime.date):  # datetime.datetime too
        day = datetime.timedelta(days=1)
        out = [value + day, value - day, value + 7 * day, value.replace(day=1)]
        out += [value.replace(month=12, day=31), value.replace(year=2024, month=2, day=29)]
    elif isinstance(value, decimal.Decimal):
        out = [value * 2, -value, decimal.Decimal(0), value + decimal.Decimal("0.005")]
    elif isinstance(value, bool):
        out = [not value]
    elif isinstance(value, int):
        out = [value + 1, value - 1, 0, -value, value * 2 + 1, 1]
    elif isinstance(value, float):
        out = [value * 2, -value, 0.0, value + 0.5, round(value / 3, 3)]
    elif isinstance(value, str):
        out = ["", value[::-1], value.upper(), value.lower(), value[1:], value + value[:1]]
        if value:
            out += [value[0], " " + value, value.replace(value[0], value[0] * 2, 1)]
    elif isinstance(value, list | tuple):
        seq = list(value)
        cands: list[list[Any]] = [[], seq[::-1], seq[:1], seq[1:], seq + seq[:1]]
        with contextlib.suppress(TypeError):
            cands.append(sorted(seq))
            cands.append(sorted(seq, reverse=True))
        if seq and depth < 2:
            i = rng.randrange(len(seq))
            for v in _variants(seq[i], rng, depth + 1)[:2]:
                cands.append([*seq[:i], v, *seq[i + 1 :]])
        out = [type(value)(c) if isinstance(value, tuple) else c for c in cands]
    elif isinstance(value, dict):
        items = list(value.items())
        out = [{}, dict(items[1:]), dict(items[:1])]
    elif isinstance(value, set | frozenset):
        out = [type(value)(), type(value)(list(value)[:1])]
    return [v for v in out if v != value or type(v) is not type(value)]


def _call_text(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def example_mutations(spec: Spec, limit: int, *, seed: int = 0) -> list[str]:
    """Calls made by changing one argument of one example at a time, spread over the examples,
    at most ``limit``, deterministic for a given ``seed``."""
    name = spec.entry_point
    if not name or limit <= 0:
        return []
    rng = random.Random(seed)
    seen = {_normalize(e.call) for e in spec.examples}
    per_example: list[list[str]] = []
    for ex in spec.examples:
        parsed = _parse_call(ex.call, name)
        if parsed is None:
            continue
        args, kwargs = parsed
        calls: list[str] = []
        for i, a in enumerate(args):
            for v in _variants(a, rng):
                calls.append(_call_text(name, [*args[:i], v, *args[i + 1 :]], kwargs))
        for k, a in kwargs.items():
            for v in _variants(a, rng):
                calls.append(_call_text(name, args, {**kwargs, k: v}))
        rng.shuffle(calls)
        per_example.append(calls)
    out: list[str] = []
    while per_example and len(out) < limit:  # round robin over the examples
        for calls in list(per_example):
            if not calls:
                per_example.remove(calls)
                continue
            c = calls.pop(0)
            key = _normalize(c)
            if key in seen or len(c) > _MAX_REPR + len(name):
                continue
            seen.add(key)
            out.append(c)
            if len(out) >= limit:
                break
    return out


def with_values(source: str) -> list[ast.stmt]:
    """The statements of a test's source, each with the values its names were given earlier
    in place of their reads (``df = pd.DataFrame(...)`` then ``f(df)`` reads as
    ``f(pd.DataFrame(...))``): a value built without the candidate, until the name is assigned
    again or changed (``df['b'] = 2``, ``xs.append(3)``). A function's body (a pytest test) is
    read the same way, from what the module gave."""
    tree = parse_or_none(source)
    out: list[ast.stmt] = []

    def read(body: list[ast.stmt], bound: dict[str, str]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                read(stmt.body, dict(bound))
                continue
            put = PutValues(bound).visit(stmt)
            assert isinstance(put, ast.stmt)
            out.append(put)
            changed = [
                n.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)
            ] + [
                n.value.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Attribute | ast.Subscript)
                and isinstance(n.value, ast.Name)
                and not isinstance(stmt, ast.Assert)
            ]
            for name in changed:
                bound.pop(name, None)
            if (
                isinstance(put, ast.Assign)
                and len(put.targets) == 1
                and isinstance(put.targets[0], ast.Name)
                and _built(put.value)
            ):
                bound[put.targets[0].id] = ast.unparse(put.value)

    read(tree.body if tree is not None else [], {})
    return out


def calls_in_test(source: str, name: str | None) -> list[str]:
    """The calls of ``name`` inside a test's source (``assert f(2) == 4`` -> ``f(2)``,
    ``assert f(date(2024, 3, 5)) == 1`` -> ``f(date(2024, 3, 5))``, ``df = pd.DataFrame(...)``
    then ``assert f(df) == 3`` -> ``f(pd.DataFrame(...))``): those whose arguments are values
    built without the candidate (``expected.expected_problem``), not a value only the test's
    run makes."""
    if not name:
        return []
    calls = []
    for stmt in with_values(source):
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == name
            ):
                args = [*node.args, *(k.value for k in node.keywords)]
                if any(k.arg is None for k in node.keywords) or not all(map(_built, args)):
                    continue  # a value only the code makes, or one that cannot be built at
                    # all (`date(2021, 2, 29)`): not an input to compare on
                calls.append(ast.unparse(node))
    return calls


def probe_call(id: str, call: str) -> ProbeCall:
    """The sandbox's probe for ``call``, with the imports its argument values need."""
    return ProbeCall(id=id, expr=call, setup="\n".join(import_lines(call)))


_SIMPLE: dict[str, list[Any]] = {
    "int": [0, 1, -3, 7, 12, 100],
    "float": [0.0, 1.5, -2.25, 10.0],
    "str": ["", "a", "abc", "Hello World", "aAbB 12"],
    "bool": [True, False],
}


def _values_for(annotation: ast.expr | None, rng: random.Random, depth: int = 0) -> list[Any]:
    """A few values for a type annotation (``List[int]``, ``str``, ``Dict[str, int]`` ...)."""
    if annotation is None or depth > 2:
        return []
    if isinstance(annotation, ast.Name) and annotation.id in _SIMPLE:
        return list(_SIMPLE[annotation.id])
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        parsed = parse_or_none(annotation.value, "eval")
        return _values_for(parsed.body, rng, depth) if parsed else []
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        outer = annotation.value.id.lower()
        inner = annotation.slice
        if outer in ("list", "sequence", "iterable", "tuple", "set"):
            elem = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner
            pool = _values_for(elem, rng, depth + 1)
            if not pool:
                return []
            lists = [[], pool[:1], [pool[-1], pool[0], pool[-1]]]
            lists += [[rng.choice(pool) for _ in range(rng.randint(2, 6))] for _ in range(3)]
            if outer == "tuple":
                return [tuple(x) for x in lists]
            if outer == "set":
                return [set(x) for x in lists]
            return lists
        if outer == "dict" and isinstance(inner, ast.Tuple) and len(inner.elts) == 2:
            keys = _values_for(inner.elts[0], rng, depth + 1)
            vals = _values_for(inner.elts[1], rng, depth + 1)
            if not keys or not vals:
                return []
            return [{}, {keys[1 % len(keys)]: vals[0]}, dict(zip(keys, vals, strict=False))]
        if outer == "optional":
            return [None, *_values_for(inner, rng, depth + 1)[:3]]
    return []


def signature_values(spec: Spec, limit: int, *, seed: int = 0) -> list[str]:
    """Calls built from the ``def`` line's type hints, when every parameter has a usable one."""
    name = spec.entry_point
    if not (name and spec.signature) or limit <= 0:
        return []
    tree = parse_or_none(spec.signature.rstrip().rstrip(":") + ":\n    ...")
    fn = tree.body[0] if tree and tree.body else None
    if not isinstance(fn, ast.FunctionDef):
        return []
    rng = random.Random(seed)
    pools = [_values_for(a.annotation, rng) for a in fn.args.args]
    if not pools or any(not p for p in pools):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for _ in range(limit * 4):
        call = _call_text(name, [rng.choice(p) for p in pools], {})
        if call not in seen:
            seen.add(call)
            out.append(call)
        if len(out) >= limit:
            break
    return out


def _normalize(call: str) -> str:
    tree = parse_or_none(call.strip(), "eval")
    return ast.dump(tree) if tree else call.strip()


def merge_probes(
    existing: Sequence[ProbeInput], new: Iterable[tuple[str, str]], *, limit: int, round: int
) -> tuple[ProbeInput, ...]:
    """``existing`` plus the new ``(call, origin)`` pairs that are not already there, up to
    ``limit`` probes in all."""
    seen = {_normalize(p.call) for p in existing}
    out = list(existing)
    n = len(existing)
    for call, origin in new:
        if len(out) >= limit:
            break
        key = _normalize(call)
        if key in seen:
            continue
        seen.add(key)
        n += 1
        out.append(ProbeInput(id=f"p{n}", call=call, origin=origin, added_at=round))  # type: ignore[arg-type]
    return tuple(out)


def planned_probes(spec: Spec, tests: Sequence[TestCase], limit: int) -> list[tuple[str, str]]:
    """The mechanical probes of a spec: example mutations first, then the calls inside
    model-written tests, then signature values when there are no examples."""
    pairs: list[tuple[str, str]] = []
    for t in tests:
        if not t.trusted:
            pairs += [(c, "model_test") for c in calls_in_test(t.source, spec.entry_point)]
    pairs += [(c, "mutation") for c in example_mutations(spec, limit)]
    if not spec.examples:
        pairs += [(c, "signature") for c in signature_values(spec, limit)]
    return pairs
