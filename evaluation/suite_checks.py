"""Checks of a suite's tasks before any model runs on them (``python -m evaluation.suite_file``
runs both): each task's reference solution passes its hidden tests in the kernel sandbox, and
each spec's stated examples are read as trusted tests."""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.task import Task
from selfheal.kernel_sandbox.types import Executor

__all__ = ["check_examples", "check_solutions"]


def check_solutions(tasks: Sequence[Task], executor: Executor | None = None) -> dict[str, str]:
    """Run each task's ``solution`` against its hidden tests in the kernel sandbox (``executor``,
    default a pool of its own); return ``{task id: why it failed}`` for those that fail (tasks
    without one are skipped)."""
    from evaluation.scoring import score
    from selfheal.kernel_sandbox import KernelPool

    if executor is None:
        with KernelPool(size=1) as pool:
            return check_solutions(tasks, pool)
    failures: dict[str, str] = {}
    for task in tasks:
        if task.canonical_solution is not None:
            verdict = score(task, task.canonical_solution, executor)
            if not verdict.passed:
                failures[task.id] = verdict.message or verdict.outcome
    return failures


def check_examples(tasks: Sequence[Task]) -> dict[str, str]:
    """``{task id: what differs}`` for the tasks whose spec, read as a heal reads it, gives
    another number of trusted examples than the task's ``examples`` says."""
    from selfheal.examples import read_examples

    out: dict[str, str] = {}
    for task in tasks:
        read, unread = read_examples(task.prompt, task.entry_point)
        if task.examples is not None and len(read) != task.examples:
            why = "".join(f"; not read: {u.example} ({u.why})" for u in unread)
            out[task.id] = f"{len(read)} example(s) read, {task.examples} stated{why}"
    return out
