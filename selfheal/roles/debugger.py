"""Debugger: one structured diagnosis of why the candidate fails; may find a test wrong."""

from __future__ import annotations

from pydantic import BaseModel, Field

from selfheal.errors import MalformedReply
from selfheal.graph.context import Context
from selfheal.roles._calls import CallLog, ask_for_json, info, record_failure
from selfheal.roles.testcode import failure_lines
from selfheal.state import Diagnosis, HealState

NODE = "diagnose"
CATEGORIES = (
    "logic",
    "edge_case",
    "exception",
    "syntax",
    "import",
    "timeout",
    "crash",
    "wrong_test",
    "spec_ambiguity",
    "performance",
    "other",
)


class DiagnosisReply(BaseModel):
    """What the debugger replies (``prompts/debugger.yaml`` holds the same schema)."""

    root_cause: str
    category: str = "logic"
    repair_strategy: str = ""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    blame: str = "code"
    wrong_tests: list[str] = Field(default_factory=list)


def heuristic(state: HealState) -> Diagnosis:
    """A diagnosis from the execution report alone, used when the model's reply is unusable."""
    current = state.current
    assert current is not None and current.report is not None
    rep = current.report
    if not rep.load.ok:
        cat = (
            "syntax"
            if rep.load.exc_type == "SyntaxError"
            else "import"
            if "Import" in (rep.load.exc_type or "")
            else "exception"
        )
        return Diagnosis(
            iteration=state.iteration,
            root_cause=f"The code does not load: {rep.load.exc_type}: {rep.load.message}",
            category=cat,
            repair_strategy="Make the module load without errors.",
            confidence=0.6,
            source="heuristic",
        )
    failing = [r for r in rep.results if r.outcome != "passed"]
    kinds = {r.outcome for r in failing}
    cat = (
        "timeout"
        if "timeout" in kinds
        else "crash"
        if "crashed" in kinds
        else "exception"
        if "error" in kinds
        else "logic"
    )
    first = failing[0] if failing else None
    return Diagnosis(
        iteration=state.iteration,
        root_cause=(
            f"{len(failing)} test(s) fail; first: {first.test_id}: {first.exc_type or first.outcome} {first.message[:200]}"
            if first
            else "Unknown failure."
        ),
        category=cat,
        repair_strategy="Make the failing tests pass without breaking the passing ones.",
        confidence=0.3,
        source="heuristic",
    )


def diagnose(state: HealState, ctx: Context) -> HealState:
    """Diagnose the latest attempt; quarantine model-written tests the debugger shows are wrong."""
    log = CallLog()
    current = state.current
    assert current is not None and current.report is not None
    rep = current.report
    load_error = (
        "" if rep.load.ok else f"{rep.load.exc_type} at line {rep.load.line}: {rep.load.message}"
    )
    try:
        reply = ask_for_json(
            ctx,
            state,
            log,
            DiagnosisReply,
            node=NODE,
            role="debugger",
            prompt="debugger",
            variables={
                "spec": state.spec.text,
                "code": current.code,
                "load_error": load_error,
                "failures": failure_lines(state, rep),
            },
        )
        blame = reply.blame if reply.blame in ("code", "test", "both", "unclear") else "unclear"
        diag = Diagnosis(
            iteration=state.iteration,
            root_cause=reply.root_cause.strip() or "(no root cause given)",
            category=reply.category if reply.category in CATEGORIES else "other",
            repair_strategy=reply.repair_strategy.strip(),
            confidence=reply.confidence,
            blame=blame,  # type: ignore[arg-type]
            suspect_tests=tuple(t.strip("[] `") for t in reply.wrong_tests),
        )
    except MalformedReply as exc:
        record_failure(log, ctx, state, NODE, "debugger", exc)
        diag = heuristic(state)
    failing = {r.test_id for r in rep.results if r.outcome != "passed"}
    # An untrusted test alone never overturns code: the debugger may quarantine a failing
    # model-written test it finds wrong; trusted tests (examples, the user's) are never quarantined.
    tests = []
    quarantined = []
    for t in state.tests:
        if (
            diag.blame in ("test", "both")
            and t.id in diag.suspect_tests
            and t.id in failing
            and not t.trusted
            and not t.quarantined
        ):
            t = t.model_copy(
                update={
                    "quarantined": True,
                    "quarantine_reason": f"debugger, iteration {state.iteration}: {diag.root_cause[:200]}",
                }
            )
            quarantined.append(t.id)
        tests.append(t)
    info(
        log,
        ctx,
        state,
        NODE,
        f"{diag.category} ({diag.confidence:.0%}, blame {diag.blame}): {diag.root_cause[:160]}"
        + (f"; quarantined {', '.join(quarantined)}" if quarantined else ""),
    )
    return log.apply(state, diagnoses=state.diagnoses + (diag,), tests=tuple(tests))
