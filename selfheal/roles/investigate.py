"""The debugger's investigation (``HealConfig.debugger_steps`` > 0): a bounded think, call a tool,
observe loop before the structured diagnosis, natively or as JSON replies; it stops at
``diagnose``, a repeated call, or nothing usable (docs/loop.md, "The debugger's investigation")."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, model_validator

from selfheal.context import Context
from selfheal.errors import MalformedReply, ProviderError
from selfheal.llm.base import Completion, Message, ToolCall, supports_tools
from selfheal.llm.parsing import fold_choice
from selfheal.roles._calls import CallLog, ask_for_json, ask_with_tools
from selfheal.roles.debugtools import (
    FINISH,
    TOOL_ARGS,
    TOOL_NAMES,
    TOOLS,
    call_text,
    candidate_lines,
    run_tool,
)
from selfheal.state import HealState
from selfheal.state.repair import DebugTool, Probe
from selfheal.testsuite import failure_lines

NODE = "diagnose"
PROMPT = "debugger_step"
_CHOICES = (*TOOL_NAMES, FINISH)


class StepReply(BaseModel):
    """One investigation step on the structured path (``prompts/debugger_step.yaml``): the
    tool and its arguments (only the tool's own fields matter)."""

    thought: str = ""
    tool: Annotated[
        Literal["run_snippet", "inspect_function", "diff_candidates", "trace_failure", "diagnose"],
        BeforeValidator(fold_choice(_CHOICES, FINISH)),
    ] = "diagnose"
    code: str = ""
    name: str = ""
    a: str = ""
    b: str = ""
    test_id: str = ""

    @model_validator(mode="before")
    @classmethod
    def _old_shape(cls, data: Any) -> Any:
        """An older reply, ``{"action": "run", "code": ...}``, reads as ``run_snippet``."""
        if isinstance(data, dict) and "tool" not in data and "action" in data:
            data = dict(data)
            run = str(data.pop("action")).strip().lower() == "run"
            data["tool"] = "run_snippet" if run else FINISH
        return data

    def arguments(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in TOOL_ARGS[self.tool]}


def _variables(state: HealState, native: bool, probes: list[Probe], left: int) -> dict[str, Any]:
    current = state.current
    assert current is not None and current.report is not None
    return {
        "native": native,
        "code": current.code,
        "failures": failure_lines(state, current.report),
        "candidates": candidate_lines(state) if len(state.candidates) > 1 else [],
        "probes": [p.model_dump() for p in probes],
        "remaining": left,
    }


_TOOL_CALL_TEXT = re.compile(r"\{.*\}", re.DOTALL)


def salvage(text: str) -> ToolCall | None:
    """A tool call written as text instead of a native call: a ``<tool_call>`` block or a JSON
    object with ``name`` and ``arguments``, or a step reply's shape (``tool`` and its
    fields)."""
    m = _TOOL_CALL_TEXT.search(text or "")
    if m is None:
        return None
    try:
        data = json.loads(m.group(0))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("tool"), str):
        try:
            step = StepReply.model_validate(data)
        except ValueError:
            return None
        return ToolCall(name=step.tool, arguments=json.dumps(step.arguments()))
    if isinstance(data.get("name"), str):
        args = data.get("arguments", {})
        args = args if isinstance(args, dict) else {}
        return ToolCall(name=data["name"], arguments=json.dumps(args))
    return None


def _parse_arguments(call: ToolCall) -> dict[str, str] | None:
    try:
        data = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


