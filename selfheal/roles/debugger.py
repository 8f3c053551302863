"""Debugger: a structured diagnosis of why the candidate fails (after an optional ReAct
investigation in the sandbox, ``roles/investigate.py``); may find a test wrong."""

from __future__ import annotations

import ast
import math
from typing import Annotated, Any, get_args

from pydantic import BaseModel, BeforeValidator, Field

from selfheal._parse import literal, parse_or_none
from selfheal.context import Context
from selfheal.errors import MalformedReply
from selfheal.llm.parsing import fold_choice
from selfheal.roles import oracle
from selfheal.roles._calls import CallLog, ask_for_json
from selfheal.roles.investigate import investigate
from selfheal.state import Diagnosis, HealState
from selfheal.state.repair import Blame, DiagnosisCategory
from selfheal.testsuite import all_active_pass, failure_lines

NODE = "diagnose"
CATEGORIES: tuple[DiagnosisCategory, ...] = get_args(DiagnosisCategory)


def _equality(source: str) -> tuple[str, str] | None:
    """``(call, expected)`` for a test of the form ``assert <call> == <literal>``."""
    tree = parse_or_none(source)
    if tree is None:
        return None
    stmts = [n for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Assert):
        return None
    test = stmts[0].test
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
    ):
        return None
    left, right = test.left, test.comparators[0]
    try:
        ast.literal_eval(right)
    except ValueError:
        return None
    return ast.unparse(left), ast.unparse(right)


