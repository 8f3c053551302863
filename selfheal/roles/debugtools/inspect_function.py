"""``inspect_function(name)``: a function of the candidate read from its AST (signature,
docstring, numbered body; complexity: McCabe's cyclomatic number, branches, loops, nesting,
recursion, the calls it makes; parsing runs nothing), and what the name is once the
candidate has loaded (a snippet in the sandbox)."""

from __future__ import annotations

import ast
import re

import mccabe

from selfheal._parse import ast_parse, literal
from selfheal.context import Context
from selfheal.roles._source import DEFS, FUNCS
from selfheal.roles.debugtools._common import current, cut, snippet
from selfheal.state import HealState

_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _find(tree: ast.Module, name: str) -> ast.AST | None:
    """The definition of ``name`` (``f``, ``C.m``, or a nested function's own name)."""
    parts = name.split(".")
    scope: list[ast.stmt] = tree.body
    for i, part in enumerate(parts):
        node = next((n for n in scope if isinstance(n, DEFS) and n.name == part), None)
        if node is None:
            break
        if i == len(parts) - 1:
            return node
        scope = node.body
    return next((n for n in ast.walk(tree) if isinstance(n, FUNCS) and n.name == parts[-1]), None)


def _complexity(node: ast.AST, name: str) -> str:
    visitor = mccabe.PathGraphingAstVisitor()
    visitor.preorder(ast.Module(body=[node], type_ignores=[]), visitor)  # type: ignore[list-item]
    cyclomatic = max((g.complexity() for g in visitor.graphs.values()), default=1)
    branches = sum(isinstance(n, ast.If | ast.IfExp | ast.Match) for n in ast.walk(node))
    loops = sum(
        isinstance(n, ast.For | ast.AsyncFor | ast.While | ast.comprehension)
        for n in ast.walk(node)
    )
    calls = sorted(
        {
            n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
        }
    )
    own = name.split(".")[-1]
    recursive = own in calls
    return (
        f"complexity: cyclomatic {cyclomatic} (McCabe); {branches} branch(es), {loops} loop(s), "
        f"nesting depth {_depth(node)}; recursive: {'yes' if recursive else 'no'}"
        + (f"; calls {', '.join(calls[:12])}" if calls else "")
    )


_NESTING = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)


def _depth(node: ast.AST, level: int = 0) -> int:
    deepest = level
    for child in ast.iter_child_nodes(node):
        inner = level + 1 if isinstance(child, _NESTING) else level
        deepest = max(deepest, _depth(child, inner))
    return deepest


async def inspect_function(name: str, state: HealState, ctx: Context) -> tuple[str, int]:
    """The observation (see the module docstring) and the sandbox runs it made."""
    _, code = current(state)
    if not _NAME.fullmatch(name):
        return f"{name!r} is not a function name (e.g. median or Stack.push)", 0
    try:
        tree = ast_parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return f"the candidate does not parse: {e}", 0
    node = _find(tree, name)
    if node is None:
        defined = [n.name for n in ast.walk(tree) if isinstance(n, DEFS)]
        return (
            f"the candidate defines no {name!r}; it defines: {', '.join(defined) or 'nothing'}",
            0,
        )
    assert isinstance(node, DEFS)
    lines = code.splitlines()
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    last = node.end_lineno or node.lineno
    out: list[str] = []
    if isinstance(node, ast.ClassDef):
        methods = [n.name for n in node.body if isinstance(n, FUNCS)]
        out.append(
            f"class {node.name} (lines {first}-{last}); methods: {', '.join(methods) or 'none'}"
        )
    else:
        head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        out.append(f"{head} {node.name}({ast.unparse(node.args)}){returns}  (lines {first}-{last})")
    doc = ast.get_docstring(node)
    out.append(f"docstring: {cut(' '.join(doc.split()), 300)}" if doc else "docstring: none")
    if not isinstance(node, ast.ClassDef):
        try:
            out.append(_complexity(node, name))
        except RecursionError:  # an absurdly deep expression: the facts above still hold
            out.append("complexity: not computed (the code nests too deeply)")
    body = [f"{i:>3} | {lines[i - 1]}" for i in range(first, min(last, first + 39) + 1)]
    if last > first + 39:
        body.append(f"    … {last - first - 39} more line(s)")
    out += ["body:", *body]
    probe = (
        "import inspect as _sh_inspect\n"
        f"_sh_obj = {name}\n"
        "(type(_sh_obj).__name__, str(_sh_inspect.signature(_sh_obj)) "
        "if callable(_sh_obj) else '')"
    )
    res = await snippet(state, ctx, probe)
    if res.outcome == "passed" and res.value:
        try:
            kind, signature = literal(res.value)
            out.append(f"once loaded: a {kind}" + (f", signature {signature}" if signature else ""))
        except (ValueError, SyntaxError, TypeError):
            out.append(f"once loaded: {res.value[:120]}")
    else:
        out.append(f"once loaded: {res.exc_type or res.outcome}: {res.message[:160]}")
    return "\n".join(out), 1
