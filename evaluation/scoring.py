"""Scoring: run a candidate against a task's reference tests in the sandbox.

Scoring happens only after the agent has finished, in the same kernel sandbox the agent
uses (a fresh interpreter, no host secrets, not in the user's cwd). Whatever the candidate
does (crash the kernel, hang, print, raise) ends as a failing verdict, never as an error of
the harness.

Every ``assert`` in a reference test is rewritten (with ``ast``) so that, when it fails, its
message is its own source line: for HumanEval's multi-assert ``check`` the verdict names the
exact assertion that failed.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from typing import Literal

from evaluation.task import Task
from selfheal.errors import CandidateTimeout, SelfHealError
from selfheal.kernel_sandbox.types import AssertTest, Executor, Limits, Outcome
from selfheal.llm import run_sync
from selfheal.records import Record

__all__ = [
    "LABEL_PREFIX",
    "ReferenceTestResult",
    "ReferenceVerdict",
    "VerdictOutcome",
    "build_candidate",
    "label_assertions",
    "score",
]

LABEL_PREFIX = "reference assertion failed: "
"""Start of the message of a labelled reference assertion."""

VerdictOutcome = Literal[
    "passed", "failed", "error", "timeout", "crashed", "load_error", "no_code", "sandbox_error"
]
"""``passed``; ``failed`` (an assertion failed); ``error`` (the candidate raised);
``timeout``/``crashed`` (hung or killed the kernel); ``load_error`` (the code did not
load: syntax error, bad import...); ``no_code`` (the agent produced nothing);
``sandbox_error`` (the sandbox itself refused the run; still counted as a failure)."""

DEFAULT_LIMITS = Limits(test_timeout=30.0, run_timeout=240.0, load_timeout=60.0)
"""Scoring limits: generous, since HumanEval's ``check`` runs many assertions in one test
and a loaded machine (a local model on the same cores) slows kernels down. A correct
solution must never fail the reference for lack of time."""


class ReferenceTestResult(Record):
    """What one reference test did."""

    test_id: str
    """``ref-<n>``, in the order of ``Task.reference_tests``."""
    outcome: Outcome
    """Sandbox outcome."""
    exc_type: str | None = None
    """Exception class, when it failed."""
    message: str = ""
    """Exception message (for a labelled assertion: the assertion's source)."""


class ReferenceVerdict(Record):
    """The reference verdict on one piece of code."""

    passed: bool
    """True only if the code loaded and every reference test passed."""
    outcome: VerdictOutcome
    """How it ended (the first failure decides)."""
    failing_test: str | None = None
    """Id of the first reference test that did not pass."""
    failing_assertion: str | None = None
    """Source of the reference assertion that failed, when an assertion failed."""
    message: str = ""
    """Error message of the first failure (or of the load / sandbox failure)."""
    tests: tuple[ReferenceTestResult, ...] = ()
    """Per reference test results."""
    duration: float = 0.0
    """Seconds the scoring run took."""


class _AssertLabeller(ast.NodeTransformer):
    def __init__(self, source: str) -> None:
        self._source = source

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        text = ast.get_source_segment(self._source, node) or ast.unparse(node)
        label: ast.expr = ast.Constant(value=LABEL_PREFIX + " ".join(text.split()))
        if node.msg is not None:
            label = ast.BinOp(
                left=ast.BinOp(left=label, op=ast.Add(), right=ast.Constant(value=" -- ")),
                op=ast.Add(),
                right=ast.Call(
                    func=ast.Name(id="str", ctx=ast.Load()), args=[node.msg], keywords=[]
                ),
            )
        return ast.copy_location(ast.Assert(test=node.test, msg=label), node)


def label_assertions(test_code: str) -> str:
    """Rewrite ``test_code`` so a failing ``assert`` reports its own source as message.

    Code that does not parse is returned unchanged (the sandbox then reports the error)."""
    try:
        tree = ast.parse(test_code)
    except SyntaxError:
        return test_code
    tree = _AssertLabeller(test_code).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def build_candidate(task: Task, code: str) -> str:
    """The program scored for ``code``: the prompt's context (imports, helpers), then the code."""
    if not task.context_code.strip():
        return code
    return task.context_code.rstrip("\n") + "\n\n\n" + code


def _assertion_from(message: str) -> str | None:
    if message.startswith(LABEL_PREFIX):
        first_line = message[len(LABEL_PREFIX) :].split("\n", 1)[0]
        return first_line.split(" -- ", 1)[0]
    return None


def score(
    task: Task,
    code: str | None,
    executor: Executor,
    *,
    limits: Limits = DEFAULT_LIMITS,
    clock: Callable[[], float] = time.monotonic,
    retries: int = 1,
) -> ReferenceVerdict:
    """Run ``code`` against ``task.reference_tests`` and return the verdict.

    A ``timeout`` or ``crashed`` verdict is re-run up to ``retries`` times in a fresh kernel
    and kept only if it happens again, so a momentarily overloaded machine cannot turn a
    correct solution into a failure; a candidate that really hangs or crashes fails every time.
    """
    verdict = _score_once(task, code, executor, limits=limits, clock=clock)
    for _ in range(retries):
        if verdict.outcome not in ("timeout", "crashed", "sandbox_error"):
            break
        verdict = _score_once(task, code, executor, limits=limits, clock=clock)
    return verdict


def _score_once(
    task: Task,
    code: str | None,
    executor: Executor,
    *,
    limits: Limits,
    clock: Callable[[], float],
) -> ReferenceVerdict:
    if code is None or not code.strip():
        return ReferenceVerdict(
            passed=False, outcome="no_code", message="The agent returned no code."
        )
    tests = [
        AssertTest(id=f"ref-{i}", code=label_assertions(source))
        for i, source in enumerate(task.reference_tests)
    ]
    started = clock()
    try:
        report = run_sync(
            executor.arun(
                build_candidate(task, code), tests, timeout=limits.test_timeout, limits=limits
            )
        )
    except SelfHealError as exc:
        # A candidate that makes the sandbox give up is a failing candidate, not a harness
        # crash: the verdict records why.
        return ReferenceVerdict(
            passed=False,
            outcome="timeout" if isinstance(exc, CandidateTimeout) else "sandbox_error",
            message=f"{type(exc).__name__}: {exc}",
            duration=clock() - started,
        )
    duration = clock() - started
    results = tuple(
        ReferenceTestResult(
            test_id=r.test_id, outcome=r.outcome, exc_type=r.exc_type, message=r.message
        )
        for r in report.results
    )
    if not report.load.ok:
        outcome: VerdictOutcome = "load_error"
        if report.load.outcome in ("timeout", "crashed"):
            outcome = report.load.outcome
        return ReferenceVerdict(
            passed=False,
            outcome=outcome,
            message=f"{report.load.exc_type or 'load failure'}: {report.load.message}".strip(),
            tests=results,
            duration=duration,
        )
    if len(report.results) != len(tests):
        return ReferenceVerdict(
            passed=False,
            outcome="sandbox_error",
            message=f"The sandbox returned {len(report.results)} results for {len(tests)} tests.",
            tests=results,
            duration=duration,
        )
    for r in report.results:
        if r.outcome != "passed":
            return ReferenceVerdict(
                passed=False,
                outcome=r.outcome,
                failing_test=r.test_id,
                failing_assertion=_assertion_from(r.message),
                message=f"{r.exc_type}: {r.message}" if r.exc_type else r.message,
                tests=results,
                duration=duration,
            )
    return ReferenceVerdict(passed=True, outcome="passed", tests=results, duration=duration)
