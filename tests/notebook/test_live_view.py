"""The live pieces without a frontend: FutureApprover, HealView fed by a real run, buttons."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path

import pytest

from selfheal.approval import Approve
from selfheal.errors import ConfigError
from selfheal.graph.runner import Run
from selfheal.widgets import FutureApprover, render_text
from selfheal.widgets.view import HealView
from selfheal.widgets.viewmodel import timeline_rows


async def _wait_for(pred: object, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():  # type: ignore[operator]
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_future_approver_resolves_from_another_thread(review_run: Run) -> None:
    approver = FutureApprover()
    seen: list[str] = []
    approver.on_proposal(lambda p, s: seen.append(p.kind))
    task = asyncio.create_task(review_run.arun(approver))
    await _wait_for(lambda: approver.waiting)
    assert seen == ["repair"]
    assert approver.proposal is not None and "if not values" in approver.proposal.code
    t = threading.Thread(target=approver.decide, args=(Approve(),))
    t.start()
    t.join()
    result = await asyncio.wait_for(task, 120)
    assert result.status == "verified"
    assert [d.kind for d in result.state.decisions] == ["approve"]
    with pytest.raises(ConfigError, match="No proposal is waiting"):
        approver.decide(Approve())


async def test_view_follows_a_live_run_and_buttons_answer(review_run: Run) -> None:
    view = HealView(review_run.state, state_getter=lambda: review_run.state, live=True)
    view.attach_loop(asyncio.get_running_loop())
    review_run.ctx = dataclasses.replace(review_run.ctx, sink=view.on_event)
    approver = FutureApprover()
    view.bind(approver)
    task = asyncio.create_task(review_run.arun(approver))
    await _wait_for(lambda: approver.waiting)
    rows = timeline_rows(review_run.state)
    # the queued events reach the view: its timeline ends up with one row per event row
    await _wait_for(lambda: len(view.timeline_box.children) == len(rows))
    assert view.approval_panel.layout.display == "flex"
    assert "waiting for your approval" in view.header.value
    assert "upper middle element" in view.diagnosis_html.value
    assert "selfheal-diff-add" in view.diff_html.value
    assert "if not values" in view.edit_area.value
    # the round waiting for approval: three candidates, approving runs them all
    assert "The round proposes 3 candidates" in view.round_html.value
    assert 'data-candidate="c7"' in view.candidates_html.value
    assert "proposed" in view.candidates_html.value
    # a click on a timeline row shows its detail
    view.timeline_box.children[4].click()
    assert "✓ execute" in view.detail.value and "ex2 failed" in view.detail.value
    assert "c1 greedy, round 1: trusted 1/2" in view.detail.value
    # a model call's exchange folds out under the row's detail (the test writer is asked
    # with the first generation)
    view.timeline_box.children[2].click()
    assert '<details class="selfheal-call"><summary>model call: test_writer via' in (
        view.detail.value
    )
    assert "# why: odd length, unsorted input" in view.detail.value
    # the user edits the code and clicks "Run my edit"
    edited = view.edit_area.value.replace("median() of an empty list", "empty list")
    view.edit_area.value = edited
    view.edit_button.click()
    assert view.approval_panel.layout.display == "none"
    result = await asyncio.wait_for(task, 120)
    assert result.status == "verified" and result.code == edited
    view.refresh(review_run.state, live=False)
    assert "verified" in view.header.value
    assert len(view.timeline_box.children) == len(timeline_rows(review_run.state))
    assert "approve" not in view.header.value
    assert "empty list" in view.code_html.value


async def test_reject_button_sends_the_reason(review_run: Run) -> None:
    view = HealView(review_run.state, state_getter=lambda: review_run.state, live=True)
    approver = FutureApprover()
    view.bind(approver)
    task = asyncio.create_task(review_run.arun(approver))
    await _wait_for(lambda: approver.waiting)
    first = approver.proposal
    view.reason.value = "keep the first version's style"
    view.reject_button.click()
    # the rejection and its reason reach the run, which asks for another repair: a new proposal
    await _wait_for(lambda: approver.waiting and approver.proposal is not first)
    decisions = review_run.state.decisions
    assert [(d.kind, d.reason) for d in decisions] == [("reject", "keep the first version's style")]
    view.approve_button.click()
    result = await asyncio.wait_for(task, 120)
    assert [d.kind for d in result.state.decisions] == ["reject", "approve"]


def test_view_of_a_finished_state_and_text_fallback(demo_run: Run) -> None:
    state = demo_run.run().state
    view = HealView(state)
    assert len(view.timeline_box.children) == len(timeline_rows(state))
    assert view.approval_panel.layout.display == "none"
    assert "median: verified" in view.header.value
    assert "<th>it1</th><th>it2</th>" in view.tests_html.value
    assert "average the two middle values" in view.lessons_html.value
    # the evidence heads the finished view; the Candidates tab marks the chosen one
    assert f"Evidence: {state.evidence.summary}" in view.header.value if state.evidence else False
    assert [view.tabs.get_title(i) for i in range(5)] == [
        "Timeline",
        "Candidates",
        "Tests",
        "Code",
        "Lessons",
    ]
    panel = view.candidates_html.value
    assert panel.count("<tr") == 8  # a header and seven candidates
    assert '<tr class="selfheal-chosen" data-candidate="c5">' in panel
    assert "cluster 0 won with 3 of 3 candidate(s)" in panel
    assert "<code>median([1, 2, 3, 4])</code>" in panel
    assert "code of c5 (patch) ▶ chosen" in panel
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == render_text(state)
    assert "| ✓ | select |" in bundle["text/markdown"]
    assert "| ✓ | **c5** ▶ | patch |" in bundle["text/markdown"]
    assert repr(view) == render_text(state)


def test_buttons_do_nothing_without_a_waiting_proposal(demo_run: Run) -> None:
    view = HealView(demo_run.run().state)
    approver = FutureApprover()
    view.bind(approver)
    view.approve_button.click()  # no proposal: ignored, no exception
    assert not approver.waiting


def test_copy_as_pytest_shows_and_saves_the_tests_file(
    demo_run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = demo_run.run().state
    view = HealView(state)
    assert view.pytest_area.layout.display == "none"
    view.pytest_button.click()
    text = view.pytest_area.value
    assert view.pytest_area.layout.display == ""
    assert text.startswith('"""Tests kept by selfheal for median')
    assert "def test_ex1():" in text and "def median(values):" in text
    compile(text, "test_median.py", "exec")
    monkeypatch.chdir(tmp_path)
    assert view.pytest_path.value == "test_median.py"
    view.save_button.click()
    assert (tmp_path / "test_median.py").read_text() == text
    assert "saved to" in view.save_note.value


