"""A simulated user that answers heal's questions from the task's reference solution (the
protocol of interactive test-driven generation, e.g. TiCoder: the user knows the intended
behaviour and answers "which output is right for this input?").

The reference runs in the scoring sandbox (a kernel of its own, as the hidden tests do), never
in the agent's process; the agent learns only the answer, a value for the input it asked
about, which is exactly what a user would type. The hidden tests are never read here."""

from __future__ import annotations

from collections.abc import Callable

from evaluation.scoring import DEFAULT_LIMITS, build_candidate
from evaluation.task import Task
from selfheal.asking import NoneOfThese, Pick, Skip, typed_problem
from selfheal.expected import import_lines
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.llm import run_sync
from selfheal.probes import probe_call
from selfheal.state import Answer, HealState, Question

__all__ = ["SimulatedUser", "reference_output"]


async def areference_output(
    task: Task, call: str, executor: Executor, limits: Limits
) -> str | None:
    """The canonical output of ``call`` on the task's reference solution (``raise Type`` when
    it raises), as candidates' outputs are written; None when the task has no reference or
    the reference does not load."""
    if not task.canonical_solution:
        return None
    # the names the call's values use (``date(2024, 3, 1)``) first, as an example's test has
    # them; the reference's own imports come after and win
    imports = import_lines(call)
    code = "\n".join([*imports, build_candidate(task, task.canonical_solution)])
    report = await executor.arun(
        code, [probe_call("asked", call)], timeout=limits.test_timeout, limits=limits
    )
    if not report.load.ok or not report.results:
        return None
    r = report.results[0]
    if r.value is not None and r.outcome in ("passed", "error"):
        return r.value
    if r.outcome == "error":
        return f"raise {r.exc_type or 'Exception'}"
    return None


def reference_output(task: Task, call: str, executor: Executor, limits: Limits) -> str | None:
    """Blocking twin of :func:`areference_output`."""
    return run_sync(areference_output(task, call, executor, limits))


class SimulatedUser:
    """An ``Asker`` (``selfheal.asking``) for the benchmark: each question is answered with the
    offered output the reference gives, else "none of these" with the reference's value (when
    it can be written as one), else a skip. ``asked`` and ``answered`` count the questions."""

    def __init__(
        self,
        task: Task,
        executor: Callable[[], Executor],
        *,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.task = task
        self._executor = executor
        self.limits = limits
        self.asked = 0
        """Questions asked."""
        self.answered = 0
        """Questions answered (an output picked or a value typed; not a skip)."""

    async def aanswer(self, question: Question) -> Answer:
        """The reference's answer to ``question`` (it runs the reference in the sandbox)."""
        want = await areference_output(self.task, question.call, self._executor(), self.limits)
        if want is None:
            return Skip()
        for choice in question.choices:
            if choice.output == want:
                return Pick(choice.output)
        if want.startswith("raise ") or typed_problem(want, question.function) is not None:
            return Skip()  # an exception, or a value that cannot be typed as an expression
        return NoneOfThese(want)

    def answer(self, question: Question) -> Answer:
        """Blocking twin of :meth:`aanswer`."""
        return run_sync(self.aanswer(question))

    async def __call__(self, question: Question, state: HealState) -> Answer:
        self.asked += 1
        answer = await self.aanswer(question)
        if answer.kind != "skip":
            self.answered += 1
        return answer
