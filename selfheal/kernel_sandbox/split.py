"""A test split in two so that its verdict is decided on the host: the *candidate side* runs in the
candidate's process, the *host side* (expected values, comparisons, the assert) in ``hosteval``;
``split_test`` is None for a test that runs whole in the candidate's process (docs/sandbox.md,
"Verdicts on the host")."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from selfheal._parse import parse_or_none
from selfheal.kernel_sandbox.hostnames import HOST_MODULES, SAFE_BUILTINS

VALUE = "__sh_v__"
"""The candidate side's recorder: ``__sh_v__(lambda: expr)`` evaluates ``expr`` and keeps
its value (or the exception it raised) for the host."""
SLOT = "__sh_v{}"
"""The host side's name for the candidate side's ``k``-th value."""

_HOST_METHODS = frozenset(
    {"equals", "all", "any", "tolist", "item", "to_list", "to_dict", "to_numpy"}
)
"""Methods of a returned value that run on the host (data, not the candidate's behaviour)."""
_HOST_NODES = (
    ast.Constant,
    ast.Name,
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Dict,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Call,
    ast.ListComp,
    ast.SetComp,
    ast.GeneratorExp,
    ast.DictComp,
    ast.comprehension,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.Starred,
    ast.keyword,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
)


@dataclass(frozen=True)
class SplitTest:
    """A test in two parts (see the module docstring)."""

    candidate: str
    """The candidate side: statements run in the candidate's process, wrapped as
    ``def __sh_test__(__sh_v__): ...``; each value the host needs is ``__sh_v__(lambda: ...)``."""
    host: ast.Module
    """The host side: statements over the names ``__sh_v0``, ``__sh_v1``, ..."""
    values: int
    """How many values the candidate side records."""

    @property
    def wrapped(self) -> str:
        """The candidate side as the kernel runs it."""
        body = "\n".join("    " + ln for ln in self.candidate.splitlines())
        return f"def __sh_test__({VALUE}):\n{body}\n"


class _NotSplit(Exception):
    pass


def _free_names(node: ast.AST) -> set[str]:
    """Names read in ``node``, less those its comprehensions bind."""
    bound: set[str] = set()
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        for gen in node.generators:
            bound |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
    out: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            out.add(child.id)
        else:
            out |= _free_names(child)
    return out - bound


class _Splitter:
    def __init__(self, shadowed: frozenset[str]) -> None:
        self.shadowed = shadowed  # builtin and module names the candidate's code redefines
        self.host_names: set[str] = set()
        self.cand_names: set[str] = set()  # bound on the candidate side
        self.cand: list[str] = []  # candidate-side statements
        self.shared: list[tuple[set[str], str]] = []  # host assignments the candidate may need
        self.host: list[ast.stmt] = []
        self.slots = 0

    def is_candidate_name(self, name: str) -> bool:
        if name in self.cand_names:
            return True
        if name in self.host_names:
            return False
        if name in self.shadowed:  # as in Python: the module's own ``round`` wins
            return True
        return name not in SAFE_BUILTINS and name not in HOST_MODULES

    def names_candidate(self, node: ast.AST) -> bool:
        tree = ast.Expression(body=node) if isinstance(node, ast.expr) else node
        return any(self.is_candidate_name(n) for n in _free_names(tree))

    def is_object(self, node: ast.expr) -> bool:
        """An expression whose value lives in the candidate's process."""
        if isinstance(node, ast.Name):
            return self.is_candidate_name(node.id)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _HOST_METHODS:
                return False
            return self.is_object(f)
        if isinstance(node, ast.Attribute | ast.Subscript):
            return self.is_object(node.value)
        return False

    def record(self, node: ast.expr) -> ast.expr:
        k = self.slots
        self.slots += 1
        self.cand.append(f"{VALUE}(lambda: {ast.unparse(node)})")
        return ast.Name(id=SLOT.format(k), ctx=ast.Load())

    def peel(self, node: ast.expr) -> ast.expr:
        """``node`` for the host, its candidate parts recorded and replaced by slots."""
        if not self.names_candidate(node):
            _host_only(node)
            return node
        if self.is_object(node):
            return self.record(node)
        if isinstance(
            node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp | ast.Lambda
        ):
            raise _NotSplit
        f = node.func if isinstance(node, ast.Call) else None
        if isinstance(node, ast.Call) and isinstance(f, ast.Attribute) and f.attr in _HOST_METHODS:
            if any(
                self.names_candidate(a) for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                raise _NotSplit  # the result's method would take the test's data
            method = ast.Attribute(value=self.peel(f.value), attr=f.attr, ctx=ast.Load())
            return ast.Call(func=method, args=node.args, keywords=node.keywords)
        if not isinstance(node, _HOST_NODES):
            raise _NotSplit
        return _replace_children(node, self.peel)

    def statement(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Pass):
            return
        if isinstance(s, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in s.names):
                raise _NotSplit
            names = {(a.asname or a.name).split(".")[0] for a in s.names}
            if _host_import(s):
                self.host.append(s)
                self.host_names |= names
                self.cand_names -= names
            else:
                self.cand_names |= names
            self.cand.append(ast.unparse(s))
            return
        if isinstance(s, ast.Assign) and all(_plain_target(t) for t in s.targets):
            targets = {n.id for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if self.names_candidate(s.value):
                self.cand.append(ast.unparse(s))
                self.cand_names |= targets
                self.host_names -= targets
            else:
                _host_only(s.value)
                self.host.append(s)
                self.shared.append((targets, ast.unparse(s)))
                self.cand.append(f"#shared {len(self.shared) - 1}")
                self.host_names |= targets
                self.cand_names -= targets
            return
        if isinstance(s, ast.Expr):
            if not self.names_candidate(s.value):
                _host_only(s.value)
                self.host.append(s)
            elif self.is_object(s.value):
                self.cand.append(ast.unparse(s))  # a call for its effect (or a smoke call)
            else:
                self.host.append(ast.Expr(value=self.peel(s.value)))
            return
        if isinstance(s, ast.Assert):
            test = self.peel(s.test)
            msg = s.msg if s.msg is not None and not self.names_candidate(s.msg) else None
            if msg is not None:
                _host_only(msg)
            checked = ast.Assert(test=test, msg=msg, lineno=s.lineno, col_offset=s.col_offset)
            checked.sh_src = getattr(s, "sh_src", None) or ast.unparse(s.test)  # type: ignore[attr-defined]
            checked.sh_func = getattr(s, "sh_func", "<module>")  # type: ignore[attr-defined]
            self.host.append(checked)
            return
        raise _NotSplit

    def candidate_source(self) -> str:
        """The candidate side, with only the host assignments it reads (its inputs)."""
        needed: set[str] = set()
        body = [ln for ln in self.cand if not ln.startswith("#shared ")]
        for ln in body:
            tree = parse_or_none(ln)
            if tree is not None:
                needed |= _free_names(tree)
        keep: set[int] = set()
        for i in range(len(self.shared) - 1, -1, -1):  # later assignments may read earlier ones
            targets, src = self.shared[i]
            if targets & needed:
                keep.add(i)
                tree = parse_or_none(src)
                if tree is not None:
                    needed |= _free_names(tree)
        out = []
        for ln in self.cand:
            if ln.startswith("#shared "):
                i = int(ln.split()[1])
                if i in keep:
                    out.append(self.shared[i][1])
            else:
                out.append(ln)
        return "\n".join(out) or "pass"


def _plain_target(t: ast.expr) -> bool:
    if isinstance(t, ast.Name):
        return not t.id.startswith("_")
    return isinstance(t, ast.Tuple | ast.List) and all(_plain_target(e) for e in t.elts)


def _host_import(s: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(s, ast.Import):
        return all(HOST_MODULES.get(a.name) == a.name for a in s.names)
    return not s.level and s.module is not None and HOST_MODULES.get(s.module) == s.module


def _host_only(node: ast.AST) -> None:
    """Refuse (``_NotSplit``) a host part that ``hosteval`` would not evaluate."""
    for n in ast.walk(node):
        if not isinstance(n, _HOST_NODES):
            raise _NotSplit
        if isinstance(n, ast.Attribute) and n.attr.startswith("_"):
            raise _NotSplit
        if isinstance(n, ast.Name) and n.id.startswith("__") and not n.id.startswith("__sh_v"):
            raise _NotSplit


def _replace_children(node: ast.expr, fn: object) -> ast.expr:
    """A copy of ``node`` whose direct expression children went through ``fn``."""
    assert callable(fn)
    new = ast.fix_missing_locations(type(node)(**{f: getattr(node, f) for f in node._fields}))
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.expr):
            setattr(new, field, fn(value))
        elif isinstance(value, list):
            setattr(
                new, field, [fn(v) if isinstance(v, ast.expr) else _keyword(v, fn) for v in value]
            )
    return new


def _keyword(v: object, fn: object) -> object:
    if isinstance(v, ast.keyword):
        assert callable(fn)
        return ast.keyword(arg=v.arg, value=fn(v.value))
    return v


def _inline_check(body: list[ast.stmt]) -> list[ast.stmt]:
    """HumanEval's form, ``def check(candidate): ...`` then ``check(f)``: the check's body
    with ``candidate`` read as ``f`` (a test that defines any other function is not split)."""
    defs = [s for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    if not defs:
        return body
    last = body[-1] if body else None
    if not (
        len(defs) == 1
        and isinstance(defs[0], ast.FunctionDef)
        and not defs[0].decorator_list
        and len(defs[0].args.args) == 1
        and not (defs[0].args.vararg or defs[0].args.kwarg or defs[0].args.kwonlyargs)
        and isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Name)
        and last.value.func.id == defs[0].name
        and len(last.value.args) == 1
        and not last.value.keywords
        and isinstance(last.value.args[0], ast.Name)
    ):
        raise _NotSplit
    fn, target = defs[0], last.value.args[0].id
    param = fn.args.args[0].arg

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(id=target, ctx=node.ctx) if node.id == param else node

    if any(isinstance(n, ast.Name) and n.id == fn.name for s in fn.body for n in ast.walk(s)):
        raise _NotSplit  # a recursive check
    for n in ast.walk(fn):  # messages show the check's own text (``candidate(5) == 10``)
        if isinstance(n, ast.Assert):
            n.sh_src = ast.unparse(n.test)  # type: ignore[attr-defined]
            n.sh_func = fn.name  # type: ignore[attr-defined]
    inlined = [Rename().visit(s) for s in fn.body]
    rest = [s for s in body[:-1] if s is not fn]
    return [*rest, *inlined]


def _reserved(n: ast.AST) -> bool:
    """A name the harness reserves (``__sh_*``)."""
    name = n.id if isinstance(n, ast.Name) else n.arg if isinstance(n, ast.arg) else ""
    return name.startswith("__sh_")


@functools.lru_cache(maxsize=1024)
def shadowing(candidate: str) -> frozenset[str]:
    """The builtin and module names of the host side (``hostnames``) that ``candidate``'s top
    level binds to something else: a function or class of its own (``def round(x): ...``), an
    assignment, or an import under another meaning (``from math import pow``; ``import numpy
    as np`` is no shadow). A test's use of such a name is the candidate's, as in Python."""
    tree = parse_or_none(candidate)
    if tree is None:
        return frozenset()
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import):
            bound |= {
                a.asname for a in node.names if a.asname and HOST_MODULES.get(a.asname) != a.name
            }
        elif isinstance(node, ast.ImportFrom):
            bound |= {a.asname or a.name for a in node.names}
    return frozenset(bound & (SAFE_BUILTINS | HOST_MODULES.keys()))


@functools.lru_cache(maxsize=4096)
def split_test(code: str, shadowed: frozenset[str] = frozenset()) -> SplitTest | None:
    """``code`` split for a verdict on the host, or None (it then runs whole in the
    candidate's process); ``shadowed``: the host names the candidate redefines
    (``shadowing``). Cached: the same tests run on every candidate."""
    tree = parse_or_none(code)
    if tree is None or any(_reserved(n) for n in ast.walk(tree)):
        return None
    s = _Splitter(shadowed)
    try:
        for stmt in _inline_check(list(tree.body)):
            s.statement(stmt)
    except _NotSplit:
        return None
    if not any(isinstance(h, ast.Assert | ast.Expr) for h in s.host) and s.slots == 0:
        return None  # nothing the host judges: a smoke test runs as before
    host = ast.fix_missing_locations(ast.Module(body=s.host, type_ignores=[]))
    return SplitTest(candidate=s.candidate_source(), host=host, values=s.slots)
