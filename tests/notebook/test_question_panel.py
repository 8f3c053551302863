"""The question in the live view: when the candidates disagree and nothing trusted separates
them, the view shows the input and the competing outputs; one click answers, and the answer
is a trusted test the run goes on with. Scripted mock model, real kernel pool."""

from __future__ import annotations

import asyncio
import threading

from selfheal.config import HealConfig
from selfheal.graph.runner import Run
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.request import HealRequest
from selfheal.widgets.asker import FutureAsker
from selfheal.widgets.view import HealView

SPEC = (
    "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]. "
    "Example: clamp(5, 0, 3) -> 3"
)
GOOD = "```python\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n```"
BUGGY = "```python\ndef clamp(x, lo, hi):\n    return min(x, hi)\n```"


async def _wait_for(pred: object, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():  # type: ignore[operator]
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def _run(pool: KernelPool, asker: FutureAsker) -> Run:
    config = HealConfig(
        candidates=2,
        oracle_calls=0,
        memory=False,
        autonomy="review_repairs",
        first_answer="instruct",
    )
    mock = MockProvider({"generator": [BUGGY, GOOD], "test_writer": ["```python\n```"]})
    return Run.start(HealRequest(SPEC, provider=mock, config=config, executor=pool, asker=asker))


async def test_the_view_shows_the_question_and_a_click_answers(pool: KernelPool) -> None:
    asker = FutureAsker()
    run = _run(pool, asker)
    view = HealView(run.state, state_getter=lambda: run.state, live=True)
    view.attach_loop(asyncio.get_running_loop())
    panel = view.bind_asker(asker)
    assert panel.box in view.children and panel.box.layout.display == "none"
    task = asyncio.create_task(run.arun())
    await _wait_for(lambda: asker.waiting)
    question = asker.question
    assert question is not None and question.call == "clamp(-5, 0, 3)"
    assert panel.box.layout.display == "flex"
    assert "clamp(-5, 0, 3)" in panel.title.value
    assert [b.description for b in panel.buttons] == [c.output for c in question.choices]
    assert "waiting for your answer" in view.header.value
    # a value that the candidate would have to compute is refused, saying why
    panel.value.value = "clamp(0, 0, 3)"
    panel.none_button.click()
    assert asker.waiting and "candidate would define" in panel.note.value
    # one click on the right output answers; the run goes on with it as a trusted test
    right = next(b for b in panel.buttons if b.description == "0")
    right.click()
    assert panel.box.layout.display == "none"
    # answered: no longer waiting at once, before the run's loop hears it (the view's header
    # must not say "waiting for your answer" after the click)
    assert not asker.waiting and asker.question is None
    result = await asyncio.wait_for(task, 120)
    (asked,) = result.state.questions
    assert asked.answer.value == "0" and asked.test_id == "ua1"
    assert result.function(-5, 0, 3) == 0
    view.refresh(run.state, live=False)
    assert "waiting for your answer" not in view.header.value


async def test_none_of_these_takes_the_typed_value(pool: KernelPool) -> None:
    asker = FutureAsker()
    run = _run(pool, asker)
    view = HealView(run.state, state_getter=lambda: run.state, live=True)
    panel = view.bind_asker(asker)
    task = asyncio.create_task(run.arun())
    await _wait_for(lambda: asker.waiting)
    panel.value.value = "0"
    panel.none_button.click()
    result = await asyncio.wait_for(task, 120)
    (asked,) = result.state.questions
    assert (asked.answer.kind, asked.answer.value) == ("typed", "0")
    assert result.state.test("ua1") is not None


async def test_waiting_is_seen_only_once_the_panel_shows(pool: KernelPool) -> None:
    """The run asks on selfheal's loop thread: whoever reads ``waiting`` from another thread
    (a click, your code) finds the panel already shown, never a question still being drawn."""
    asker = FutureAsker()
    run = _run(pool, asker)
    view = HealView(run.state, state_getter=lambda: run.state, live=True)
    drawing, go_on = threading.Event(), threading.Event()

    def slow_listener(_question: object, _state: object) -> None:
        drawing.set()
        go_on.wait(30)

    asker.on_question(slow_listener)
    panel = view.bind_asker(asker)
    task = asyncio.create_task(run.arun())
    await _wait_for(drawing.is_set)
    assert asker.question is not None and asker.offered
    assert not asker.waiting  # its listeners are still drawing it
    go_on.set()
    await _wait_for(lambda: asker.waiting)
    assert panel.box.layout.display == "flex" and "waiting for your answer" in view.header.value
    next(b for b in panel.buttons if b.description == "0").click()
    assert (await asyncio.wait_for(task, 120)).function(-5, 0, 3) == 0