class _Native:
    """The native path: one conversation of tool calls and tool results."""

    def __init__(self, state: HealState, ctx: Context, log: CallLog) -> None:
        self.state, self.ctx, self.log = state, ctx, log
        self.variables = _variables(state, True, [], state.config.repairs.debugger_steps)
        self.history: list[Message] = []  # the calls so far and their results
        self.call = ToolCall(name="")  # the call being answered

    async def next(self, step: int) -> tuple[str, str, dict[str, str] | None, Completion] | None:
        c = await ask_with_tools(
            self.state,
            self.log,
            TOOLS,
            role="debugger",
            prompt=PROMPT,
            variables=self.variables,
            extra=self.history,
            max_tokens=384,
        )
        call = c.tool_calls[0] if c.tool_calls else salvage(c.text)
        if call is None:
            self.log.info(self.state, "the debugger called no tool: investigation ends")
            return None
        if not c.tool_calls:
            self.log.info(self.state, "a tool call written as text was read")
        self.call = call.model_copy(update={"id": call.id or f"call_{step + 1}"})
        return c.text.strip(), call.name, _parse_arguments(call), c

    def observed(self, text: str, left: int) -> None:
        self.history += [
            Message(role="assistant", content="", tool_calls=(self.call,)),
            Message(
                role="tool",
                content=f"{text}\n\n({left} tool call(s) left; call diagnose when you know enough)",
                tool_call_id=self.call.id,
            ),
        ]


async def _structured(
    state: HealState, log: CallLog, probes: list[Probe], left: int
) -> tuple[str, str, dict[str, str] | None, Completion] | None:
    try:
        reply = await ask_for_json(
            state,
            log,
            StepReply,
            role="debugger",
            prompt=PROMPT,
            max_tokens=384,
            variables=_variables(state, False, probes, left),
        )
    except MalformedReply as exc:
        log.failure(state, "debugger", exc)
        return None
    last = log.completions[-1][1]
    return reply.thought.strip(), reply.tool, reply.arguments(), last


async def investigate(state: HealState, ctx: Context, log: CallLog) -> tuple[Probe, ...]:
    """Up to ``debugger_steps`` tool calls on the latest attempt (see the module docstring).
    Returns them as probes, oldest first; the diagnosis goes ahead with what was found."""
    current = state.current
    assert current is not None and current.report is not None
    budget = state.config.repairs.debugger_steps
    if budget <= 0 or not current.report.load.ok:
        return ()
    native_ok = state.config.repairs.debugger_tool_calls == "native"
    native = (
        _Native(state, ctx, log) if native_ok and supports_tools(ctx.provider("debugger")) else None
    )
    probes: list[Probe] = []
    seen: set[str] = set()
    for step in range(budget):
        left = budget - step
        got = None
        if native is not None:
            try:
                got = await native.next(step)
            except ProviderError as exc:  # e.g. a server whose chat template has no tools
                log.failure(state, "debugger", exc)
                log.info(state, "native tool calls failed: going on with JSON replies")
                native = None
        if native is None:
            got = await _structured(state, log, probes, left)
        if got is None:
            break
        thought, tool, args, completion = got
        if tool == FINISH:
            break
        key = json.dumps([tool, args], sort_keys=True)
        if key in seen:
            log.info(state, "the debugger repeated a tool call: investigation ends")
            break
        seen.add(key)
        if args is None:
            text, seconds, runs = "the arguments are not a JSON object; call the tool again", 0.0, 0
            args = {}
        else:
            obs = await run_tool(tool, args, state, ctx)
            text, seconds, runs = obs.text, obs.seconds, obs.runs
        name: DebugTool = tool if tool in TOOL_NAMES else "unknown"  # type: ignore[assignment]
        probe = Probe(
            thought=thought[:500],
            code=call_text(tool, args),
            observation=text,
            tool=name,
            arguments=args,
            seconds=seconds,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            native=native is not None,
        )
        probes.append(probe)
        _tool_event(log, state, step, probe, runs)
        if native is not None:
            native.observed(text, left - 1)
    return tuple(probes)


def _tool_event(log: CallLog, state: HealState, step: int, probe: Probe, runs: int) -> None:
    call = probe.code.splitlines()[0][:80] + (" ..." if "\n" in probe.code else "")
    first = probe.observation.strip().splitlines()[0][:120] if probe.observation.strip() else ""
    log.executions += runs
    log.emit(
        state,
        "tool",
        f"tool {step + 1}: {call} -> {first}" + (f" ({runs} sandbox run(s))" if runs != 1 else ""),
        duration=probe.seconds,
    )