def _literal(src: str) -> tuple[bool, Any]:
    try:
        return True, literal(src.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


async def adjudicate(
    state: HealState, ctx: Context, log: CallLog, limit: int = 3
) -> tuple[dict[str, str], dict[str, str]]:
    """Judge failing model-written tests against a second reading of the spec.

    For ``assert <call> == <value>`` tests: run the call on the candidate (the debugger's
    sandbox tool) and ask the spec oracle, from the spec alone, what the call returns. The test
    stands only if the oracle confirms its expected value; otherwise (the oracle agrees with the
    code, or with neither) it is quarantined: an untrusted test alone never overturns code. A
    failure only by float rounding is quarantined without asking. Oracle answers are cached in
    the state (asked once per call, within ``oracle_calls``). Returns
    ``({test_id: reason}, {call: oracle answer asked now})``."""
    current = state.current
    assert current is not None and current.report is not None
    verdicts: dict[str, str] = {}
    asked: dict[str, str] = {}
    failing = [r.test_id for r in current.report.results if r.outcome == "failed"]
    checked = 0
    for tid in failing:
        t = state.test(tid)
        if t is None or t.trusted or t.quarantined or checked >= limit:
            continue
        eq = _equality(t.source)
        if eq is None:
            continue
        call, expected_src = eq
        checked += 1
        snippet = await ctx.executor.arun_snippet(
            call, setup=current.code, timeout=state.config.limits.test_timeout
        )
        ok_actual, actual = (
            _literal(snippet.value or "") if snippet.outcome == "passed" else (False, None)
        )
        ok_expected, expected = _literal(expected_src)
        if not (ok_actual and ok_expected):
            continue
        if _same(actual, expected):
            if isinstance(actual, float) or isinstance(expected, float):
                verdicts[tid] = (
                    f"float rounding: {call} returns {actual!r}, the test expects {expected!r}; "
                    "equal within 1e-9, so the exact comparison is the test's mistake"
                )
            continue
        if call not in state.oracle and len(state.oracle) < state.config.selection.oracle_calls:
            answers = await oracle.ask(state, log, [call])
            state = state.model_copy(update={"oracle": {**state.oracle, **answers}})
            asked.update(answers)
        answer = state.oracle.get(call, "")
        if not answer:
            continue
        ok_oracle, said = _literal(answer)
        if not ok_oracle or _same(said, expected):
            continue  # confirmed by a second reading (or no usable answer): the test stands
        if _same(said, actual):
            verdicts[tid] = (
                f"the spec oracle says {call} == {said!r}, as the code returns; "
                f"the test expected {expected!r}"
            )
        else:
            verdicts[tid] = (
                f"unconfirmed: the test expects {call} == {expected!r}, the spec oracle says "
                f"{said!r}, the code returns {actual!r}; a model-written test that a second "
                "reading of the spec does not confirm does not overturn code"
            )
    return verdicts, asked


class DiagnosisReply(BaseModel):
    """What the debugger replies (``prompts/debugger.yaml``); its JSON schema is what the
    model is asked for. An unknown category reads as ``other``, an unknown blame as
    ``unclear``."""

    root_cause: str
    category: Annotated[DiagnosisCategory, BeforeValidator(fold_choice(CATEGORIES, "other"))] = (
        "logic"
    )
    repair_strategy: str = ""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    blame: Annotated[Blame, BeforeValidator(fold_choice(get_args(Blame), "unclear"))] = "code"
    wrong_tests: list[str] = Field(default_factory=list)


_OUTCOME_CATEGORY: dict[str, DiagnosisCategory] = {
    "timeout": "timeout",
    "crashed": "crash",
    "error": "exception",
}
"""The category of a failure by the worst test outcome, in this order (else ``logic``)."""


def heuristic(state: HealState) -> Diagnosis:
    """A diagnosis from the execution report alone, used when the model's reply is unusable."""
    current = state.current
    assert current is not None and current.report is not None
    rep = current.report
    cat: DiagnosisCategory
    if not rep.load.ok:
        exc = rep.load.exc_type or ""
        cat = "syntax" if exc == "SyntaxError" else "import" if "Import" in exc else "exception"
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
    cat = next((c for outcome, c in _OUTCOME_CATEGORY.items() if outcome in kinds), "logic")
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


def _quarantine(state: HealState, verdicts: dict[str, str]) -> HealState:
    tests = tuple(
        t.model_copy(update={"quarantined": True, "quarantine_reason": verdicts[t.id]})
        if t.id in verdicts and not t.trusted
        else t
        for t in state.tests
    )
    return state.model_copy(update={"tests": tests})


async def diagnose(state: HealState, ctx: Context) -> HealState:
    """Diagnose the latest attempt; quarantine model-written tests shown to be wrong."""
    log = CallLog(ctx, NODE)
    current = state.current
    assert current is not None and current.report is not None
    rep = current.report
    if rep.load.ok:
        verdicts, asked = await adjudicate(state, ctx, log)
        state = state.model_copy(update={"oracle": {**state.oracle, **asked}})
        if verdicts:
            state = _quarantine(state, verdicts)
            log.info(
                state, f"quarantined {', '.join(verdicts)}: {next(iter(verdicts.values()))[:160]}"
            )
            if all_active_pass(state, rep):
                return log.apply(state)
    if not state.config.repairs.diagnosis:
        log.info(
            state,
            "no diagnosis asked (diagnosis=False): the repair round patches from the failing tests",
        )
        return log.apply(state)
    load_error = (
        "" if rep.load.ok else f"{rep.load.exc_type} at line {rep.load.line}: {rep.load.message}"
    )
    probes = await investigate(state, ctx, log)
    try:
        reply = await ask_for_json(
            state,
            log,
            DiagnosisReply,
            role="debugger",
            prompt="debugger",
            max_tokens=384,
            variables={
                "code": current.code,
                "load_error": load_error,
                "failures": failure_lines(state, rep),
                "probes": [p.model_dump() for p in probes],
            },
        )
        diag = Diagnosis(
            iteration=state.iteration,
            root_cause=reply.root_cause.strip() or "(no root cause given)",
            category=reply.category,
            repair_strategy=reply.repair_strategy.strip(),
            confidence=reply.confidence,
            blame=reply.blame,
            suspect_tests=tuple(t.strip("[] `") for t in reply.wrong_tests),
            probes=probes,
        )
    except MalformedReply as exc:
        log.failure(state, "debugger", exc)
        diag = heuristic(state).model_copy(update={"probes": probes})
    failing = {r.test_id for r in rep.results if r.outcome != "passed"}
    # the debugger may quarantine a failing model-written test it blames, never a trusted one
    reason = f"debugger, iteration {state.iteration}: {diag.root_cause[:200]}"
    blamed = diag.suspect_tests if diag.blame in ("test", "both") else ()
    wrong = {
        t.id: reason
        for t in state.tests
        if t.id in blamed and t.id in failing and not t.trusted and not t.quarantined
    }
    state = _quarantine(state, wrong)
    log.info(
        state,
        f"{diag.category} ({diag.confidence:.0%}, blame {diag.blame}): {diag.root_cause[:160]}"
        + (f"; quarantined {', '.join(wrong)}" if wrong else ""),
    )
    return log.apply(state, diagnoses=state.diagnoses + (diag,))
