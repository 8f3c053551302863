"""What the debugger's tools share: the attempt under diagnosis, running a snippet against
it in the sandbox, and cutting text to a length."""

from __future__ import annotations

from selfheal.context import Context
from selfheal.kernel_sandbox.types import SnippetResult
from selfheal.state import HealState
from selfheal.testsuite import limits_for

MAX_SNIPPET = 2000
"""Most characters of a snippet sent to the sandbox."""


def cut(text: str, limit: int) -> str:
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


def current(state: HealState) -> tuple[str, str]:
    """The id (``current`` for a run without a population) and code of the attempt under
    diagnosis."""
    current = state.current
    assert current is not None
    return current.candidate or "current", current.code


async def snippet(state: HealState, ctx: Context, code: str) -> SnippetResult:
    return await ctx.executor.arun_snippet(
        code[:MAX_SNIPPET],
        setup=current(state)[1],
        timeout=state.config.limits.test_timeout,
        limits=limits_for(state),
    )
