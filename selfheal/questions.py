"""When a run asks you, what it asks, and the trusted test your answer makes (docs/loop.md,
"Asking you"). Pure functions over the state."""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence

from selfheal._parse import literal, parse_or_none
from selfheal.agreement import select
from selfheal.asking import shown, typed_problem
from selfheal.examples import example_assert
from selfheal.expected import expected_problem, import_lines
from selfheal.probes import calls_in_test, with_values
from selfheal.state import Answer, Candidate, Choice, HealState, Question, TestCase
from selfheal.state.cases import Example

PREFIX = "ua"
"""The id prefix of the tests your answers make (``ua1``, ``ua2``...)."""


def may_ask(state: HealState) -> bool:
    """Someone can answer (an asker was given), ``autonomy`` is not ``full_auto``, and fewer
    than ``ask_limit`` questions were asked."""
    cfg = state.config
    return (
        state.can_ask
        and cfg.approval.autonomy != "full_auto"
        and len(state.questions) < cfg.approval.ask_limit
    )


def ask_due(state: HealState) -> bool:
    """A question is open and the run may ask it (the route to the ``ask`` node)."""
    return may_ask(state) and open_question(state) is not None


def _key(call: str) -> str:
    tree = parse_or_none(call.strip(), "eval")
    return ast.dump(tree) if tree else call.strip()


def _grouped(candidates: Sequence[Candidate], probe_id: str) -> list[Choice]:
    """The outputs of ``candidates`` on a probe, most candidates first (an output that is no
    value, ``<timeout>``, is not offered)."""
    by_output: dict[str, list[str]] = {}
    for c in candidates:
        out = c.behaviour.get(probe_id)
        if out is None or out.startswith("<"):
            continue
        by_output.setdefault(out, []).append(c.id)
    groups = sorted(by_output.items(), key=lambda kv: -len(kv[1]))
    return [Choice(output=o, count=len(ids), candidates=tuple(ids)) for o, ids in groups]


def _writable(output: str, function: str) -> bool:
    """Whether an output can be a test when picked (a value built without the candidate, or an
    exception; a DataFrame's text cannot: its value must be typed)."""
    return output.startswith("raise ") or expected_problem(output, [function]) is None


def _disagreement(state: HealState, asked: set[str]) -> Question | None:
    """The probe input on which the candidates passing every trusted test split most evenly."""
    sel = select(state)
    if len(sel.passing) < 2 or not state.spec.entry_point:
        return None
    probes = {p.id: p for p in state.probes}
    best: tuple[tuple[bool, int, int], Question] | None = None
    for order, pid in enumerate(sel.valid_probes):
        probe = probes.get(pid)
        if probe is None or _key(probe.call) in asked:
            continue
        choices = _grouped(sel.passing, pid)
        if len(choices) < 2:
            continue
        # outputs that can be written as a test first, then the largest group smallest, then
        # the earliest input
        writable = any(_writable(c.output, state.spec.entry_point) for c in choices)
        score = (not writable, max(c.count for c in choices), order)
        if best is None or score < best[0]:
            q = Question(
                kind="disagree",
                function=state.spec.entry_point,
                call=probe.call,
                choices=tuple(choices),
                probe_id=pid,
            )
            best = (score, q)
    return best[1] if best else None


def _expected_in(test: TestCase, call: str) -> str | None:
    """The value ``assert <call> == <value>`` in a model-written test expects of ``call`` (with
    the values the test gave its names in place: ``probes.with_values``)."""
    for node in (n for stmt in with_values(test.source) for n in ast.walk(stmt)):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        cmp = node.test
        if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
            continue
        left, right = cmp.left, cmp.comparators[0]
        if _key(ast.unparse(left)) == _key(call):
            return ast.unparse(right)
        if _key(ast.unparse(right)) == _key(call):
            return ast.unparse(left)
    return None


