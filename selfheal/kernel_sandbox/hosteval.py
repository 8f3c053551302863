"""The host's side of a test: a small, restricted evaluator for the parts of a test that do not
name the candidate, over the values its process sent back; it evaluates only what cannot reach
the host's files, programs or state (an allow-list, bounds on sizes and steps: docs/sandbox.md,
"Verdicts on the host")."""

from __future__ import annotations

import ast
import builtins
import importlib
import math
import operator
from collections.abc import Callable, Iterable
from typing import Any

from selfheal.kernel_sandbox.hostnames import (
    DENIED_ATTRS,
    DENIED_MODULE_ATTRS,
    HOST_MODULES,
    SAFE_BUILTINS,
    refused_method,
)
from selfheal.kernel_sandbox.values import NotPlain, data_equal

MAX_STEPS = 200_000
"""Most nodes one host evaluation may visit."""
MAX_SIZE = 10_000_000
"""Largest sequence, string or array a host evaluation may build."""

_BIN: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}


class HostEvalError(Exception):
    """The test asks the host for something it does not evaluate."""


class _Module:
    """A module as the host side sees it: public attributes, minus the denied ones."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.mod = importlib.import_module(name)


def _check_size(v: Any) -> Any:
    n = getattr(v, "size", None) if type(v).__module__.startswith("numpy") else None
    if isinstance(v, str | bytes | list | tuple | set | dict) and len(v) > MAX_SIZE:
        raise HostEvalError("a value over the host's size bound")
    if type(n) is int and n > MAX_SIZE:
        raise HostEvalError("an array over the host's size bound")
    return v


def _guard_binop(op: type[ast.operator], a: Any, b: Any) -> None:
    if (
        op is ast.Pow
        and isinstance(b, int)
        and isinstance(a, int)
        and abs(b) > 10_000
        and abs(a) > 1
    ):
        raise HostEvalError("a power too large for the host")
    if op is ast.Mult:
        for seq, n in ((a, b), (b, a)):
            sized = isinstance(seq, str | bytes | list | tuple) and isinstance(n, int)
            if sized and len(seq) * n > MAX_SIZE:
                raise HostEvalError("a repetition too large for the host")
    if op is ast.LShift and isinstance(b, int) and b > 100_000:
        raise HostEvalError("a shift too large for the host")


def _bounded_range(*args: Any) -> range:
    r = range(*args)
    if len(r) > MAX_SIZE:
        raise HostEvalError("a range too long for the host")
    return r


def _type_of(obj: Any) -> type:
    """``type(obj)``: the one-argument form only (three arguments would make a class)."""
    return type(obj)


_HOST_BUILTINS: dict[str, Any] = {"range": _bounded_range, "type": _type_of}
"""Builtins the host gives in a narrower form."""


class HostEval:
    """Evaluates host-side statements and expressions over ``env`` (names -> values)."""

    def __init__(self, env: dict[str, Any] | None = None) -> None:
        self.env: dict[str, Any] = dict(env or {})
        self.steps = 0
        self.current: ast.stmt | None = None  # the statement being run, for tracebacks

    def run(
        self, stmts: Iterable[ast.stmt], assert_hook: Callable[[ast.Assert, HostEval], None]
    ) -> None:
        for s in stmts:
            self.step()
            self.current = s
            if isinstance(s, ast.Import | ast.ImportFrom):
                self.imports(s)
            elif isinstance(s, ast.Assign):
                value = self.expr(s.value)
                for target in s.targets:
                    self.bind(target, value)
            elif isinstance(s, ast.Assert):
                assert_hook(s, self)
            elif isinstance(s, ast.Expr):
                self.expr(s.value)
            elif not isinstance(s, ast.Pass):
                raise HostEvalError(f"the host does not run {type(s).__name__} statements")

    def imports(self, s: ast.Import | ast.ImportFrom) -> None:
        if isinstance(s, ast.Import):
            for a in s.names:
                top = a.name.split(".")[0]
                if HOST_MODULES.get(a.name) != a.name:
                    raise HostEvalError(f"the host does not import {a.name}")
                self.env[a.asname or top] = _Module(a.name if a.asname else top)
            return
        if s.level or s.module is None or HOST_MODULES.get(s.module) != s.module:
            raise HostEvalError(f"the host does not import from {s.module}")
        mod = _Module(s.module)
        for a in s.names:
            self.env[a.asname or a.name] = self.attribute(mod, a.name)

    def bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if target.id.startswith("_") and not target.id.startswith("__sh_"):
                raise HostEvalError(f"the host does not bind {target.id}")
            self.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            vals = list(value)
            if len(vals) != len(target.elts):
                raise ValueError(f"cannot unpack {len(vals)} values into {len(target.elts)}")
            for t, v in zip(target.elts, vals, strict=True):
                self.bind(t, v)
        else:
            raise HostEvalError("the host binds plain names only")

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise HostEvalError("the test's host side took too many steps")

    def expr(self, node: ast.expr) -> Any:
        self.step()
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.List):
            return _check_size([self.expr(e) for e in node.elts])
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e) for e in node.elts)
        if isinstance(node, ast.Set):
            return {self.expr(e) for e in node.elts}
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise HostEvalError("the host does not unpack ** in a dict")
            return {
                self.expr(k): self.expr(v)
                for k, v in zip(node.keys, node.values, strict=True)
                if k is not None
            }
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left), self.expr(node.right)
            _guard_binop(type(node.op), a, b)
            _no_candidate_object(a, b)
            return _check_size(_BIN[type(node.op)](a, b))
        if isinstance(node, ast.UnaryOp):
            v = self.expr(node.operand)
            if isinstance(node.op, ast.Not):
                return not truth(v)
            _no_candidate_object(v)
            return _UNARY[type(node.op)](v)
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for e in node.values:
                result = self.expr(e)
                if truth(result) is isinstance(node.op, ast.Or):
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self.expr(node.left)
            if len(node.ops) == 1:  # its own value: elementwise for arrays, as in Python
                return compare(type(node.ops[0]).__name__, left, self.expr(node.comparators[0]))
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.expr(right_node)
                if not truth(compare(type(op).__name__, left, right)):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.expr(node.body) if truth(self.expr(node.test)) else self.expr(node.orelse)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.expr(node.value), node.attr)
        if isinstance(node, ast.Subscript):
            obj = self.expr(node.value)
            _no_candidate_object(obj)
            return obj[self.expr(node.slice)]
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self.expr(p) for p in parts))
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return self.comprehension(node)
        if isinstance(node, ast.JoinedStr):
            return "".join(self.fstring_part(v) for v in node.values)
        if isinstance(node, ast.Starred):
            raise HostEvalError("the host does not unpack * here")
        raise HostEvalError(f"the host does not evaluate {type(node).__name__}")

    def fstring_part(self, v: ast.expr) -> str:
        if isinstance(v, ast.Constant):
            return str(v.value)
        assert isinstance(v, ast.FormattedValue)
        value = self.expr(v.value)
        _no_candidate_object(value)
        conv = {-1: value, 115: str(value), 114: repr(value), 97: ascii(value)}[v.conversion]
        spec = "" if v.format_spec is None else self.expr(v.format_spec)
        if not isinstance(value, int | float | complex | str) and spec:
            raise HostEvalError("the host formats only numbers and strings with a spec")
        return format(conv, spec)

    def name(self, name: str) -> Any:
        if name in self.env:
            return self.env[name]
        if name in SAFE_BUILTINS:
            return _HOST_BUILTINS.get(name) or getattr(builtins, name)
        if name in HOST_MODULES:
            return _Module(HOST_MODULES[name])
        raise HostEvalError(f"the host does not know the name {name!r}")

    def attribute(self, obj: Any, attr: str) -> Any:
        if attr.startswith("_") or attr in DENIED_ATTRS:
            raise HostEvalError(f"the host does not read the attribute {attr!r}")
        if isinstance(obj, _Module):
            if attr in DENIED_MODULE_ATTRS:
                raise HostEvalError(f"the host does not use {obj.name}.{attr}")
            if obj.name in ("numpy", "pandas") and attr == "testing":
                return _Module(f"{obj.name}.testing")
            value = getattr(obj.mod, attr)
            if type(value).__name__ == "module":
                raise HostEvalError(f"the host does not use the module {obj.name}.{attr}")
            return value
        _no_candidate_object(obj)
        why = refused_method(attr)
        if why is not None:
            raise HostEvalError(f"the host does not call {attr} (it {why})")
        return getattr(obj, attr)

    def call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if isinstance(fn, _Module) or type(fn).__name__ == "module":
            raise HostEvalError("a module is not callable")
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.expr(a.value))
            else:
                args.append(self.expr(a))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.expr(k.value))
            else:
                kwargs[k.arg] = self.expr(k.value)
        for v in (*args, *kwargs.values()):
            _no_candidate_object(v)
        sized = _sizes_too_large(args, kwargs)
        if sized and (getattr(fn, "__module__", None) or "").startswith(("numpy", "pandas")):
            raise HostEvalError("a size too large for the host")
        return _check_size(fn(*args, **kwargs))

    def comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> Any:
        saved = dict(self.env)
        out: list[Any] = []

        def loop(i: int) -> None:
            if i == len(node.generators):
                self.step()
                if isinstance(node, ast.DictComp):
                    out.append((self.expr(node.key), self.expr(node.value)))
                else:
                    out.append(self.expr(node.elt))
                if len(out) > MAX_SIZE:
                    raise HostEvalError("a comprehension too long for the host")
                return
            gen = node.generators[i]
            if gen.is_async:
                raise HostEvalError("the host does not run async comprehensions")
            for item in self.expr(gen.iter):
                self.step()
                self.bind(gen.target, item)
                if all(truth(self.expr(c)) for c in gen.ifs):
                    loop(i + 1)

        try:
            loop(0)
        finally:
            self.env = saved
        if isinstance(node, ast.ListComp | ast.GeneratorExp):
            return out
        if isinstance(node, ast.SetComp):
            return set(out)
        return dict(out)


def _sizes_too_large(args: list[Any], kwargs: dict[str, Any]) -> bool:
    for v in (*args, *kwargs.values()):
        dims = v if isinstance(v, tuple | list) and all(type(x) is int for x in v) else (v,)
        if all(type(x) is int for x in dims) and dims and math.prod(dims) > MAX_SIZE:
            return True
    return False


def _no_candidate_object(*vals: Any) -> None:
    for v in vals:
        if isinstance(v, NotPlain):
            raise AssertionError(f"the test used {v!r} on the host; only plain values cross")


def truth(v: Any) -> bool:
    """``bool(v)``, refused for a value the host could not read."""
    if isinstance(v, NotPlain):
        raise AssertionError(f"the test asked for the truth of {v!r}")
    return bool(v)


def compare(op: str, a: Any, b: Any, top: bool = False) -> Any:
    """``a <op> b`` on the host; ``top`` for an assert's own comparison, where ``==`` is
    ``values.data_equal`` (arrays and frames compare as data)."""
    if op == "Is":
        return a is b
    if op == "IsNot":
        return a is not b
    if op in ("Eq", "NotEq"):
        if isinstance(a, NotPlain) or isinstance(b, NotPlain):
            return op == "NotEq"
        if top:
            return data_equal(a, b) is (op == "Eq")
        return a == b if op == "Eq" else a != b
    if op in ("In", "NotIn"):
        if isinstance(b, NotPlain):
            raise AssertionError(f"cannot look into {b!r}")
        found = False if isinstance(a, NotPlain) else a in b
        return found if op == "In" else not found
    if isinstance(a, NotPlain) or isinstance(b, NotPlain):
        raise AssertionError(f"cannot order {a!r} against {b!r}")
    return {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge}[op](a, b)


__all__ = ["HOST_MODULES", "SAFE_BUILTINS", "HostEval", "HostEvalError", "compare", "truth"]
