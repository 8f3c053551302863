"""Asking you when the evidence runs out: the ``Asker`` protocol, the answers it gives (``Pick``,
``NoneOfThese``, ``Skip``) and the asker of a terminal (docs/loop.md, "Asking you")."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Protocol, TextIO, runtime_checkable

from selfheal.expected import expected_problem
from selfheal.state import Answer, HealState, Question

__all__ = ["Answer", "Asker", "NoneOfThese", "Pick", "Question", "Skip", "ask_on_terminal"]


def Pick(output: str) -> Answer:
    """The offered output ``output`` (a ``Choice.output``) is the right one."""
    return Answer(kind="output", value=output)


def NoneOfThese(value: str) -> Answer:
    """None of the offered outputs is right; ``value`` (a Python expression, evaluated without
    the candidate like an example's expected value: ``datetime.date(2024, 3, 5)``) is."""
    return Answer(kind="typed", value=value)


def Skip() -> Answer:
    """No answer: the run goes on as if it had not asked."""
    return Answer(kind="skip")


@runtime_checkable
class Asker(Protocol):
    """Answers a question. May be sync or async (return an awaitable)."""

    def __call__(self, question: Question, state: HealState) -> Answer | Awaitable[Answer]: ...


def typed_problem(value: str, function: str) -> str | None:
    """Why a typed value cannot be the expected value of a test (it must be built without
    the candidate, as an example's value is), or None when it can."""
    if not value.strip():
        return "is empty; type the value the call should return, e.g. [1, 2] or 'abc'"
    return expected_problem(value, [function])


def shown(output: str) -> str:
    """An offered output as a person reads it (``raise ValueError`` -> ``raises ValueError``)."""
    return "raises " + output[6:] if output.startswith("raise ") else output


def question_lines(question: Question) -> list[str]:
    """The question as numbered lines: the input, then each output with who gave it."""
    why = (
        "candidates that pass every trusted test disagree"
        if question.kind == "disagree"
        else "every candidate fails a model-written test here, and there is no trusted test"
    )
    lines = [f"selfheal: which is right for {question.call}? ({why})"]
    for i, c in enumerate(question.choices, 1):
        who = (
            "the model's test expects it"
            if c.source == "model_test"
            else f"{c.count} candidate(s): {', '.join(c.candidates[:6])}"
        )
        lines.append(f"  {i}. {shown(c.output)[:200]}    ({who})")
    lines.append(f"  {len(question.choices) + 1}. none of these: type the right value")
    lines.append("  s. skip")
    return lines


def ask_on_terminal(
    question: Question,
    state: HealState,
    *,
    read: Callable[[], str] | None = None,
    out: TextIO | None = None,
) -> Answer:
    """An asker for a terminal: the question and numbered choices on stderr, the answer from
    stdin (a number; or, for "none of these", the value on the next line; ``s`` skips). An
    answer that is not one is asked again, saying why; end of input skips."""
    stream = out if out is not None else sys.stderr
    reader = read if read is not None else sys.stdin.readline
    n = len(question.choices)

    def prompt(text: str) -> str | None:
        print(text, end="", file=stream, flush=True)
        line = reader()
        return None if line == "" else line.strip()  # "" is end of input; "\n" an empty line

    print("\n".join(question_lines(question)), file=stream, flush=True)
    while True:
        got = prompt(f"selfheal: your answer [1-{n + 1}, s]: ")
        if got is None or got.lower() in ("s", "skip"):
            return Skip()
        if got.isdigit() and 1 <= int(got) <= n:
            return Pick(question.choices[int(got) - 1].output)
        if got.isdigit() and int(got) == n + 1:
            while True:
                value = prompt(f"selfheal: the right value of {question.call}: ")
                if value is None:
                    return Skip()
                problem = typed_problem(value, question.function)
                if problem is None:
                    return NoneOfThese(value)
                print(f"selfheal: {value!r} {problem}. Type it again.", file=stream, flush=True)
        print(
            f"selfheal: {got!r} is not an answer: type a number from 1 to {n + 1}, or s to skip.",
            file=stream,
            flush=True,
        )
