"""Questions to the user when the evidence runs out, and their answers (docs/loop.md, "Asking
you"): the input, the competing outputs, and what the user said."""

from __future__ import annotations

from typing import Literal

from selfheal._record import Record

QuestionKind = Literal["disagree", "dispute"]
"""``disagree``: candidates that pass every trusted test return different values for the input;
``dispute``: with no trusted test, every candidate fails a model-written test on the input."""

AnswerKind = Literal["output", "typed", "skip"]
"""``output``: one of the offered outputs is right; ``typed``: none of them, the right value is
typed; ``skip``: no answer (the run goes on as if it had not asked)."""


class Choice(Record):
    """One output offered as an answer."""

    output: str
    """The output as candidates returned it (its canonical text, e.g. ``[1, 2]`` or
    ``raise ValueError``), or the value a model-written test expects."""
    count: int = 0
    """How many candidates returned it (0 for a model-written test's expected value)."""
    candidates: tuple[str, ...] = ()
    """The ids of the candidates that returned it."""
    source: Literal["candidates", "model_test"] = "candidates"
    """Whether candidates returned it, or a model-written test expects it."""


class Question(Record):
    """One question: which output is right for this input?"""

    kind: QuestionKind
    """Why it is asked."""
    function: str
    """The function's name."""
    call: str
    """The input, as the call's text, e.g. ``clamp(-1, 0, 3)``."""
    choices: tuple[Choice, ...]
    """The competing outputs, most candidates first."""
    probe_id: str | None = None
    """The probe input the call is (its outputs come from there)."""
    test_id: str | None = None
    """For a ``dispute``: the model-written test every candidate fails."""


class Answer(Record):
    """What the user said."""

    kind: AnswerKind
    """A choice, a typed value, or a skip."""
    value: str = ""
    """``output``: the chosen ``Choice.output``; ``typed``: the right value as a Python
    expression (evaluated on the host side, like an example's expected value)."""


class Asked(Record):
    """A question the run asked, with its answer and the trusted test it made."""

    question: Question
    """What was asked."""
    answer: Answer
    """What came back."""
    test_id: str | None = None
    """The trusted test the answer made (None for a skip, or an answer that could not be
    written as a test: ``note`` says why)."""
    note: str = ""
    """Why no test was made, when none was."""
    iteration: int = 0
    """The round it was asked in."""
