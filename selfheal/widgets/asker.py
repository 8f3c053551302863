"""``FutureAsker``: an async asker whose answers come from the view's buttons (or code), and
``QuestionPanel``, the panel that shows a question while the run waits (docs/notebook.md,
"Questions")."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import Any

from selfheal.asking import NoneOfThese, Pick, Skip, question_lines, shown, typed_problem
from selfheal.state import Answer, HealState, Question
from selfheal.widgets.pending import Pending

QuestionListener = Callable[[Question, HealState], None]


class FutureAsker(Pending[Question, Answer]):
    """Implements ``selfheal.asking.Asker``: each call returns a future that ``answer``
    resolves. ``on_question`` listeners (the view's question panel) hear about each question."""

    nothing_waiting = (
        "No question is waiting for an answer (it was answered already, or the run "
        "has not asked). Check `handle.question` before answering."
    )

    @property
    def question(self) -> Question | None:
        """The question waiting for an answer, if any."""
        return self.pending

    def __call__(self, question: Question, state: HealState) -> asyncio.Future[Answer]:
        return self._offer(question, state)

    def on_question(self, listener: QuestionListener) -> None:
        self._listen(listener)

    def answer(self, answer: Answer) -> None:
        """Answer the waiting question. Safe to call from any thread."""
        self._resolve(answer)


def _widgets() -> Any:
    import ipywidgets as w

    return w


class QuestionPanel:
    """The question's panel (``box``, hidden until a question comes): one click answers."""

    def __init__(self, asker: FutureAsker) -> None:
        w = _widgets()
        self.asker = asker
        self.title = w.HTML()
        self.choices = w.HBox()
        self.choices.add_class("selfheal-choices")
        self.value = w.Text(placeholder="the right value, e.g. [1, 2] or 'abc'")
        self.value.add_class("selfheal-typed")
        self.none_button = w.Button(description="None of these", icon="pencil")
        self.none_button.add_class("selfheal-none-of-these")
        self.skip_button = w.Button(description="Skip", icon="forward")
        self.skip_button.add_class("selfheal-skip")
        self.note = w.HTML()
        self.buttons: list[Any] = []
        """One per offered output, in the question's order."""
        self.none_button.on_click(lambda _b: self._typed())
        self.skip_button.on_click(lambda _b: self._send(Skip()))
        self.box = w.VBox(
            [
                self.title,
                self.choices,
                w.HBox([self.value, self.none_button, self.skip_button]),
                self.note,
            ],
            layout=w.Layout(display="none", border="1px solid #d0a030", padding="6px"),
        )
        self.box.add_class("selfheal-question")
        asker.on_question(lambda question, _state: self.show(question))

    def show(self, question: Question) -> None:
        """Show ``question`` with a button per output."""
        w = _widgets()
        head, *rest = question_lines(question)
        self.title.value = (
            f"<b>A question for you</b><p>{html.escape(head.removeprefix('selfheal: '))}</p>"
        )
        self.buttons = []
        for line, choice in zip(rest, question.choices, strict=False):
            button = w.Button(description=shown(choice.output)[:60], tooltip=line.strip())
            button.add_class("selfheal-choice")
            button.on_click(lambda _b, out=choice.output: self._send(Pick(out)))
            self.buttons.append(button)
        self.choices.children = tuple(self.buttons)
        self.value.value = ""
        self.note.value = ""
        self.box.layout.display = "flex"

    def _typed(self) -> None:
        question = self.asker.question
        if question is None:
            return
        problem = typed_problem(self.value.value, question.function)
        if problem is not None:
            self.note.value = f"<i>{html.escape(repr(self.value.value))} {html.escape(problem)}</i>"
            return
        self._send(NoneOfThese(self.value.value.strip()))

    def _send(self, answer: Answer) -> None:
        if not self.asker.waiting:
            return
        self.asker.answer(answer)
        self.box.layout.display = "none"
