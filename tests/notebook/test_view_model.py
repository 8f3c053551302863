"""The view's model (state -> rows) and its text/markdown rendering, on real demo runs."""

from __future__ import annotations

import time

from selfheal.approval import Approve
from selfheal.graph.runner import Run
from selfheal.state import Event, Lesson
from selfheal.widgets import render_markdown, render_text
from selfheal.widgets.model import (
    approval_view,
    code_view,
    lessons_view,
    row_detail,
    summary_line,
    timeline_rows,
    unified_diff,
)
from selfheal.widgets.model import (
    test_rows as rows_of_tests,
)

DEMO_NODES = [
    "plan_tests",
    "generate",
    "gate",
    "adversarial",
    "execute",
    "diagnose",
    "lessons",
    "repair",
    "gate",
    "execute",
    "critic",
    "finish",
]


def test_timeline_has_one_row_per_node_with_tokens_and_model(demo_run: Run) -> None:
    result = demo_run.run()
    rows = timeline_rows(result.state)
    assert [r.node for r in rows] == DEMO_NODES
    assert all(r.state == "done" and r.icon == "✓" for r in rows)
    ends = [e for e in result.state.events if e.kind == "end"]
    assert [r.tokens for r in rows] == [e.prompt_tokens + e.completion_tokens for e in ends]
    assert sum(r.tokens for r in rows) == result.usage.total_tokens
    by_node = {r.node: r for r in rows}
    assert by_node["diagnose"].model == "mock:demo"
    assert by_node["execute"].model == ""
    assert rows[4].detail.startswith("4/7 passed") and rows[9].detail == "7/7 passed"
    assert rows[-1].detail == "status verified"
    assert summary_line(result.state).startswith("median: verified · iteration 2/4")


def test_live_start_event_shows_a_running_row(demo_run: Run) -> None:
    demo_run.step()  # plan_tests
    s = demo_run.state
    start = Event(time=time.time(), node="generate", kind="start", iteration=s.iteration)
    live = s.model_copy(update={"events": (*s.events, start)})
    rows = timeline_rows(live, live=True)
    assert [(r.node, r.state) for r in rows] == [("plan_tests", "done"), ("generate", "running")]
    assert "running generate" in summary_line(live, live=True)
    # the same unfinished node in a log that is not live was interrupted
    assert timeline_rows(live, live=False)[-1].state == "error"


def test_waiting_row_then_human_decision_row(review_run: Run) -> None:
    paused = review_run.run()
    assert paused.status == "awaiting_approval"
    rows = timeline_rows(paused.state)
    assert [r.node for r in rows][-3:] == ["repair", "gate", "approval"]
    assert rows[-1].state == "waiting"
    assert rows[-2].detail == "awaiting approval"  # the gate's own decision event stays inside it
    done = review_run.resume(Approve("looks right"))
    rows = timeline_rows(done.state)
    human = [r for r in rows if r.node == "approval"]
    assert len(human) == 1 and human[0].state == "done"
    assert human[0].detail == "approve: looks right"
    assert [r.node for r in rows][-4:] == ["approval", "execute", "critic", "finish"]


def test_tests_show_origin_trust_and_outcome_per_iteration(demo_run: Run) -> None:
    state = demo_run.run().state
    rows = {r.id: r for r in rows_of_tests(state)}
    assert rows["ex1"].origin == "example" and rows["ex1"].trust == "trusted"
    assert rows["sb2"].origin == "spec_blind" and rows["sb2"].trust == "untrusted"
    assert rows["adv2"].origin == "adversarial"
    assert rows["sb2"].outcomes == ("failed", "passed")  # even length: wrong first, then fixed
    assert rows["ex1"].outcomes == ("passed", "passed")
    assert rows["sb2"].source == "assert median([4, 1, 3, 2]) == 2.5"
    assert rows["sb4"].source.endswith("…")  # a multi-line test shows its first line
    quarantined = state.model_copy(
        update={
            "tests": tuple(
                t.model_copy(update={"quarantined": True, "quarantine_reason": "wrong expectation"})
                if t.id == "adv1"
                else t
                for t in state.tests
            )
        }
    )
    row = {r.id: r for r in rows_of_tests(quarantined)}["adv1"]
    assert row.trust == "quarantined" and row.quarantine_reason == "wrong expectation"


