"""Asking you when the evidence runs out (docs/loop.md, "Asking you"): a question when the
candidates that pass every trusted test disagree, or when every candidate fails the model's
test and nothing is trusted; the answer is a trusted test the run goes on with. Scripted mock
model, real kernel pool."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
import scripted as s

from selfheal import Approve, ConfigError, HealConfig, HealRequest, NoneOfThese, Pick, Skip, heal
from selfheal.asking import ask_on_terminal
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.types import AssertTest, ExecutionReport, LoadResult, TestResult
from selfheal.llm.mock import MockProvider
from selfheal.questions import answer_test
from selfheal.result import HealResult
from selfheal.state import (
    Answer,
    Candidate,
    Choice,
    HealState,
    ProbeInput,
    Question,
    Spec,
    TestCase,
)
from selfheal.widgets.viewmodel import timeline_rows


def good_clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(x, hi))


class Recorder:
    """An asker that answers with ``answer(question)`` and keeps every question."""

    def __init__(self, answer: Callable[[Question], Answer]) -> None:
        self.answer = answer
        self.questions: list[Question] = []

    def __call__(self, question: Question, state: HealState) -> Answer:
        self.questions.append(question)
        return self.answer(question)


def right_value(question: Question) -> str:
    """What the right clamp returns for the asked input (evaluated here, on the test's side)."""
    args = eval(question.call, {"clamp": lambda *a: a})  # the call's arguments
    return repr(good_clamp(*args))


def right_choice(question: Question) -> Answer:
    """The offered output the right clamp gives, else "none of these" with its value."""
    want = right_value(question)
    match = [c.output for c in question.choices if c.output == want]
    return Pick(match[0]) if match else NoneOfThese(want)


def run(script: dict[str, list[str]], pool: KernelPool, asker: object, **cfg: object) -> HealResult:
    base: dict[str, object] = {
        "candidates": 2,
        "memory": False,
        "oracle_calls": 0,
        "autonomy": "review_repairs",
        "on_headless": "approve",
        **s.INSTRUCTED,
    }
    config = HealConfig(**{**base, **cfg})  # type: ignore[arg-type]
    mock = MockProvider(script)  # type: ignore[arg-type]
    return heal(
        s.SPEC,
        provider=mock,
        config=config,
        executor=pool,
        asker=asker,  # type: ignore[arg-type]
        approver=lambda _proposal, _state: Approve(),
    )


DISAGREE = {"generator": [s.BUGGY, s.GOOD], "test_writer": [s.NO_TESTS]}
"""Two candidates that both pass the example clamp(5, 0, 3) -> 3 and differ below ``lo``."""


def test_disagreeing_candidates_ask_once_and_the_answer_chooses(pool: KernelPool) -> None:
    asker = Recorder(right_choice)
    result = run(DISAGREE, pool, asker)
    assert len(asker.questions) == 1
    q = asker.questions[0]
    assert q.kind == "disagree" and q.function == "clamp"
    assert sorted(c.count for c in q.choices) == [1, 1]
    (asked,) = result.state.questions
    test = result.state.test(asked.test_id or "")
    assert test is not None and test.trusted and test.origin == "user"
    assert test.id == "ua1" and q.call in test.source
    assert test.answer and not test.verifies  # it steers; the example is what verifies
    assert "your answer" in result.evidence.summary
    assert "max(lo" in (result.code or "")
    assert result.function(-5, 0, 3) == 0
    assert "ask" in [e.node for e in result.timeline if e.kind == "end"]
    # one timeline row: the question and the answer (not a row of their own, as an approval)
    rows = [r.node for r in timeline_rows(result.state)]
    assert rows.count("ask") == 1 and "approval" not in rows


def test_none_of_these_makes_a_test_both_fail_and_a_repair_follows(pool: KernelPool) -> None:
    # both candidates pass the example and are wrong below lo, each its own way: the user types
    # the right value, both fail it, and the repair round brings the right code
    below = s.block("def clamp(x, lo, hi):\n    return hi if x > hi else x - 1 if x < lo else x")
    script = {
        "generator": [s.BUGGY, below, s.GOOD],
        "test_writer": [s.NO_TESTS],
        "debugger": [s.DIAG_CODE],
    }
    asker = Recorder(lambda q: NoneOfThese(right_value(q)))
    result = run(script, pool, asker, repair_width=1, max_iterations=2)
    assert len(asker.questions) == 1
    (asked,) = result.state.questions
    assert asked.answer.kind == "typed" and asked.test_id == "ua1"
    first = [c for c in result.candidates if c.round == 1]
    assert all(
        {r.test_id: r.outcome for r in c.report.results}["ua1"] == "failed"  # type: ignore[union-attr]
        for c in first
    )
    assert "repair" in [e.node for e in result.timeline if e.kind == "end"]
    assert result.function(-5, 0, 3) == 0


def test_full_auto_and_no_asker_never_ask(pool: KernelPool) -> None:
    asker = Recorder(right_choice)
    result = run(DISAGREE, pool, asker, autonomy="full_auto")
    assert asker.questions == [] and result.state.questions == ()
    result = run(DISAGREE, pool, None)
    assert result.state.questions == ()
    assert "ask" not in [e.node for e in result.timeline]


def test_ask_limit_is_respected(pool: KernelPool) -> None:
    # skipping leaves the disagreement open: the run asks about the next input, up to the limit
    asker = Recorder(lambda q: Skip())
    result = run(DISAGREE, pool, asker, ask_limit=2)
    assert len(asker.questions) == 2
    assert len({q.call for q in asker.questions}) == 2
    assert [a.answer.kind for a in result.state.questions] == ["skip", "skip"]
    asker = Recorder(right_choice)
    result = run(DISAGREE, pool, asker, ask_limit=0)
    assert asker.questions == []


def test_a_dispute_with_the_model_test_and_no_trusted_test_asks(pool: KernelPool) -> None:
    # no example: the model's test says clamp(7, 0, 3) == 7, both candidates return 3
    spec = "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]."
    asker = Recorder(right_choice)
    config = HealConfig(
        candidates=2,
        memory=False,
        oracle_calls=0,
        autonomy="review_repairs",
        spec_blind_tests=True,
        **s.INSTRUCTED,  # type: ignore[arg-type]
    )
    mock = MockProvider({"generator": [s.GOOD, s.GOOD], "test_writer": [s.WRONG_TEST]})  # type: ignore[arg-type]
    result = heal(spec, provider=mock, config=config, executor=pool, asker=asker)
    q = next(q for q in asker.questions if q.kind == "dispute")
    assert q.call == "clamp(7, 0, 3)"
    by_source = {c.source: c.output for c in q.choices}
    assert by_source == {"candidates": "3", "model_test": "7"}
    test = result.state.test("ua1")
    assert test is not None and test.trusted and test.answer
    # your answer confirms what both candidates return: it must pass, but an answer does not
    # verify on its own (the notebook suite's age, month-ends and mask-card runs were verified
    # wrong that way: the asked input did not show the candidates' shared mistake)
    assert result.status == "unverified"
    assert "answers steer the choice but verify only beside an example" in result.evidence.summary


def test_an_answer_that_tells_candidates_apart_steers_but_does_not_verify_alone(
    pool: KernelPool,
) -> None:
    """No example: two candidates return ``lo`` below it and one returns x (the inputs come
    from the signature's hints); your answer picks ``lo``, the two agree, and the run chooses
    them, unverified (before: verified on the answer)."""
    spec = 'def clamp(x: int, lo: int, hi: int) -> int:\n    """x limited to [lo, hi]."""\n'
    asker = Recorder(right_choice)
    script = {"generator": [s.GOOD, s.BUGGY, s.GOOD], "test_writer": [s.NO_TESTS]}
    config = HealConfig(
        candidates=3,
        memory=False,
        oracle_calls=0,
        autonomy="review_repairs",
        **s.INSTRUCTED,  # type: ignore[arg-type]
    )
    mock = MockProvider(script)  # type: ignore[arg-type]
    result = heal(spec, provider=mock, config=config, executor=pool, asker=asker)
    assert [q.kind for q in asker.questions] == ["disagree"]
    assert result.function(-5, 0, 3) == 0  # the answer chose
    assert result.status == "unverified"


def test_the_terminal_asker_reads_a_number_a_value_or_a_skip() -> None:
    q = Question(
        kind="disagree",
        function="clamp",
        call="clamp(-1, 0, 3)",
        choices=(
            Choice(output="-1", count=1, candidates=("c1",)),
            Choice(output="raise ValueError", count=1, candidates=("c2",)),
        ),
    )

    def answers(*lines: str) -> Callable[[], str]:
        it = iter(lines)
        return lambda: next(it, "")

    state = HealState(spec=Spec(text="x"))
    out = io.StringIO()
    assert ask_on_terminal(q, state, read=answers("2\n"), out=out) == Pick("raise ValueError")
    assert "raises ValueError" in out.getvalue()
    got = ask_on_terminal(q, state, read=answers("9\n", "3\n", "clamp(0)\n", "0\n"), out=out)
    assert got == NoneOfThese("0")
    assert "not an answer" in out.getvalue() and "candidate would define" in out.getvalue()
    assert ask_on_terminal(q, state, read=answers("s\n"), out=out) == Skip()
    assert ask_on_terminal(q, state, read=answers(), out=out) == Skip()


def _picked_tests(outputs: list[str], prefix: str) -> list[AssertTest]:
    """The test that picking each output of ``f(k)`` makes (``k`` its position)."""
    state = HealState(spec=Spec(text="f", entry_point="f"))
    tests = []
    for k, out in enumerate(outputs):
        q = Question(kind="disagree", function="f", call=f"f({k})", choices=(Choice(output=out),))
        test, note = answer_test(state, q, Pick(out))
        assert test is not None, note
        tests.append(AssertTest(id=f"{prefix}{k}", code=test.source))
    return tests


def test_a_picked_output_is_a_test_the_candidate_that_gave_it_passes(pool: KernelPool) -> None:
    # outputs are shown as canonical text (floats to 9 digits, arrays as lists, a Decimal as
    # its number): the test each makes must still pass on the value that gave it

    code = (
        "import numpy as np\nfrom decimal import Decimal\n"
        "def f(k):\n"
        "    if k == 0: return 0.1 + 0.2\n"
        "    if k == 1: return [0.1 + 0.2, 1.0]\n"
        "    if k == 2: return np.array([1, 2])\n"
        "    if k == 3: return Decimal('1.10')\n"
        "    if k == 4: raise ValueError('no')\n"
        "    return {'a': (1, 'x')}\n"
    )
    outputs = ["0.3", "[0.3, 1]", "[1, 2]", "1.1", "raise ValueError", "{'a': (1, 'x')}"]
    tests = _picked_tests(outputs, "k")
    report = pool.run(code, tests, timeout=30)
    assert {r.test_id: r.outcome for r in report.results} == {f"k{k}": "passed" for k in range(6)}
    # a wrong value fails them
    wrong = pool.run("def f(k):\n    return 7\n", tests, timeout=30)
    assert all(r.outcome in ("failed", "error") for r in wrong.results)
    # an output shown as text, not a value (a DataFrame, a Series): the value must print as
    # shown, compared on the host (before: no test, the click was lost)
    frames = (
        "import pandas as pd\nimport numpy as np\n"
        "def f(k):\n"
        "    if k == 0: return pd.DataFrame({'a': [1, 2], 'b': [0.5, np.nan]})\n"
        "    return pd.Series([1.5, 2.0], name='x')\n"
    )
    shown_as = ["   a    b\n0  1  0.5\n1  2  NaN", "0    1.5\n1    2.0\nName: x, dtype: float64"]
    table_tests = _picked_tests(shown_as, "t")
    assert pool.run(frames, table_tests, timeout=30).passed
    other = pool.run(frames.replace("[1, 2]", "[1, 3]").replace("2.0]", "2.5]"), table_tests)
    assert [r.outcome for r in other.results] == ["failed", "failed"]


def _candidate(cid: str, outputs: dict[str, str]) -> Candidate:
    results = tuple(TestResult(test_id=p, outcome="passed", value=v) for p, v in outputs.items())
    report = ExecutionReport(load=LoadResult(ok=True), results=results)
    return Candidate(
        id=cid, code=f"def f(x):\n    return {cid!r}\n", origin="sample", round=1,
        report=report, behaviour=outputs,
    )  # fmt: skip


def test_the_question_is_the_input_that_splits_most_evenly_and_can_be_a_test() -> None:
    from selfheal.questions import open_question

    probes = tuple(ProbeInput(id=f"p{i}", call=f"f({i})", origin="mutation") for i in (1, 2, 3))
    table = "   a\n0  1"  # a DataFrame's text: no expression, so no test if picked
    candidates = (
        _candidate("c1", {"p1": "1", "p2": "1", "p3": table}),
        _candidate("c2", {"p1": "1", "p2": "2", "p3": "x"}),
        _candidate("c3", {"p1": "2", "p2": "3", "p3": "y"}),
    )
    state = HealState(spec=Spec(text="f", entry_point="f"), probes=probes, candidates=candidates)
    q = open_question(state)
    assert q is not None and q.call == "f(2)"  # 1/1/1 beats p1's 2/1
    assert [c.output for c in q.choices] == ["1", "2", "3"]
    # with p2 asked, p3 splits more evenly than p1 (1/1/1 against 2/1), but none of its
    # outputs can be a test (a table's text, bare names): p1 is asked
    from selfheal.state import Asked

    asked = Asked(question=q, answer=Skip())
    q2 = open_question(state.model_copy(update={"questions": (asked,)}))
    assert q2 is not None and q2.call == "f(1)"


def test_a_dispute_asks_the_failing_model_test_input_that_splits_most_evenly() -> None:
    from selfheal.questions import open_question

    probes = tuple(ProbeInput(id=f"p{i}", call=f"f({i})", origin="model_test") for i in (1, 2))
    tests = tuple(
        TestCase(id=f"sb{i}", origin="spec_blind", code=f"assert f({i}) == 9") for i in (1, 2)
    )

    def member(cid: str, outputs: dict[str, str]) -> Candidate:
        c = _candidate(cid, outputs)
        failed = tuple(TestResult(test_id=t.id, outcome="failed") for t in tests)
        report = c.report.model_copy(update={"results": c.report.results + failed})  # type: ignore[union-attr]
        return c.model_copy(update={"report": report})

    # (most candidates raise on f(2): no disagreement question there, as it is out of the
    # domain by their vote; the dispute with the model's test still asks it)
    candidates = (
        member("c1", {"p1": "1", "p2": "raise ValueError"}),
        member("c2", {"p1": "1", "p2": "3"}),
        member("c3", {"p1": "1", "p2": "raise ValueError"}),
    )
    state = HealState(
        spec=Spec(text="f", entry_point="f"), probes=probes, tests=tests, candidates=candidates
    )
    q = open_question(state)
    assert q is not None and (q.kind, q.call, q.test_id) == ("dispute", "f(2)", "sb2")
    assert [(c.output, c.count, c.source) for c in q.choices] == [
        ("raise ValueError", 2, "candidates"), ("3", 1, "candidates"), ("9", 0, "model_test"),
    ]  # fmt: skip


def test_a_dispute_with_the_model_test_asks_when_the_trusted_tests_pass() -> None:
    # every candidate passes the trusted example and fails the model's test on f(2): the
    # example does not settle f(2) and the model's test alone may not overturn the code, so the
    # run asks (a candidate that fails the example is not counted)
    from selfheal.questions import open_question

    probes = (ProbeInput(id="p1", call="f(2)", origin="model_test"),)
    tests = (
        TestCase(id="ex1", origin="example", code="assert f(1) == 1", trusted=True),
        TestCase(id="sb1", origin="spec_blind", code="assert f(2) == 9"),
    )

    def member(cid: str, out: str, example: str) -> Candidate:
        c = _candidate(cid, {"p1": out})
        results = (
            TestResult(test_id="ex1", outcome=example),
            TestResult(test_id="sb1", outcome="failed"),
        )
        report = c.report.model_copy(update={"results": c.report.results + results})  # type: ignore[union-attr]
        return c.model_copy(update={"report": report})

    candidates = (
        member("c1", "4", "passed"),
        member("c2", "4", "passed"),
        member("c3", "9", "failed"),
    )
    state = HealState(
        spec=Spec(text="f", entry_point="f"), probes=probes, tests=tests, candidates=candidates
    )
    q = open_question(state)
    assert q is not None and (q.kind, q.call, q.test_id) == ("dispute", "f(2)", "sb1")
    assert [(c.output, c.count, c.source) for c in q.choices] == [
        ("4", 2, "candidates"), ("9", 0, "model_test"),
    ]  # fmt: skip


def test_a_failing_model_test_whose_call_nothing_disputes_is_not_asked() -> None:
    # the model's test fails every candidate, but on f(1) it expects what they all return (it
    # fails on another line): a question with one answer to pick is no question
    from selfheal.questions import open_question

    probes = (ProbeInput(id="p1", call="f(1)", origin="model_test"),)
    tests = (TestCase(id="sb1", origin="spec_blind", code="assert f(1) == 4\nassert 1 == 2"),)
    candidates = tuple(
        c.model_copy(
            update={
                "report": c.report.model_copy(  # type: ignore[union-attr]
                    update={
                        "results": c.report.results  # type: ignore[union-attr]
                        + (TestResult(test_id="sb1", outcome="failed"),)
                    }
                )
            }
        )
        for c in (_candidate("c1", {"p1": "4"}), _candidate("c2", {"p1": "4"}))
    )
    state = HealState(
        spec=Spec(text="f", entry_point="f"), probes=probes, tests=tests, candidates=candidates
    )
    assert open_question(state) is None


def test_an_asker_that_is_not_a_function_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="asker must be a function of"):
        HealRequest(s.SPEC, provider="mock", asker="yes")  # type: ignore[arg-type]
