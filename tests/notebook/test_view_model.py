"""The view's model (state -> rows) and its text/markdown rendering, on real demo runs."""

from __future__ import annotations

import time

from nb_fakes import InProcessExecutor

from selfheal.approval import Approve
from selfheal.config import HealConfig
from selfheal.diffs import unified_diff
from selfheal.graph.runner import Run
from selfheal.llm import mock_demo as mock
from selfheal.llm.mock import DEMO_SPEC, MockProvider
from selfheal.request import HealRequest
from selfheal.state import Event, Lesson
from selfheal.widgets import render_markdown, render_text
from selfheal.widgets.candidates import candidates_view, evidence_summary
from selfheal.widgets.detail import row_candidates, row_detail
from selfheal.widgets.viewmodel import (
    approval_note,
    approval_view,
    code_view,
    lessons_view,
    summary_line,
    timeline_rows,
)
from selfheal.widgets.viewmodel import (
    test_rows as rows_of_tests,
)

# the demo: greedy + sample fail the even example, the top-up to 4 fails too, a diagnosis,
# lessons, a repair round of 3 candidates (patch, patch, rewrite) that agree
DEMO_NODES = [
    "recall",
    "plan_tests",
    "generate",
    "gate",
    "execute",
    "select",
    "generate",
    "gate",
    "execute",
    "select",
    "diagnose",
    "lessons",
    "repair",
    "gate",
    "execute",
    "select",
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
    assert by_node["execute"].model == "" and by_node["select"].model == ""
    assert rows[4].detail.startswith("ran 2 candidate(s)")
    assert rows[14].detail.startswith("ran 3 candidate(s)")
    assert "no candidate of 4 passes every trusted test" in rows[9].detail
    assert rows[15].detail.startswith("chose c5 (patch): 2/2 trusted tests pass")
    assert rows[0].detail.startswith("nothing remembered for this spec")
    assert rows[-1].detail.startswith("status verified; remembered ")
    assert summary_line(result.state).startswith("median: verified · iteration 2/2")


def test_live_start_event_shows_a_running_row(demo_run: Run) -> None:
    demo_run.step()  # recall
    demo_run.step()  # plan_tests
    s = demo_run.state
    start = Event(time=time.time(), node="generate", kind="start", iteration=s.iteration)
    live = s.model_copy(update={"events": (*s.events, start)})
    rows = timeline_rows(live, live=True)
    assert [(r.node, r.state) for r in rows] == [
        ("recall", "done"),
        ("plan_tests", "done"),
        ("generate", "running"),
    ]
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
    assert [r.node for r in rows][-4:] == ["approval", "execute", "select", "finish"]


def test_tests_show_origin_trust_and_outcome_per_iteration() -> None:
    run = Run.start(
        HealRequest(
            DEMO_SPEC,
            provider=MockProvider.demo(),
            executor=InProcessExecutor(),
            config=HealConfig(adversarial_tests=True, spec_blind_tests=True),
        )
    )
    state = run.run().state
    assert state.status == "verified"
    rows = {r.id: r for r in rows_of_tests(state)}
    assert rows["ex1"].origin == "example" and rows["ex1"].trust == "trusted"
    assert rows["sb2"].origin == "spec_blind" and rows["sb2"].trust == "untrusted"
    assert rows["adv2"].origin == "adversarial"
    assert rows["ex2"].outcomes == ("failed", "passed")  # even length: wrong first, then fixed
    assert rows["adv2"].outcomes == ("failed", "passed")  # median([1, 2]) == 1.5
    assert rows["ex1"].outcomes == ("passed", "passed")
    assert rows["ex2"].source == "assert median([4, 1, 3, 2]) == 2.5"
    assert rows["sb3"].source.endswith("…")  # a multi-line test shows its first line
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
    # approving runs the whole round; the code shown is its first candidate
    assert av.candidates == ("c5 patch from c1", "c6 patch from c2", "c7 rewrite")
    assert approval_note(av).startswith("The round proposes 3 candidates")
    assert "an edit replaces c5" in approval_note(av)
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
    assert "ran 2 new candidate(s) on every test and probe:" in execute.lines
    assert "  ✗ c1 greedy, round 1: trusted 1/2, tests 3/5, fails ex2, sb3" in execute.lines
    assert any(line.startswith("✗ ex2 failed AssertionError") for line in execute.lines)
    assert any(line.startswith("probe outputs: median(") for line in execute.lines)
    assert "ordered[len(ordered) // 2]" in execute.code
    diagnose = row_detail(state, rows[10])
    assert any(line.startswith("model call: mock:demo") for line in diagnose.lines)
    assert any("blame code" in line and "upper middle" in line for line in diagnose.lines)
    generate = row_detail(state, rows[2])
    assert generate.code == state.attempts[0].code
    assert any(line.startswith("+ sb1 (spec_blind)") for line in generate.lines)
    assert "proposed c2: sample, round 1, temperature 0.8" in generate.lines
    plan = row_detail(state, rows[1])
    assert any(line.startswith("+ ex1 (example)") for line in plan.lines)
    assert "+ probe p1 (mutation): median([3, 2, 2])" in plan.lines
    # each model call of a row, as the model saw it: the messages sent and the raw reply
    assert plan.calls == ()
    labels = [c.label.split()[0] for c in generate.calls]
    assert labels == ["generator", "generator", "test_writer"]
    call = generate.calls[2]
    assert call.label.startswith("test_writer via test_writer.yaml") and "mock:demo" in call.label
    assert "Raise ValueError if the list is empty" in call.messages[-1].content
    assert "# why: odd length, unsorted input" in call.reply
    assert [c.label.split()[0] for c in diagnose.calls] == ["debugger"]
    assert execute.calls == ()


def test_row_detail_of_the_population_rounds(demo_run: Run) -> None:
    state = demo_run.run().state
    rows = timeline_rows(state)
    about = row_candidates(state, rows)
    # which candidates each row is about, read from the run's own events
    assert about[2].ids == ("c1", "c2") and about[6].ids == ("c3", "c4")
    assert about[12].ids == ("c5", "c6", "c7")
    assert about[4].ids == ("c1", "c2") and about[8].ids == ("c3", "c4")
    assert about[14].ids == ("c5", "c6", "c7") and about[14].reran == 0
    assert about[9].ids == ("c1", "c2", "c3", "c4")
    # the top-up's execute row shows the two new samples, not the first two again
    topup = row_detail(state, rows[8])
    assert [line.split(",")[0] for line in topup.lines if line.startswith("  ")] == [
        "  ✗ c3 sample",
        "  ✗ c4 sample",
    ]
    repair = row_detail(state, rows[12])
    assert "proposed c5: patch, round 2, temperature 0, from c1" in repair.lines
    assert "proposed c7: rewrite, round 2, temperature 0.8" in repair.lines
    assert repair.code == state.final_code
    # an earlier selection: the candidates it ranked, the one it chose marked
    first = row_detail(state, rows[9])
    assert "  ✗ c1 greedy, round 1: trusted 1/2, tests 3/5, fails ex2, sb3 ◀ chosen" in first.lines
    assert first.code == state.attempts[0].code
    # the latest selection: the clusters, which won and why
    last = row_detail(state, rows[15])
    assert "ranked 7 candidate(s)" in last.lines
    assert any(line.startswith("c5 (patch, round 2) chosen: cluster 0 won") for line in last.lines)
    assert any(
        line.startswith("cluster 0 (won): c5, c6, c7 · median([1, 2, 3, 4]) -> 2.5")
        for line in last.lines
    )
    assert "fail a trusted test or do not load: c1, c2, c3, c4" in last.lines
    assert last.code == state.final_code


def test_candidates_view_marks_the_chosen_one_and_says_why(demo_run: Run) -> None:
    result = demo_run.run()
    cv = candidates_view(result.state)
    assert [r.id for r in cv.rows] == [f"c{i}" for i in range(1, 8)]
    assert [r.origin for r in cv.rows] == [
        "greedy",
        "sample",
        "sample",
        "sample",
        "patch",
        "patch",
        "rewrite",
    ]
    assert [r.round for r in cv.rows] == [1, 1, 1, 1, 2, 2, 2]
    assert [r.parent for r in cv.rows][4:] == ["c1", "c2", None]
    assert cv.chosen == "c5" and [r.id for r in cv.rows if r.chosen] == ["c5"]
    c1, c5 = cv.rows[0], cv.rows[4]
    assert (c1.state, c1.trusted_passed, c1.trusted_total, c1.cluster) == (
        "fails trusted",
        1,
        2,
        None,
    )
    assert c1.failing == ("ex2", "sb3") and c1.loads is True
    assert (c5.state, c5.trusted_passed, c5.cluster, c5.tests_passed) == ("passes trusted", 2, 0, 5)
    assert c5.code == result.code
    # the columns are probes where the candidates disagree: greedy 3, floor 2, the repair 2.5
    assert cv.probes[0] == "median([1, 2, 3, 4])"
    assert [r.outputs[0] for r in cv.rows] == ["3", "2", "2", "3", "2.5", "2.5", "2.5"]
    assert cv.total_probes == len(result.state.probes)
    (won,) = cv.clusters
    assert won.members == ("c5", "c6", "c7") and won.won and won.index == 0
    assert cv.verdict == (
        "c5 (patch, round 2) chosen: cluster 0 won with 3 of 3 candidate(s) that pass every "
        "trusted test"
    )
    assert cv.evidence == result.evidence.summary == evidence_summary(result.state)
    assert cv.evidence.startswith("2/2 trusted tests pass; 3 of 3 candidates")


def test_candidates_view_while_a_repair_round_waits(review_run: Run) -> None:
    state = review_run.run().state
    cv = candidates_view(state)
    assert [(r.id, r.state) for r in cv.rows][3:] == [
        ("c4", "fails trusted"),
        ("c5", "proposed"),
        ("c6", "proposed"),
        ("c7", "proposed"),
    ]
    assert cv.chosen == "c1" and cv.clusters == ()
    assert cv.verdict == (
        "c1 (greedy, round 1) chosen: no candidate passes every trusted test; it passes the "
        "most (1/2)"
    )
    assert evidence_summary(state).startswith("1/2 trusted tests pass")


def test_consult_row_shows_the_oracle_answers_and_who_agrees() -> None:
    # one example, two candidates that both pass it but disagree on even lengths: a tie the
    # spec oracle breaks
    spec = (
        "Write a function median(values) that returns the median of a list of numbers. "
        "Example: median([3, 1, 2]) -> 2"
    )
    provider = MockProvider(
        {"generator": [mock._DEMO_FLOOR, mock._DEMO_REPAIR], "oracle": [mock._demo_oracle] * 3}
    )
    cfg = HealConfig(candidates=2, first_sample=2, spec_blind_tests=False, first_answer="instruct")
    result = Run.start(
        HealRequest(spec, provider=provider, executor=InProcessExecutor(), config=cfg)
    ).run()
    state = result.state
    rows = timeline_rows(state)
    assert [r.node for r in rows][4:8] == ["execute", "select", "consult", "select"]
    consult = row_detail(state, rows[6])
    assert "oracle: median([1, 2]) -> 1.5 · agree: c2 · differ: c1 (1)" in consult.lines
    assert [c.label.split()[0] for c in consult.calls] == ["oracle", "oracle"]
    cv = candidates_view(state)
    assert cv.chosen == "c2" and [k.members for k in cv.clusters] == [("c2",), ("c1",)]
    assert cv.verdict.endswith("(2 clusters); the spec oracle agrees with it on 2 input(s)")
    assert "median([1, 2]) -> 1.5" in cv.oracle
    assert cv.probes[0] == "median([1, 2])"  # an input the oracle was asked about comes first
    text = render_text(state)
    assert "spec oracle: median([1, 2]) -> 1.5" in text
    assert "  ▶ ✓ c2   sample" in text


def test_one_candidate_per_round_and_a_candidate_that_does_not_load() -> None:
    # the chain (HealConfig(candidates=1)): a first version that cannot load, one patch
    broken = "```python\nimport not_a_module_xyz\n\ndef median(values):\n    return 0\n```"
    provider = MockProvider(
        {
            "generator": [broken, mock._DEMO_REPAIR],
            "debugger": [mock._DEMO_DIAGNOSIS],
            "lessons": [mock._DEMO_LESSONS],
        }
    )
    cfg = HealConfig(
        candidates=1, first_sample=1, agreement=1, repair_width=1, spec_blind_tests=False
    )
    result = Run.start(
        HealRequest(DEMO_SPEC, provider=provider, executor=InProcessExecutor(), config=cfg)
    ).run()
    state = result.state
    assert result.status == "verified"
    cv = candidates_view(state)
    c1, c2 = cv.rows
    assert (c1.state, c1.icon, c1.loads, c1.chosen) == ("no load", "☠", False, False)
    assert c1.load_error.startswith("ModuleNotFoundError")
    assert (c2.origin, c2.parent, c2.chosen, c2.cluster) == ("patch", "c1", True, 0)
    rows = timeline_rows(state)
    execute = row_detail(state, rows[4], rows)
    assert any("c1 greedy, round 1: does not load (ModuleNotFoundError" in x for x in execute.lines)
    assert any(x.startswith("load failed: ModuleNotFoundError") for x in execute.lines)
    assert "    ☠ c1   greedy     round 1          does not load (ModuleNotFoundError" in (
        render_text(state)
    )
    # a state from before the population (no candidates, no evidence) still renders: an
    # execute row falls back to its attempt's report
    old = state.model_copy(update={"candidates": (), "evidence": None})
    details = [row_detail(old, r) for r in timeline_rows(old)]
    assert any(x.startswith("load failed: ModuleNotFoundError") for x in details[4].lines)
    assert candidates_view(old).rows == () and candidates_view(old).chosen is None
    assert "| candidate |" not in render_markdown(old)


def test_text_and_markdown_render_every_panel(review_run: Run) -> None:
    state = review_run.run().state
    text = render_text(state)
    assert "median: waiting for your approval" in text
    assert "Evidence:" not in text  # the one-liner heads a finished view only
    assert "● approval" in text
    assert "ex2    example     trusted     ✗" in text
    assert "  ▶ ✗ c1   greedy     round 1" in text
    assert "    ● c5   patch      round 2 from c1  proposed" in text
    assert "Approval needed (repair, would be attempt 2)" in text
    assert "Approving runs them all" in text
    assert "handle.approve()" in text
    md = render_markdown(state)
    assert "| ✓ | diagnose | 1 |" in md
    assert "```diff" in md and "**Approval needed** (repair)" in md
    assert "| ex2 | example | trusted | ✗ |" in md
    assert "| ✗ | **c1** ▶ | greedy | 1 |  | 1/2 |  |" in md
    assert "| ● | c5 | patch | 2 | c1 | proposed |" in md


def test_finished_text_and_markdown_lead_with_the_evidence(demo_run: Run) -> None:
    result = demo_run.run()
    text = render_text(result.state).splitlines()
    assert text[1] == "Evidence: " + result.evidence.summary
    assert any(
        line.startswith("  ▶ ✓ c5   patch      round 2 from c1  trusted 2/2  cluster 0  2.5 |")
        for line in text
    )
    md = render_markdown(result.state).splitlines()
    assert md[2] == "**Evidence:** " + result.evidence.summary
    assert "| ✓ | **c5** ▶ | patch | 2 | c1 | 2/2 | 0 | 2.5 | 2.5 | 1.5 |" in md
    assert any(line.startswith("c5 (patch, round 2) chosen: cluster 0 won") for line in md)


def test_unified_diff_handles_missing_trailing_newlines() -> None:
    d = unified_diff("a\nb", "a\nc")
    assert d.splitlines()[-2:] == ["-b", "+c"]
    assert unified_diff("same", "same") == ""
    assert unified_diff("", "x").splitlines()[-1] == "+x"
