"""Checking recorded runs again with the current honesty check (``evaluation.recheck``): a
record whose messages only restated the prompt's own examples loses its leaks, a real leak
stays, and ``--write`` keeps the old file."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.honesty import HonestyReport
from evaluation.pair import error_record
from evaluation.recheck import main
from evaluation.records import TaskRecord
from evaluation.results_file import ResultsFile
from evaluation.suites import HumanEvalSuite, Task
from selfheal.config import HealConfig


def _record(task: Task, said: str, recorded_leaks: tuple[str, ...]) -> TaskRecord:
    event = {
        "node": "generate",
        "kind": "llm",
        "messages": [{"role": "user", "content": said}],
        "reply": "```python\ndef hex_key(num):\n    return 0\n```",
    }
    return error_record(task, "heal", HealConfig(), "mock:x", "").model_copy(
        update={
            "timeline": (event,),
            "honesty": HonestyReport(messages_checked=1, secret_assertions=9, leaks=recorded_leaks),
        }
    )


def test_recheck_clears_restated_examples_and_keeps_real_leaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = next(t for t in HumanEvalSuite().tasks() if t.id == "HumanEval/78")
    restated = 'It must satisfy these examples:\nhex_key("AB") == 1\nhex_key("1077E") == 2'
    secret = 'hex_key("112233445566778899AABBCCDDEEFF00") == 12'
    results = ResultsFile(tmp_path / "results.jsonl")
    results.append(_record(task, restated, ('candidate("AB") == 1', 'candidate("1077E") == 2')))
    results.append(_record(task, restated + "\n" + secret, ('candidate("AB") == 1',)))

    assert main([str(tmp_path)]) == 0  # a dry run changes nothing
    out = capsys.readouterr().out
    assert "2 records, 2 changed" in out and "leaks now: 1" in out
    assert [len(r.honesty.leaks) for r in results.read() if r.honesty] == [2, 1]

    assert main([str(tmp_path), "--write"]) == 0
    first, second = results.read()
    assert first.honesty is not None and first.honesty.leaks == ()
    assert second.honesty is not None and len(second.honesty.leaks) == 1
    assert "112233445566778899AABBCCDDEEFF00" in second.honesty.leaks[0]
    assert (tmp_path / "results.jsonl.orig").exists()


def test_recheck_of_a_missing_folder_says_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "give a folder run_benchmark wrote" in capsys.readouterr().err