def test_code_view_final_code_and_diff_against_previous(demo_run: Run) -> None:
    state = demo_run.run().state
    cv = code_view(state)
    assert cv.iteration == 2 and cv.label == "attempt 2 (final)"
    assert cv.code == state.final_code
    assert "-    return ordered[len(ordered) // 2]\n" in cv.diff
    assert "+    if not values:\n" in cv.diff
    assert cv.diff.startswith("--- attempt1.py\n+++ attempt2.py\n")


def test_pending_proposal_code_and_approval_view(review_run: Run) -> None:
    state = review_run.run().state
    cv = code_view(state)
    assert cv.label == "proposed repair" and cv.iteration == 2
    assert cv.code == state.pending.code if state.pending else False
    # every diff line is its own line (no "missing newline" joins)
    assert "-    return ordered[len(ordered) // 2]\n+    n = len(ordered)\n" in cv.diff
    av = approval_view(state)
    assert av is not None and av.kind == "repair" and av.iteration == 2
    assert av.diagnosis.startswith("For an even number of values")
    assert "Strategy: Raise ValueError" in av.diagnosis
    assert av.code == cv.code and av.diff == cv.diff
    assert approval_view(review_run.resume(Approve()).state) is None


def test_lessons_current_and_carried_into_a_fork(demo_run: Run) -> None:
    state = demo_run.run().state
    lv = lessons_view(state)
    assert lv.current == (
        "For an even number of values, average the two middle values.",
        "Check for an empty list first and raise ValueError.",
    )
    assert lv.carried == ()
    fork = demo_run.fork(at_iteration=1, lessons=["Sort before picking the middle."])
    assert lessons_view(fork.state).carried == ("Sort before picking the middle.",)
    assert lessons_view(fork.state).current == ("Sort before picking the middle.",)
    # a lesson written at iteration 0 (before any code) counts as carried in
    s0 = state.model_copy(update={"lessons": (Lesson(text="from an earlier run", iteration=0),)})
    assert lessons_view(s0).carried == ("from an earlier run",)


def test_row_detail_shows_calls_report_and_diagnosis(demo_run: Run) -> None:
    state = demo_run.run().state
    rows = timeline_rows(state)
    execute = row_detail(state, rows[4])
    assert execute.title == "✓ execute"
    assert any(line.startswith("✗ sb2 failed AssertionError") for line in execute.lines)
    assert "ordered[len(ordered) // 2]" in execute.code
    diagnose = row_detail(state, rows[5])
    assert any(line.startswith("model call: mock:demo") for line in diagnose.lines)
    assert any("blame code" in line and "upper middle" in line for line in diagnose.lines)
    generate = row_detail(state, rows[1])
    assert generate.code == state.attempts[0].code
    plan = row_detail(state, rows[0])
    assert any(line.startswith("+ sb1 (spec_blind)") for line in plan.lines)
    assert any(line.startswith("+ ex1 (example)") for line in plan.lines)
    # each model call of a row, as the model saw it: the messages sent and the raw reply
    (call,) = plan.calls
    assert call.label.startswith("test_writer via test_writer.yaml") and "mock:demo" in call.label
    assert "Raise ValueError if the list is empty" in call.messages[-1].content
    assert "# why: odd length, unsorted input" in call.reply
    assert [c.label.split()[0] for c in diagnose.calls] == ["debugger"]
    assert execute.calls == ()


def test_text_and_markdown_render_every_panel(review_run: Run) -> None:
    state = review_run.run().state
    text = render_text(state)
    assert "median: waiting for your approval" in text
    assert "● approval" in text
    assert "sb2    spec_blind  untrusted   ✗" in text
    assert "Approval needed (repair, would be attempt 2)" in text
    assert "handle.approve()" in text
    md = render_markdown(state)
    assert "| ✓ | diagnose | 1 |" in md
    assert "```diff" in md and "**Approval needed** (repair)" in md
    assert "| sb2 | spec_blind | untrusted | ✗ |" in md


def test_unified_diff_handles_missing_trailing_newlines() -> None:
    d = unified_diff("a\nb", "a\nc")
    assert d.splitlines()[-2:] == ["-b", "+c"]
    assert unified_diff("same", "same") == ""
    assert unified_diff("", "x").splitlines()[-1] == "+x"
