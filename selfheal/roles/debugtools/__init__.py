"""The debugger's tools: what it may do to a failing candidate before it diagnoses
(``roles/investigate.py`` runs the loop). ``TOOLS`` describes each as the model reads it;
``run_snippet`` runs through ``_common.snippet``, the others live in a module of their own name,
whose docstring says what it shows. Code runs only in the kernel sandbox. Every observation is
bounded (``LIMITS``) so that a few of them fit the model's context next to the spec and the code."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from selfheal.context import Context
from selfheal.llm.base import ToolSpec
from selfheal.roles.debugtools._common import cut, observation, snippet
from selfheal.roles.debugtools.diff_candidates import candidate_lines, diff_candidates
from selfheal.roles.debugtools.inspect_function import inspect_function
from selfheal.roles.debugtools.trace_failure import trace_failure
from selfheal.state import HealState
from selfheal.state.repair import DebugTool

__all__ = [
    "CONTEXT_CHARS",
    "FINISH",
    "LIMITS",
    "TOOLS",
    "TOOL_ARGS",
    "TOOL_NAMES",
    "Observation",
    "call_text",
    "candidate_lines",
    "observation",
    "observation_limit",
    "run_tool",
]

FINISH = "diagnose"
"""The pseudo-tool that ends the investigation."""

TOOL_NAMES: tuple[DebugTool, ...] = tuple(t for t in get_args(DebugTool) if t != "unknown")

LIMITS: Mapping[str, int] = {
    "run_snippet": 600,
    "inspect_function": 1400,
    "diff_candidates": 1600,
    "trace_failure": 2400,
}
"""Most characters of each tool's observation."""

CONTEXT_CHARS = 5400
"""Characters of observations one investigation may add to the model's context, shared by
its calls (a three-call investigation fits the local model's 4,096-token slot)."""


def _spec(tool: str, description: str, /, **params: str) -> ToolSpec:
    return ToolSpec(
        name=tool,
        description=description,
        parameters={
            "type": "object",
            "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
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

TOOL_ARGS: Mapping[str, tuple[str, ...]] = {
    t.name: tuple(t.parameters.get("required", ())) for t in TOOLS
}
"""Each tool -> the names of its arguments (all required)."""


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


def observation_limit(tool: str, steps: int) -> int:
    """Most characters of one observation in an investigation of ``steps`` calls: the tool's
    own limit, or its share of ``CONTEXT_CHARS`` (never below 600)."""
    return min(LIMITS.get(tool, 600), max(600, CONTEXT_CHARS // max(1, steps)))


async def run_tool(
    tool: str, args: Mapping[str, Any], state: HealState, ctx: Context, *, limit: int = 0
) -> Observation:
    """Run one tool call on the attempt under diagnosis; the observation is cut at ``limit``
    characters (default: the tool's share for ``debugger_steps`` calls). A call that cannot
    run (an unknown tool, a missing argument, an unknown id) gets an observation that says
    so and what to call instead."""
    started = time.perf_counter()
    limit = limit or observation_limit(tool, state.config.repairs.debugger_steps)
    text, runs = await _dispatch(tool, {k: str(v) for k, v in args.items()}, state, ctx, limit)
    return Observation(cut(text, limit), time.perf_counter() - started, runs)


async def _dispatch(
    tool: str, args: dict[str, str], state: HealState, ctx: Context, limit: int
) -> tuple[str, int]:
    if tool not in TOOL_NAMES:
        return f"there is no tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}", 0
    missing = [k for k in TOOL_ARGS[tool] if not args.get(k, "").strip()]
    if missing:
        return f"{tool} needs {', '.join(missing)}", 0
    if tool == "run_snippet":
        return observation(await snippet(state, ctx, args["code"].strip())), 1
    if tool == "inspect_function":
        return await inspect_function(args["name"].strip(), state, ctx)
    if tool == "diff_candidates":
        return await diff_candidates(args["a"].strip(), args["b"].strip(), state, ctx)
    return await trace_failure(args["test_id"].strip().strip("[]`'\""), state, ctx, limit)
