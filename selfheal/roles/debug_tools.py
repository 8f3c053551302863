"""The debugger's tools: what it may do to a failing candidate before it diagnoses
(``roles/investigate.py`` runs the loop). Code runs only in the kernel sandbox:

- ``run_snippet(code)``: run a snippet after the candidate loaded; its value, printed output
  or exception;
- ``inspect_function(name)``: signature, docstring, numbered body and complexity (McCabe,
  branches, loops, nesting, recursion, calls) read from the candidate's AST (parsing runs
  nothing), and what the name is once the candidate has loaded (in the sandbox);
- ``diff_candidates(a, b)``: the code diff between two candidates, the probe inputs on which
  they return different things and the tests they do not agree on (outputs recorded when the
  population ran; probes one of them lacks are run now);
- ``trace_failure(test_id)``: the test (or a probe input) run again with the candidate traced
  line by line: the lines that ran, in which call, with the locals at each step.

Every observation is bounded (``LIMITS``) so that a few of them fit the model's context
next to the spec and the code.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mccabe

from selfheal.context import Context
from selfheal.diffs import unified_diff
from selfheal.kernel_sandbox.traces import trace_text
from selfheal.kernel_sandbox.types import (
    AssertTest,
    ProbeCall,
    SnippetResult,
    TracingExecutor,
    run_many,
)
from selfheal.llm.base import ToolSpec
from selfheal.state import Candidate, DebugTool, HealState
from selfheal.testsuite import limits_for

__all__ = [
    "FINISH",
    "LIMITS",
    "TOOLS",
    "TOOL_NAMES",
    "Observation",
    "call_text",
    "candidate_lines",
    "observation",
    "run_tool",
]

FINISH = "diagnose"
"""The pseudo-tool that ends the investigation."""

TOOL_NAMES: tuple[DebugTool, ...] = (
    "run_snippet",
    "inspect_function",
    "diff_candidates",
    "trace_failure",
)

LIMITS: Mapping[str, int] = {
    "run_snippet": 600,
    "inspect_function": 1400,
    "diff_candidates": 1600,
    "trace_failure": 2400,
}
"""Most characters of each tool's observation."""

_MAX_SNIPPET = 2000
_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _spec(tool: str, description: str, /, **params: str) -> ToolSpec:
    return ToolSpec(
        name=tool,
        description=description,
        parameters={
            "type": "object",
            "properties": {k: _string(v) for k, v in params.items()},
            "required": list(params),
        },
    )


TOOLS: tuple[ToolSpec, ...] = (
    _spec(
        "run_snippet",
        "Run a short Python snippet after the candidate has been loaded (its functions are "
        "defined) and see the value of its last expression, what it printed, or the exception.",
        code="Python statements; the last line may be an expression whose value you want",
    ),
    _spec(
        "inspect_function",
        "Read a function of the candidate: signature, docstring, numbered body, complexity "
        "(branches, loops, nesting, recursion, calls), and what the name is once it loaded.",
        name="the function's name, e.g. median or Stack.push",
    ),
    _spec(
        "diff_candidates",
        "Compare two candidates: their code diff, the probe inputs on which they return "
        "different things, and the tests they do not agree on.",
        a="a candidate id, e.g. c1 (or 'current')",
        b="another candidate id, e.g. c3",
    ),
    _spec(
        "trace_failure",
        "Run a failing test again with the candidate traced line by line: which lines ran, "
        "in which call (recursion shown by indentation), and the local variables at each step.",
        test_id="the id of a failing test, e.g. ex2 (or a probe input's id, e.g. p3)",
    ),
    ToolSpec(
        name=FINISH,
        description="Stop investigating: you know enough to diagnose.",
        parameters={"type": "object", "properties": {}},
    ),
)
"""The tools as a model with native tool calling sees them (``diagnose`` ends the loop)."""


@dataclass(frozen=True)
class Observation:
    """What a tool call showed, and what it cost."""

    text: str
    """The observation, bounded by ``LIMITS``."""
    seconds: float
    """Wall time of the tool (its sandbox runs)."""
    runs: int = 0
    """Sandbox runs it made."""


def call_text(tool: str, args: Mapping[str, Any]) -> str:
    """The call as one line of text, e.g. ``trace_failure(test_id='ex2')``."""
    if tool == "run_snippet":
        return str(args.get("code", ""))
    inner = ", ".join(f"{k}={str(v)[:60]!r}" for k, v in args.items())
    return f"{tool}({inner})"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def observation(res: SnippetResult) -> str:
    """What the debugger reads back from one snippet: value, printed output, or exception."""
    parts: list[str] = []
    if res.stdout.strip():
        parts.append(f"printed {res.stdout.strip()[:300]!r}")
    if res.outcome == "passed":
        parts.append(f"value {res.value}" if res.value is not None else "ran without error")
    elif res.outcome == "timeout":
        parts.append(f"timed out after {res.duration:.1f}s")
    else:
        parts.append(f"raised {res.exc_type or res.outcome}: {res.message[:300]}")
    return "; ".join(parts)


