"""Generator: the first version from the spec, and repairs from a diagnosis."""

from __future__ import annotations

import ast
import difflib
from typing import Literal

from selfheal.errors import MalformedReply
from selfheal.graph.context import Context
from selfheal.llm.base import Message
from selfheal.roles._calls import CallLog, ask_for_code, info, record_failure
from selfheal.roles.testcode import failure_lines
from selfheal.state import Diagnosis, HealState, Proposal


def diff(old: str, new: str) -> str:
    """Unified diff between two versions of the code."""
    return "".join(
        difflib.unified_diff(
            [line + "\n" for line in old.splitlines()],
            [line + "\n" for line in new.splitlines()],
            fromfile="before.py",
            tofile="after.py",
        )
    )


def with_prelude(code: str, prelude: str) -> str:
    """Prepend the spec's imports (``from typing import List``) that the code lacks."""
    if not prelude:
        return code
    missing = [line for line in prelude.splitlines() if line.strip() and line.strip() not in code]
    return "\n".join([*missing, code]) if missing else code


def normalized(code: str) -> str:
    """The code's AST dump (comments and formatting ignored), or the stripped text."""
    try:
        return ast.dump(ast.parse(code))
    except SyntaxError:
        return code.strip()


def entry_point_of(code: str) -> str | None:
    """The last top-level function the code defines (the usual shape of a reply)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return names[-1] if names else None


def generate(state: HealState, ctx: Context) -> HealState:
    """Write the first version (or a new one after a reviewer rejected a proposal)."""
    log = CallLog()
    spec = state.spec
    lessons = [lesson.text for lesson in state.lessons] if state.config.lessons else []
    try:
        code, text = ask_for_code(
            ctx,
            state,
            log,
            node="generate",
            role="generator",
            prompt="generator",
            entry_point=spec.entry_point,
            variables={
                "spec": spec.text,
                "signature": spec.signature or "",
                "entry_point": spec.entry_point or "",
                "examples": [f"{e.call} == {e.expected}" for e in spec.examples],
                "lessons": lessons,
                "feedback": state.feedback,
            },
        )
    except MalformedReply as exc:
        record_failure(log, ctx, state, "generate", "generator", exc)
        return log.apply(state, status="failed", error=f"The generator gave no usable code: {exc}")
    code = with_prelude(code, spec.prelude)
    if spec.entry_point is None:
        name = entry_point_of(code)
        if name:
            state = state.model_copy(update={"spec": spec.model_copy(update={"entry_point": name})})
    proposal = Proposal(
        kind="initial", code=code, diff=diff("", code), strategy="initial", rationale=_prose(text)
    )
    return log.apply(state, pending=proposal, feedback="")


def repair(state: HealState, ctx: Context) -> HealState:
    """Propose a corrected version from the latest diagnosis, failures and lessons."""
    log = CallLog()
    spec = state.spec
    current = state.current
    assert current is not None, "repair needs an attempt"
    diagnosis: Diagnosis | None = state.diagnoses[-1] if state.diagnoses else None
    failures = failure_lines(state, current.report) if current.report is not None else []
    if current.report is not None and not current.report.load.ok:
        load = current.report.load
        failures.insert(
            0, f"the code does not load: {load.exc_type} line {load.line}: {load.message}"
        )
    variables = {
        "spec": spec.text,
        "signature": spec.signature or "",
        "entry_point": spec.entry_point or "",
        "code": current.code,
        "failures": failures,
        "diagnosis": (
            f"{diagnosis.root_cause} Fix: {diagnosis.repair_strategy}" if diagnosis else ""
        ),
        "lessons": [lesson.text for lesson in state.lessons] if state.config.lessons else [],
        "feedback": state.feedback,
    }
    try:
        code, text = ask_for_code(
            ctx,
            state,
            log,
            node="repair",
            role="generator",
            prompt="repair",
            entry_point=spec.entry_point,
            variables=variables,
        )
    except MalformedReply as exc:
        record_failure(log, ctx, state, "repair", "generator", exc)
        return log.apply(
            state, status="failed", error=f"The generator gave no usable repair: {exc}"
        )
    code = with_prelude(code, spec.prelude)
    seen = {normalized(a.code) for a in state.attempts}
    if normalized(code) in seen:
        # at temperature 0 the same prompt gives the same answer: ask once more, sampling, and
        # say that this fix was already tried; if it repeats again the loop has converged
        again = Message(
            role="user",
            content="That code is identical to a version that already failed these tests. "
            "Write a different fix.",
        )
        try:
            code2, text = ask_for_code(
                ctx,
                state,
                log,
                node="repair",
                role="generator",
                prompt="repair",
                entry_point=spec.entry_point,
                variables=variables,
                temperature=max(0.7, state.config.temperature),
                extra=[Message(role="assistant", content=text), again],
            )
        except MalformedReply as exc:
            record_failure(log, ctx, state, "repair", "generator", exc)
            code2 = code
        code2 = with_prelude(code2, spec.prelude)
        if normalized(code2) in seen:
            info(
                log,
                ctx,
                state,
                "repair",
                "the repair repeats an earlier version twice: no new idea, stopping",
            )
            return log.apply(state, stop_reason="repairs repeat earlier versions")
        code = code2
    strategy: Literal["repair", "critic_repair"] = (
        "critic_repair" if diagnosis is not None and diagnosis.source == "critic" else "repair"
    )
    proposal = Proposal(
        kind="repair",
        code=code,
        previous_code=current.code,
        diff=diff(current.code, code),
        diagnosis=diagnosis,
        strategy=strategy,
        rationale=_prose(text),
    )
    return log.apply(state, pending=proposal, feedback="")


def _prose(text: str) -> str:
    """The explanation around the code block, if any (kept short)."""
    import re

    prose = re.sub(r"```.*?(```|$)", "", text, flags=re.DOTALL).strip()
    return prose[:500]
