"""The simulated user (``evaluation.simulated_user``): it answers heal's questions from the
task's reference solution, run in the scoring sandbox; a ``+askN`` mode's records count the
questions, and the report sets them against the mode without questions. Scripted mock model,
real kernel pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.ask_gain import ask_gain, ask_table
from evaluation.errors import SuiteError
from evaluation.modes import asks_of, config_for, parse_modes, split_mode
from evaluation.pair import heal_quietly, run_pair
from evaluation.report import Settings, build_summary, render_markdown
from evaluation.run_benchmark import with_asked
from evaluation.simulated_user import SimulatedUser, reference_output
from evaluation.suites import Task
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.state import Choice, Question

SPEC = (
    "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]. "
    "Example: clamp(5, 0, 3) -> 3"
)
GOOD = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
BUGGY = "def clamp(x, lo, hi):\n    return min(x, hi)\n"
TASK = Task(
    id="tiny/clamp",
    suite="tiny",
    category="numbers",
    prompt=SPEC,
    entry_point="clamp",
    # hidden tests on inputs the questions do not ask about (a question on the very call of a
    # hidden assertion would put that assertion in a prompt, and the leak check counts it)
    reference_tests=("assert clamp(-1, 0, 3) == 0", "assert clamp(-7, -2, 9) == -2"),
    canonical_solution=GOOD,
)


def block(code: str) -> str:
    return f"```python\n{code}```"


def _question(*outputs: str) -> Question:
    return Question(
        kind="disagree",
        function="clamp",
        call="clamp(-5, 0, 3)",
        choices=tuple(Choice(output=o, count=1, candidates=("c1",)) for o in outputs),
    )


def test_the_simulated_user_answers_from_the_reference(pool: KernelPool) -> None:
    user = SimulatedUser(TASK, lambda: pool)
    assert reference_output(TASK, "clamp(-5, 0, 3)", pool, user.limits) == "0"
    assert user.answer(_question("-5", "0")).model_dump() == {"kind": "output", "value": "0"}
    # no offered output is right: "none of these" with the reference's value
    assert user.answer(_question("-5", "7")).model_dump() == {"kind": "typed", "value": "0"}
    # a reference that raises on the input cannot be typed as a value: a skip
    raising = TASK.model_copy(update={"canonical_solution": "def clamp(x, lo, hi):\n    1 / 0\n"})
    assert SimulatedUser(raising, lambda: pool).answer(_question("-5", "7")).kind == "skip"
    assert (
        SimulatedUser(raising, lambda: pool).answer(_question("raise ZeroDivisionError")).kind
        == "output"
    )


def test_an_ask_mode_records_its_questions_and_the_gain_per_question(
    pool: KernelPool, tmp_path: Path
) -> None:
    script = {"generator": [block(BUGGY), block(GOOD)] * 2, "test_writer": ["```python\n```"] * 2}
    provider = MockProvider(script)  # type: ignore[arg-type]
    shared = {"candidates": 2, "oracle_calls": 0, "first_answer": "instruct"}
    records = [
        run_pair(
            TASK,
            mode,
            config=config_for(mode, extra=shared),
            provider=provider,
            heal=heal_quietly,
            executor=lambda: pool,
        )
        for mode in ("heal", "heal+ask1")
    ]
    without, asked = records
    assert (without.asked, without.passed) == (0, False)  # the tie went to the greedy answer
    assert (asked.asked, asked.answered, asked.passed) == (1, 1, True)
    assert asked.questions[0]["question"]["call"] == "clamp(-5, 0, 3)"
    assert asked.config["approval"]["ask_limit"] == 1
    assert asked.honesty is not None and asked.honesty.leaks == ()
    gain = ask_gain(records, "heal+ask1")
    assert gain is not None
    assert (gain.tasks, gain.base_passed, gain.passed, gain.gained) == (1, 0, 1, ("tiny/clamp",))
    assert gain.per_question == 1.0 and gain.leaked == 0
    assert "| `heal+ask1` | `heal` | 1 | 0 | 1 |" in "\n".join(ask_table([gain]))
    settings = Settings(
        suite="tiny", model="mock", modes=("heal", "heal+ask1"), max_iterations=2, temperature=0
    )
    summary = build_summary(settings=settings, runs=(), records=records, task_ids=[TASK.id])
    assert summary.asking == (gain,)
    assert "right answers gained per question" in render_markdown(summary)


def test_ask_labels_and_the_flag() -> None:
    assert with_asked(parse_modes("single_shot,heal"), "1,2,3") == (
        "single_shot", "heal", "heal+ask1", "heal+ask2", "heal+ask3",
    )  # fmt: skip
    assert with_asked(("heal",), "") == ("heal",)
    assert asks_of("heal+ask2") == 2 and split_mode("heal+ask2") == ("heal", 1)
    assert config_for("heal+ask2").approval.autonomy == "review_repairs"
    assert config_for("heal").approval.autonomy == "full_auto"
    with pytest.raises(SuiteError, match="1 to 20"):
        with_asked(("heal",), "0")


def test_the_reference_runs_with_the_names_the_asked_call_uses(pool: KernelPool) -> None:
    # the call's values need `date`, which the reference itself never imports
    days = TASK.model_copy(
        update={
            "entry_point": "days",
            "canonical_solution": "def days(a, b):\n    return (b - a).days\n",
        }
    )
    call = "days(date(2024, 3, 1), date(2024, 3, 5))"
    assert reference_output(days, call, pool, SimulatedUser(days, lambda: pool).limits) == "4"


def test_a_paired_ask_mode_continues_heal_from_where_the_first_question_was_open(
    pool: KernelPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--paired``: heal+ask1 does not sample afresh: it continues heal's own run from the
    first state where a question was open (BUGGY and GOOD disagree below ``lo``), so the two
    records share that run's answers and differ by the question alone."""
    from evaluation.benchmark import BenchmarkRunner
    from evaluation.results_file import ResultsFile

    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path / "runs"))
    script = {"generator": [block(BUGGY), block(GOOD)] * 2, "test_writer": ["```python\n```"] * 2}
    provider = MockProvider(script)  # type: ignore[arg-type]
    runner = BenchmarkRunner(
        tasks=[TASK],
        modes=["heal", "heal+ask1"],
        provider=provider,
        results=ResultsFile(tmp_path / "r.jsonl"),
        executor_factory=lambda: pool,
        config_extra={"candidates": 2, "oracle_calls": 0, "first_answer": "instruct"},
        progress=False,
        paired=True,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    records = {r.mode: r for r in runner.run()}
    heal, asked = records["heal"], records["heal+ask1"]
    assert (heal.asked, heal.passed) == (0, False)
    assert asked.paired is not None and asked.paired.diverged
    assert (asked.paired.base, asked.paired.base_run_id) == ("heal", heal.run_id)
    assert asked.paired.at_node == "ask"
    assert (asked.asked, asked.answered, asked.passed) == (1, 1, True)
    # the continuation asked the model nothing new: the question settled it
    assert asked.usage.calls == asked.paired.shared_calls