def _current(state: HealState) -> tuple[str, str]:
    """The id (``current`` for a run without a population) and code of the attempt under
    diagnosis."""
    current = state.current
    assert current is not None
    return current.candidate or "current", current.code


def _snippet(state: HealState, ctx: Context, code: str) -> SnippetResult:
    return ctx.executor.run_snippet(
        code[:_MAX_SNIPPET],
        setup=_current(state)[1],
        timeout=state.config.test_timeout,
        limits=limits_for(state),
    )


def run_tool(tool: str, args: Mapping[str, Any], state: HealState, ctx: Context) -> Observation:
    """Run one tool call on the attempt under diagnosis. A call that cannot run (an unknown
    tool, a missing argument, an unknown id) gets an observation that says so and what to
    call instead."""
    started = time.perf_counter()
    text, runs = _dispatch(tool, {k: str(v) for k, v in args.items()}, state, ctx)
    limit = LIMITS.get(tool, 600)
    return Observation(_cut(text, limit), time.perf_counter() - started, runs)


def _dispatch(
    tool: str, args: dict[str, str], state: HealState, ctx: Context
) -> tuple[str, int]:
    if tool not in TOOL_NAMES:
        return f"there is no tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}", 0
    need = {
        "run_snippet": ("code",),
        "inspect_function": ("name",),
        "diff_candidates": ("a", "b"),
        "trace_failure": ("test_id",),
    }[tool]
    missing = [k for k in need if not args.get(k, "").strip()]
    if missing:
        return f"{tool} needs {', '.join(missing)}", 0
    if tool == "run_snippet":
        return observation(_snippet(state, ctx, args["code"].strip())), 1
    if tool == "inspect_function":
        return _inspect(args["name"].strip(), state, ctx)
    if tool == "diff_candidates":
        return _diff(args["a"].strip(), args["b"].strip(), state, ctx)
    return _trace(args["test_id"].strip().strip("[]`'\""), state, ctx)


# ------------------------------------------------------------------------- inspect_function


def _find(tree: ast.Module, name: str) -> ast.AST | None:
    """The definition of ``name`` (``f``, ``C.m``, or a nested function's own name)."""
    parts = name.split(".")
    scope: list[ast.stmt] = tree.body
    for i, part in enumerate(parts):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == part
            ),
            None,
        )
        if node is None:
            break
        if i == len(parts) - 1:
            return node
        scope = node.body
    return next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == parts[-1]
        ),
        None,
    )


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


