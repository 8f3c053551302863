"""``heal-memory``: the suite twice, in order, with one memory of its own; every other mode with
the memory off, so no benchmark task can learn from another."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import selfheal
from evaluation.benchmark import BenchmarkRunner
from evaluation.errors import ResultsFileError, SuiteError
from evaluation.modes import MODES, config_for, parse_modes
from evaluation.records import TaskRecord
from evaluation.report import Settings, build_summary, render_markdown
from evaluation.results_file import ResultsFile
from evaluation.suites import Task
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.base import Message
from selfheal.llm.mock import MockProvider
from selfheal.memory import Memory

DOUBLE = Task(
    id="toy/double",
    suite="toy",
    category="toy",
    prompt="Write a Python function `double(x: int) -> int` that returns twice x. "
    "Example: double(2) -> 4",
    entry_point="double",
    reference_tests=("assert double(3) == 6", "assert double(-1) == -2"),
    canonical_solution="def double(x):\n    return 2 * x\n",
)
HALVE = Task(
    id="toy/halve",
    suite="toy",
    category="toy",
    prompt="Write a Python function `halve(x: int) -> int` that returns half of x, rounded "
    "down to a whole number. Example: halve(7) -> 3",
    entry_point="halve",
    reference_tests=("assert halve(9) == 4", "assert halve(-3) == -2"),
    canonical_solution="def halve(x):\n    return x // 2\n",
)
TASKS = [DOUBLE, HALVE]
REMEMBERED = "Lessons remembered from earlier runs"


def _task(messages: Sequence[Message]) -> Task:
    text = "\n".join(m.content for m in messages)
    return next(t for t in TASKS if f"`{t.entry_point}" in text or f"def {t.entry_point}(" in text)


def learner() -> MockProvider:
    """A fake model that gets ``halve`` wrong (true division) unless the prompt carries a
    remembered lesson, and ``double`` right; its debugger names the cause."""

    def generator(messages: Sequence[Message]) -> str:
        task = _task(messages)
        wrong = task is HALVE and not any(REMEMBERED in m.content for m in messages)
        code = "def halve(x):\n    return x / 2\n" if wrong else task.canonical_solution
        return f"```python\n{code}```"

    def debugger(messages: Sequence[Message]) -> str:
        return json.dumps(
            {
                "root_cause": "true division returns a float; the spec rounds down",
                "category": "logic",
                "repair_strategy": "use floor division //",
                "confidence": 0.9,
                "blame": "code",
                "wrong_tests": [],
            }
        )

    def oracle(messages: Sequence[Message]) -> str:
        task = _task(messages)
        call = messages[-1].content.rsplit("what does `", 1)[1].split("` return", 1)[0]
        namespace: dict[str, object] = {}
        exec(task.canonical_solution or "", namespace)
        return json.dumps({"reasoning": "from the spec", "value": repr(eval(call, namespace))})

    return MockProvider(
        {
            "generator": [generator] * 200,
            "test_writer": [lambda m: "```python\n# nothing to add\n```"] * 50,
            "debugger": [debugger] * 50,
            "oracle": [oracle] * 50,
        },
        name="learner",
    )


def _runner(modes: Sequence[str], path: Path, pool: KernelPool) -> BenchmarkRunner:
    runner = BenchmarkRunner(
        tasks=TASKS,
        modes=parse_modes(list(modes)),
        provider=learner(),
        results=ResultsFile(path),
        heal=selfheal.heal,
        executor_factory=lambda: pool,
        progress=False,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    return runner


def test_only_the_memory_mode_remembers() -> None:
    assert parse_modes("heal,heal-memory") == ("heal", "heal-memory:1", "heal-memory:2")
    for mode in MODES:
        assert config_for(mode).storage.memory is (mode == "heal-memory"), mode
    assert config_for("heal-memory:2").storage.memory
    for bad in ("heal-memory:3", "heal:2", "heal-memory:x"):
        with pytest.raises(SuiteError, match="Unknown pass"):
            parse_modes(bad)


def test_heal_memory_runs_the_suite_twice_and_reports_the_gain(
    pool: KernelPool, tmp_path: Path
) -> None:
    results = tmp_path / "out" / "results.jsonl"
    runner = _runner(["heal", "heal-memory"], results, pool)
    order: list[tuple[str, str]] = []
    runner.run(on_record=lambda r: order.append((r.task_id, r.mode)))
    # every first pass (task-major), then the suite again
    assert order == [
        ("toy/double", "heal"),
        ("toy/double", "heal-memory:1"),
        ("toy/halve", "heal"),
        ("toy/halve", "heal-memory:1"),
        ("toy/double", "heal-memory:2"),
        ("toy/halve", "heal-memory:2"),
    ]
    records = {(r.task_id, r.mode): r for r in ResultsFile(results).read()}

    # the plain mode never touches a memory: nothing recalled, no remembered candidate
    for task in TASKS:
        plain = records[(task.id, "heal")]
        assert plain.config["storage"]["memory"] is False and plain.remembered == ()
        assert all(c["origin"] != "memory" for c in plain.candidates)
        assert plain.timeline[1]["node"] == "recall" and plain.timeline[1]["detail"] == "memory off"
    assert not records[(HALVE.id, "heal")].passed

    # the first pass starts from an empty memory of its own, beside the results
    memory = Memory(results.parent / "memory.sqlite3")
    assert records[(DOUBLE.id, "heal-memory:1")].remembered == ()
    first = records[(HALVE.id, "heal-memory:1")]
    assert not first.passed and first.status == "exhausted" and first.remembered == ()

    # the second pass recalls: halve gets the lesson its first pass learnt and now passes;
    # double gets its own verified solution, which agrees with the model's answer
    second = records[(HALVE.id, "heal-memory:2")]
    assert second.passed and second.verified
    assert [(x["kind"], x["run_id"]) for x in second.remembered] == [("lesson", first.run_id)]
    assert "floor division" in second.remembered[0]["text"]
    again = records[(DOUBLE.id, "heal-memory:2")]
    assert [x["kind"] for x in again.remembered] == ["solution"]
    remembered = [c for c in again.candidates if c["origin"] == "memory"]
    assert len(remembered) == 1 and remembered[0]["cluster"] == 0
    assert not remembered[0]["chosen"]  # the greedy answer behaves the same and leads
    assert memory.runs() == 4  # the two passes; the plain mode wrote nothing

    summary = build_summary(
        settings=Settings(
            suite="toy",
            model="mock:learner",
            modes=tuple(runner.modes),
            max_iterations=2,
            temperature=0.0,
        ),
        runs=(),
        records=list(records.values()),
        task_ids=[t.id for t in TASKS],
    )
    pair = next(c for c in summary.comparisons if c.baseline == "heal-memory:1")
    assert (pair.mode, pair.gained, pair.lost, pair.both) == ("heal-memory:2", (HALVE.id,), (), 1)
    uses = {u.mode: u for u in summary.memory}
    assert (uses["heal-memory:1"].lessons, uses["heal-memory:1"].solutions) == (0, 0)
    u2 = uses["heal-memory:2"]
    assert (u2.tasks, u2.lessons, u2.solutions, u2.chosen) == (2, 1, 1, 0)
    text = render_markdown(summary)
    assert (
        "`heal-memory:2` vs `heal-memory:1` on 2 tasks: both pass 1, gained 1 (toy/halve)" in text
    )
    assert "- `heal-memory:2`: remembered lessons went into the prompts on 1 of 2 task(s)" in text


def test_a_first_pass_never_starts_from_an_old_memory(pool: KernelPool, tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    Memory(tmp_path / "memory.sqlite3")  # left by an earlier run
    with pytest.raises(ResultsFileError, match="must start from an empty one"):
        _runner(["heal-memory"], results, pool).run()
    # without a memory mode the file is not in the way (and is not used)
    (plain,) = (r for r in _runner(["heal"], results, pool).run() if r.task_id == DOUBLE.id)
    assert isinstance(plain, TaskRecord) and plain.remembered == ()