def _dispute(state: HealState, asked: set[str]) -> Question | None:
    """A model-written test that every candidate passing the trusted tests fails (with no
    trusted test: every candidate that loads), asked about its input: the model's expected
    value against the candidates' outputs (of several such inputs, the one whose outputs split
    the candidates most evenly, then the earliest). The trusted tests do not settle it, and a
    model's test alone never overturns code that passes them: you do."""
    entry = state.spec.entry_point
    if not entry:
        return None
    if any(t.trusted for t in state.tests):
        loaded = list(select(state).passing)
    else:
        loaded = [c for c in state.candidates if c.report is not None and c.report.load.ok]
    if not loaded:
        return None
    probes = {_key(p.call): p for p in state.probes}
    best: tuple[tuple[bool, int], Question] | None = None
    for t in state.tests:
        outcomes = [_outcome(c, t.id) for c in loaded]
        if t.trusted or not all(o is not None and o != "passed" for o in outcomes):
            continue
        for call in calls_in_test(t.source, entry):
            if _key(call) in asked:
                continue
            expected = _expected_in(t, call)
            probe = probes.get(_key(call))
            choices = _grouped(loaded, probe.id) if probe is not None else []
            if expected is not None and all(c.output != expected for c in choices):
                choices.append(Choice(output=expected, source="model_test"))
            if len(choices) < 2:
                continue  # nothing disputes this call's value (the test fails elsewhere)
            writable = any(_writable(c.output, entry) for c in choices)
            score = (not writable, max(c.count for c in choices))  # ties: the earliest
            q = Question(
                kind="dispute",
                function=entry,
                call=call,
                choices=tuple(choices),
                probe_id=probe.id if probe is not None else None,
                test_id=t.id,
            )
            if best is None or score < best[0]:
                best = (score, q)
    return best[1] if best else None


def _outcome(c: Candidate, test_id: str) -> str | None:
    results = c.report.results if c.report is not None else ()
    return next((r.outcome for r in results if r.test_id == test_id), None)


def open_question(state: HealState) -> Question | None:
    """The question to ask now (never an input asked before), or None."""
    asked = {_key(a.question.call) for a in state.questions}
    return _disagreement(state, asked) or _dispute(state, asked)


def _raises_test(call: str, exc: str) -> str:
    lines = import_lines(call)
    lines += [
        "try:",
        f"    _value = {call}",
        "except Exception as _exc:",
        f"    assert type(_exc).__name__ == {exc!r}, f'raised {{type(_exc).__name__}}, not {exc}'",
        "else:",
        f"    raise AssertionError(f'returned {{_value!r}}; your answer: it raises {exc}')",
    ]
    return "\n".join(lines)


def _tolerance(expected: str) -> float | None:
    """A float value is compared with a tolerance (outputs are shown to 9 significant
    digits); None for any other value."""
    try:
        value = literal(expected)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if type(value) is float and math.isfinite(value):
        return max(1e-9, abs(value) * 1e-8)
    return None


def _close_items(call: str, expected: str) -> str | None:
    """For a list, tuple or dict of numbers with a float among them (an output shown to 9
    significant digits), the test that compares it item by item, floats with a tolerance;
    None for any other value."""
    try:
        value = literal(expected)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    pairs = (
        list(value.items())
        if type(value) is dict
        else list(enumerate(value))
        if type(value) in (list, tuple)
        else []
    )
    if not pairs or not all(type(x) in (int, float) for _, x in pairs):
        return None
    if not any(type(x) is float and math.isfinite(x) for _, x in pairs):
        return None
    lines = [*import_lines(call, extra=["import math"]), f"_value = {call}"]
    lines.append(f"assert len(_value) == {len(pairs)}")
    for key, x in pairs:
        if type(x) is float and math.isfinite(x):
            lines.append(
                f"assert math.isclose(_value[{key!r}], {x!r}, rel_tol=1e-8, abs_tol=1e-12)"
            )
        else:
            lines.append(f"assert _value[{key!r}] == {x!r}")
    return "\n".join(lines)


def answer_test(
    state: HealState, question: Question, answer: Answer
) -> tuple[TestCase | None, str]:
    """The trusted test (origin ``user``, id ``ua<n>``) an answer makes, or None and why not
    (a skip; a value that cannot be built without the candidate)."""
    if answer.kind == "skip":
        return None, "skipped"
    value = answer.value.strip()
    if answer.kind == "output" and value.startswith("raise "):
        code = _raises_test(question.call, value[len("raise ") :].strip())
    else:
        problem = (
            typed_problem(value, question.function)
            if answer.kind == "typed"
            else expected_problem(value, [question.function])
        )
        if problem is not None and answer.kind == "output":
            # an output shown as text, not a value (a DataFrame): the value must print as shown
            if " chars, sha256 " in answer.value:
                return None, "the output was too long to be shown whole: type its value instead"
            lines = import_lines(question.call)
            code = "\n".join([*lines, f"assert repr({question.call}) == {answer.value!r}"])
        elif problem is not None:
            return None, f"{value[:80]!r} {problem}"
        else:
            tol = _tolerance(value)
            close = _close_items(question.call, value) if answer.kind == "output" else None
            code = close or example_assert(Example(call=question.call, expected=value, abs_tol=tol))
    n = sum(1 for t in state.tests if t.id.startswith(PREFIX)) + 1
    test = TestCase(
        id=f"{PREFIX}{n}",
        origin="user",
        code=code,
        rationale=f"your answer: {question.call} -> {shown(value)}"[:300],
        trusted=True,
        answer=True,
        added_at=state.iteration,
    )
    return test, ""
