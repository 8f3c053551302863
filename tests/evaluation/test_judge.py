"""evaluation/judge.py: the spec oracle asked about a verified consensus, replayed on records
(real sandbox, the oracle scripted to answer truthfully from the canonical solution): a wrong
consensus is contradicted where a probe separates it, a right one is not, and the report counts
what each threshold keeps, catches and loses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from eval_fakes import oracle_provider

from evaluation.judge import Judged, ask_again, asked_before, judge_one, judge_report
from evaluation.pair import error_record
from evaluation.records import TaskRecord
from evaluation.results_file import ResultsFile
from evaluation.suites import HumanEvalSuite, Task
from selfheal.config import HealConfig
from selfheal.kernel_sandbox import KernelPool

ROOT = Path(__file__).resolve().parents[2]
# HumanEval/155's consensus error from run r4: zero has one even digit, this says none
NO_ZERO = (
    "def even_odd_count(num):\n"
    "    even = odd = 0\n"
    "    num = abs(num)\n"
    "    while num > 0:\n"
    "        if num % 10 % 2 == 0:\n"
    "            even += 1\n"
    "        else:\n"
    "            odd += 1\n"
    "        num //= 10\n"
    "    return even, odd\n"
)


def verified(task: Task, code: str, passed: bool) -> TaskRecord:
    """A heal record of ``task``, verified by two agreeing candidates, with ``code`` chosen."""
    base = error_record(task, "heal", HealConfig(), "mock:x", "")
    return base.model_copy(
        update={
            "passed": passed,
            "status": "verified",
            "verified": True,
            "error": "",
            "code": code,
            "candidates": ({"id": "c1", "code": code}, {"id": "c2", "code": code}),
            "evidence": {"chosen_cluster": 2},
        }
    )


def test_the_oracle_contradicts_a_wrong_consensus_only(pool: KernelPool) -> None:
    task = next(t for t in HumanEvalSuite().tasks() if t.id == "HumanEval/155")
    provider = oracle_provider([task])
    wrong = judge_one(verified(task, NO_ZERO, False), task, 12, pool, provider)
    right = judge_one(verified(task, task.canonical_solution or "", True), task, 12, pool, provider)
    assert wrong.calls == right.calls and "even_odd_count(0)" in wrong.calls
    at = wrong.calls.index("even_odd_count(0)")
    assert (wrong.chosen[at], wrong.reference[at]) == ("(0, 0)", "(1, 0)")
    assert wrong.contradictions() >= 1 and right.contradictions() == 0
    assert right.chosen == right.reference  # the canonical solution is its own reference
    text = judge_report([wrong, right], 12)
    assert "2 verified runs (1 failing the reference)" in text
    # at threshold 1 the wrong run is caught and the right one kept
    assert "| 12 | 1 | 1 | 0 (0.0%) | 0 | 1: /155 |" in text
    # asked only about the inputs before the separating one, the oracle contradicts nothing
    assert at >= 1 and wrong.contradictions(at) == 0 and wrong.contradictions(at + 1) == 1
    assert "| 1 | 1 | 2 | 1 (50.0%) | 0 | 0 |" in text
    # only the first N inputs are asked
    few = judge_one(verified(task, NO_ZERO, False), task, 2, pool, provider)
    assert few.calls == wrong.calls[:2] and len(few.oracle) == 2


def test_report_only_reads_the_kept_answers(tmp_path: Path) -> None:
    task = next(t for t in HumanEvalSuite().tasks() if t.id == "HumanEval/155")
    ResultsFile(tmp_path / "results.jsonl").append(verified(task, NO_ZERO, False))
    kept = Judged(
        task_id=task.id,
        mode="heal",
        passed=False,
        limit=1,
        calls=("even_odd_count(0)",),
        chosen=("(0, 0)",),
        reference=("(1, 0)",),
        oracle=("(1, 0)",),
        seconds=1.5,
    )
    (tmp_path / "judge.jsonl").write_text(kept.model_dump_json() + "\n")
    cmd = [sys.executable, "-m", "evaluation.judge", str(tmp_path), "--probes", "1"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [*cmd, "--report-only"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "1 verified runs (1 failing the reference)" in done.stdout
    assert "usable literal on 1 of 1 (100%); of those, 1 (100%)" in done.stdout
    bad = subprocess.run(
        [*cmd[:-1], "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "--probes must be at least 1" in bad.stderr


def test_the_questions_a_run_asked_are_asked_again_and_scored() -> None:
    task = next(t for t in HumanEvalSuite().tasks() if t.id == "HumanEval/155")

    def asked(call: str, reply: str) -> dict[str, object]:
        question = f"Task: according to the spec, what does `{call}` return? ..."
        return {
            "kind": "llm",
            "node": "consult",
            "messages": [{"content": question}],
            "reply": reply,
        }

    timeline = (
        asked("even_odd_count(0)", '{"value": "(0, 0)", "reasoning": "no digits"}'),
        asked("even_odd_count(0)", '{"value": "(1, 0)"}'),  # the same question: kept once
        asked("even_odd_count(-7)", "not json"),
        {"kind": "end", "node": "consult"},
    )
    record = verified(task, NO_ZERO, False).model_copy(update={"timeline": timeline})
    assert asked_before(record) == [("even_odd_count(0)", "(0, 0)"), ("even_odd_count(-7)", "")]
    text = ask_again([record], {task.id: task}, oracle_provider([task]))
    assert "2 oracle questions the runs asked" in text
    assert "| as recorded | 1 | 0 (0% of all) |" in text  # one literal, and it was wrong
    assert "| asked again now | 2 | 2 (100% of all) |" in text  # the scripted oracle is right