def _inspect(name: str, state: HealState, ctx: Context) -> tuple[str, int]:
    _, code = _current(state)
    if not _NAME.fullmatch(name):
        return f"{name!r} is not a function name (e.g. median or Stack.push)", 0
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return f"the candidate does not parse: {e}", 0
    node = _find(tree, name)
    if node is None:
        defined = [
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        ]
        return f"the candidate defines no {name!r}; it defines: {', '.join(defined) or 'nothing'}", 0
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    lines = code.splitlines()
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    last = node.end_lineno or node.lineno
    out: list[str] = []
    if isinstance(node, ast.ClassDef):
        methods = [n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        out.append(f"class {node.name} (lines {first}-{last}); methods: {', '.join(methods) or 'none'}")
    else:
        head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        out.append(f"{head} {node.name}({ast.unparse(node.args)}){returns}  (lines {first}-{last})")
    doc = ast.get_docstring(node)
    out.append(f"docstring: {_cut(' '.join(doc.split()), 300)}" if doc else "docstring: none")
    if not isinstance(node, ast.ClassDef):
        out.append(_complexity(node, name))
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
    res = _snippet(state, ctx, probe)
    if res.outcome == "passed" and res.value:
        try:
            kind, signature = ast.literal_eval(res.value)
            out.append(f"once loaded: a {kind}" + (f", signature {signature}" if signature else ""))
        except (ValueError, SyntaxError, TypeError):
            out.append(f"once loaded: {res.value[:120]}")
    else:
        out.append(f"once loaded: {res.exc_type or res.outcome}: {res.message[:160]}")
    return "\n".join(out), 1


# -------------------------------------------------------------------------- diff_candidates


def _by_id(state: HealState, ref: str) -> Candidate | None:
    ref = ref.strip().strip("`'\"")
    if ref.lower() in ("current", "this", "it"):
        ref = _current(state)[0]
    return next((c for c in state.candidates if c.id == ref), None)


def _status(state: HealState, c: Candidate) -> str:
    rep = c.report
    if rep is None:
        return "not run"
    if not rep.load.ok:
        return f"does not load ({rep.load.exc_type})"
    active = {t.id: t for t in state.active_tests}
    failing = [r.test_id for r in rep.results if r.test_id in active and r.outcome != "passed"]
    if not failing:
        return "passes every test"
    shown = [f"{tid} (trusted)" if active[tid].trusted else tid for tid in failing[:4]]
    return f"fails {', '.join(shown)}" + (" …" if len(failing) > 4 else "")


def candidate_lines(state: HealState, limit: int = 8) -> list[str]:
    """One line per candidate (the latest ``limit``), for the debugger's prompt."""
    current = _current(state)[0]
    out = []
    for c in state.candidates[-limit:]:
        mark = " ← the one being diagnosed" if c.id == current else ""
        out.append(f"{c.id} ({c.origin}, round {c.round}): {_status(state, c)}{mark}")
    return out


def _diff(a_ref: str, b_ref: str, state: HealState, ctx: Context) -> tuple[str, int]:
    a, b = _by_id(state, a_ref), _by_id(state, b_ref)
    known = ", ".join(c.id for c in state.candidates) or "none"
    if a is None or b is None:
        missing = a_ref if a is None else b_ref
        return f"there is no candidate {missing!r}; the candidates are {known}", 0
    if a.id == b.id:
        return f"{a.id} is the same candidate; pick another one of {known}", 0
    out = [f"{a.id} ({a.origin}): {_status(state, a)}; {b.id} ({b.origin}): {_status(state, b)}"]
    diff = unified_diff(a.code, b.code, a=a.id, b=b.id).splitlines()
    if not diff:
        out.append("the code is the same")
    else:
        out += diff[:40] + ([f"… {len(diff) - 40} more diff line(s)"] if len(diff) > 40 else [])
    runs = 0
    loaded = all(c.report is not None and c.report.load.ok for c in (a, b))
    behaviour = {a.id: dict(a.behaviour), b.id: dict(b.behaviour)}
    lacking = [p for p in state.probes if p.id not in behaviour[a.id] or p.id not in behaviour[b.id]]
    if loaded and lacking:
        probes = [ProbeCall(id=p.id, expr=p.call) for p in lacking]
        reports = run_many(
            ctx.executor,
            [(a.code, probes), (b.code, probes)],
            timeout=state.config.test_timeout,
            limits=limits_for(state),
        )
        runs = 2
        for c, rep in zip((a, b), reports, strict=True):
            for r in rep.results:
                behaviour[c.id][r.test_id] = r.value if r.value is not None else f"<{r.outcome}>"
    compared = [p for p in state.probes if p.id in behaviour[a.id] and p.id in behaviour[b.id]]
    split = [p for p in compared if behaviour[a.id][p.id] != behaviour[b.id][p.id]]
    if split:
        out.append(f"they return different things on {len(split)} of {len(compared)} probe inputs:")
        out += [
            f"  {p.call}: {a.id} -> {_cut(behaviour[a.id][p.id], 80)} | "
            f"{b.id} -> {_cut(behaviour[b.id][p.id], 80)}"
            for p in split[:8]
        ]
    elif compared:
        out.append(f"they return the same on all {len(compared)} probe inputs")
    if a.report is not None and b.report is not None:
        oa = {r.test_id: r.outcome for r in a.report.results}
        ob = {r.test_id: r.outcome for r in b.report.results}
        split_tests = [
            t.id for t in state.active_tests if t.id in oa and t.id in ob and oa[t.id] != ob[t.id]
        ]
        if split_tests:
            out.append(
                "tests they do not agree on: "
                + "; ".join(f"{t}: {a.id} {oa[t]}, {b.id} {ob[t]}" for t in split_tests[:8])
            )
    return "\n".join(out), runs


# ---------------------------------------------------------------------------- trace_failure


def _trace(ref: str, state: HealState, ctx: Context) -> tuple[str, int]:
    executor = ctx.executor
    if not isinstance(executor, TracingExecutor):
        return (
            f"trace_failure is not available: this sandbox ({type(executor).__name__}) cannot "
            "trace; use run_snippet",
            0,
        )
    t = state.test(ref)
    test: AssertTest | ProbeCall
    if t is not None:
        test = AssertTest(id=t.id, code=t.source)
        shown = t.source.strip()
    else:
        p = next((p for p in state.probes if p.id == ref), None)
        if p is None:
            current = state.current
            failing = (
                [r.test_id for r in current.report.results if r.outcome != "passed"]
                if current is not None and current.report is not None
                else []
            )
            return (
                f"there is no test {ref!r}; the failing tests are "
                f"{', '.join(failing[:8]) or 'none'}",
                0,
            )
        test = ProbeCall(id=p.id, expr=p.call)
        shown = p.call
    code = _current(state)[1]
    result = executor.run_trace(
        code, test, timeout=state.config.test_timeout, limits=limits_for(state)
    )
    head = f"trace of {test.id}: `{_cut(' '.join(shown.split()), 160)}`\n"
    return head + trace_text(result, code, max_chars=LIMITS["trace_failure"] - len(head)), 1
