"""Scoring in the real sandbox: right passes, wrong fails with the failing assertion named,
and crashes, hangs and broken code are failures, never errors of the harness."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from evaluation.scoring import label_assertions, score
from evaluation.suites import HumanEvalSuite, Task
from selfheal.errors import SandboxError
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.types import ExecutionReport, Limits, SandboxTest, SnippetResult

FAST = Limits(test_timeout=2.0, run_timeout=60.0, load_timeout=60.0)
"""Short per-test limit for the hang test; loading may be slow on a busy machine."""


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Task]:
    return {t.id: t for t in HumanEvalSuite().tasks()}


def test_right_solution_passes(humaneval: dict[str, Task], pool: KernelPool) -> None:
    task = humaneval["HumanEval/0"]
    body = "def has_close_elements(numbers, threshold):\n    s = sorted(numbers)\n    return any(b - a < threshold for a, b in zip(s, s[1:]))\n"
    verdict = score(task, body, pool)
    assert verdict.passed and verdict.outcome == "passed"
    assert verdict.failing_assertion is None


def test_wrong_solution_fails_and_names_the_failing_assertion(
    humaneval: dict[str, Task], pool: KernelPool
) -> None:
    task = humaneval["HumanEval/0"]
    always_true = "def has_close_elements(numbers, threshold):\n    return True\n"
    verdict = score(task, always_true, pool)
    assert not verdict.passed and verdict.outcome == "failed"
    # The second assertion of check() is the first that expects False.
    assert verdict.failing_assertion == (
        "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False"
    )
    assert verdict.failing_test == "ref-0"


def test_builtin_failure_names_its_assertion(builtin_tasks: list[Task], pool: KernelPool) -> None:
    task = next(t for t in builtin_tasks if t.id == "intervals/merge")
    assert task.canonical_solution is not None
    no_touching = task.canonical_solution.replace("start <= merged[-1][1]", "start < merged[-1][1]")
    verdict = score(task, no_touching, pool)
    assert not verdict.passed
    assert verdict.failing_assertion == "assert merge_intervals([(1, 2), (2, 3)]) == [(1, 3)]"


def test_kernel_crash_is_a_failure(humaneval: dict[str, Task], pool: KernelPool) -> None:
    code = "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(3)\n"
    verdict = score(humaneval["HumanEval/0"], code, pool, limits=FAST, retries=0)
    assert not verdict.passed and verdict.outcome == "crashed"


def test_hang_is_a_timeout_failure(humaneval: dict[str, Task], pool: KernelPool) -> None:
    code = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
    verdict = score(humaneval["HumanEval/0"], code, pool, limits=FAST, retries=0)
    assert not verdict.passed and verdict.outcome == "timeout"


def test_code_that_does_not_load_is_a_failure(humaneval: dict[str, Task], pool: KernelPool) -> None:
    verdict = score(humaneval["HumanEval/0"], "def has_close_elements(:\n", pool)
    assert not verdict.passed and verdict.outcome == "load_error"
    assert "SyntaxError" in verdict.message


def test_no_code_is_a_failure(humaneval: dict[str, Task], pool: KernelPool) -> None:
    verdict = score(humaneval["HumanEval/0"], None, pool)
    assert not verdict.passed and verdict.outcome == "no_code"


def test_candidate_cannot_replace_a_helper_the_reference_uses(
    humaneval: dict[str, Task], pool: KernelPool
) -> None:
    # find_zero is checked through poly(); a candidate that redefines poly() to always
    # return 0 must still fail, because the reference defines poly() again before check().
    cheat = "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 12345.0\n"
    verdict = score(humaneval["HumanEval/32"], cheat, pool)
    assert not verdict.passed and verdict.outcome == "failed"


def test_candidate_may_use_the_prompt_helpers(humaneval: dict[str, Task], pool: KernelPool) -> None:
    task = humaneval["HumanEval/38"]
    # Only the entry point is returned; encode_cyclic comes from the prompt's context.
    code = "def decode_cyclic(s):\n    return encode_cyclic(encode_cyclic(s))\n"
    assert score(task, code, pool).passed


class _RefusingExecutor:
    """An Executor whose sandbox gives up (as a real one may under a hostile candidate)."""

    async def arun(
        self,
        code: str,
        tests: Sequence[str | SandboxTest],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> ExecutionReport:
        raise SandboxError("could not start a kernel")

    async def arun_snippet(
        self,
        code: str,
        *,
        setup: str = "",
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> SnippetResult:
        raise SandboxError("could not start a kernel")


def test_sandbox_refusal_is_a_failing_verdict_not_a_crash(humaneval: dict[str, Task]) -> None:
    verdict = score(
        humaneval["HumanEval/0"],
        "def has_close_elements(n, t):\n    return 1\n",
        _RefusingExecutor(),
    )
    assert not verdict.passed and verdict.outcome == "sandbox_error"
    assert "could not start a kernel" in verdict.message


def test_label_assertions_keeps_semantics_and_labels_each_assert() -> None:
    code = "def check(c):\n    assert c(1) == 2\n    assert c(2) == 3, 'custom'\n"
    labelled = label_assertions(code)
    ns: dict[str, object] = {}
    exec(labelled, ns)
    check = ns["check"]
    assert callable(check)
    check(lambda x: x + 1)  # a right candidate still passes
    with pytest.raises(AssertionError, match=r"reference assertion failed: assert c\(1\) == 2$"):
        check(lambda x: x)
    with pytest.raises(AssertionError, match=r"assert c\(2\) == 3, 'custom' -- custom"):
        check(lambda x: {1: 2}.get(x, 0))