def test_the_header_says_the_run_waits_while_an_approver_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An approver that asks where the run goes (``%selfheal``'s input box under the view):
    while it asks, the header says the run waits for you, not ``starting``."""
    from nb_fakes import InProcessExecutor

    from selfheal import notebook
    from selfheal.config import HealConfig
    from selfheal.llm.mock import DEMO_SPEC, MockProvider
    from selfheal.request import HealRequest

    views: list[HealView] = []
    make_view = notebook._make_view

    def keep(*args: object, **kwargs: object) -> HealView:
        view = make_view(*args, **kwargs)  # type: ignore[arg-type]
        views.append(view)
        return view

    monkeypatch.setattr(notebook, "_make_view", keep)
    headers: list[str] = []

    def approver(proposal: object, state: object) -> object:
        headers.append(views[0].header.value)
        return Approve()

    request = HealRequest(
        DEMO_SPEC,
        provider=MockProvider.demo(),
        executor=InProcessExecutor(),
        config=HealConfig(autonomy="review_repairs", memory=False),
        approver=approver,  # type: ignore[arg-type]
    )
    result = notebook.heal_in_notebook("live", request, show=False)
    assert result.verified and [d.kind for d in result.state.decisions] == ["approve"]
    assert len(headers) == 1 and "median: waiting for your approval" in headers[0], headers
