"""The debugger's ReAct investigation: think, run a snippet against the candidate, observe.

With ``HealConfig.debugger_steps`` > 0 the debugger does not diagnose from the failing tests
alone: it may first run up to that many snippets in the sandbox (the candidate loaded, the
same limits as the tests) and read what comes back, one hypothesis at a time. The probes then
go into its final structured diagnosis (``prompts/debugger.yaml``) and stay on the
``Diagnosis`` and the timeline. The snippets are model-written code like the candidate: they
run in the kernel sandbox, never in this process.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator

from selfheal.context import Context
from selfheal.errors import MalformedReply
from selfheal.kernel_sandbox.types import SnippetResult
from selfheal.llm.parsing import fold_choice
from selfheal.roles._calls import CallLog, ask_for_json, info, record_failure
from selfheal.state import HealState, Probe
from selfheal.testsuite import failure_lines, limits_for

__all__ = ["StepReply", "investigate", "observation"]

NODE = "diagnose"
_MAX_SNIPPET = 2000
_MAX_OBSERVATION = 600


class StepReply(BaseModel):
    """One investigation step (``prompts/debugger_step.yaml``)."""

    thought: str = ""
    action: Annotated[
        Literal["run", "diagnose"], BeforeValidator(fold_choice(("run", "diagnose"), "diagnose"))
    ] = "diagnose"
    code: str = ""


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
    return "; ".join(parts)[:_MAX_OBSERVATION]


def investigate(state: HealState, ctx: Context, log: CallLog) -> tuple[Probe, ...]:
    """Up to ``debugger_steps`` probes of the latest attempt. Stops when the debugger says
    ``diagnose``, repeats a snippet, or replies with something unusable (the diagnosis then
    goes ahead with what was found so far)."""
    current = state.current
    assert current is not None and current.report is not None
    budget = state.config.debugger_steps
    if budget <= 0 or not current.report.load.ok:
        return ()
    failures = failure_lines(state, current.report)
    probes: list[Probe] = []
    for step in range(budget):
        try:
            reply = ask_for_json(
                ctx,
                state,
                log,
                StepReply,
                node=NODE,
                role="debugger",
                prompt="debugger_step",
                max_tokens=256,
                variables={
                    "spec": state.spec.text,
                    "code": current.code,
                    "failures": failures,
                    "probes": [p.model_dump() for p in probes],
                    "remaining": budget - step,
                },
            )
        except MalformedReply as exc:
            record_failure(log, ctx, state, NODE, "debugger", exc)
            break
        code = reply.code.strip()
        if reply.action != "run" or not code:
            break
        if any(code == p.code for p in probes):
            info(log, ctx, state, NODE, "the debugger repeated a probe: investigation ends")
            break
        res = ctx.executor.run_snippet(
            code[:_MAX_SNIPPET],
            setup=current.code,
            timeout=state.config.test_timeout,
            limits=limits_for(state),
        )
        probe = Probe(thought=reply.thought.strip()[:500], code=code, observation=observation(res))
        probes.append(probe)
        first = code.splitlines()[0][:80] + (" ..." if "\n" in code else "")
        info(log, ctx, state, NODE, f"probe {step + 1}: {first} -> {probe.observation[:120]}")
    return tuple(probes)
