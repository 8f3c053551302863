"""The scripted demo (``provider="mock"``) replays every path the tutorials take: a repair
proposal approved, edited or rejected, an approver answering in code, and forks with other
lessons or code. The notebooks in ``notebooks/`` rely on these; a change to the demo script
that breaks one fails here first, with a message that names the path."""

from __future__ import annotations

import selfheal
from selfheal import Approve, Edit, HealConfig, HealRequest, Reject, Run
from selfheal.demo import DEMO_SPEC
from selfheal.kernel_sandbox import KernelPool
from selfheal.result import HealResult
from selfheal.state import Decision, HealState, Proposal

STATISTICS = (
    "import statistics\n\n\ndef median(values):\n"
    "    if not values:\n        raise ValueError('empty')\n"
    "    return statistics.median(values)\n"
)


def _proposal_run(pool: KernelPool) -> tuple[Run, HealResult]:
    run = Run.start(
        HealRequest(
            DEMO_SPEC, provider="mock", config=HealConfig(autonomy="review_repairs"), executor=pool
        )
    )
    return run, run.run()


def _repair_prompts(state: HealState) -> list[str]:
    return [e.messages[-1].content for e in state.events if e.kind == "llm" and e.node == "repair"]


def test_the_demo_stops_before_its_repair_with_a_diagnosis_and_three_candidates(
    pool: KernelPool,
) -> None:
    _, result = _proposal_run(pool)
    assert result.status == "awaiting_approval"
    pending = result.state.pending
    assert pending is not None and pending.kind == "repair"
    assert pending.diagnosis is not None and "even" in pending.diagnosis.root_cause
    assert len(pending.candidates) == 3
    assert "+    if not values:" in pending.diff


def test_approving_the_demo_repair_verifies(pool: KernelPool) -> None:
    run, _ = _proposal_run(pool)
    done = run.resume(Approve())
    assert done.status == "verified"
    assert [d.kind for d in done.state.decisions] == ["approve"]


def test_an_edit_replaces_the_first_candidate_and_wins(pool: KernelPool) -> None:
    run, _ = _proposal_run(pool)
    done = run.resume(Edit(STATISTICS))
    assert done.status == "verified"
    assert done.code == STATISTICS
    assert next(c.origin for c in done.candidates if c.round == 2) == "human_edit"


def test_a_rejected_demo_repair_brings_a_second_round_that_heeds_the_reason(
    pool: KernelPool,
) -> None:
    run, _ = _proposal_run(pool)
    reason = "Use statistics.median instead of indexing by hand."
    again = run.resume(Reject(reason))
    assert again.status == "awaiting_approval", "after a reject the demo proposes a new round"
    assert again.state.pending is not None
    assert all("statistics" in c.code for c in again.state.pending.candidates)
    assert reason in _repair_prompts(again.state)[-1], "the reason reaches the next generation"
    done = run.resume(Approve())
    assert done.status == "verified"
    assert done.code is not None and "statistics.median" in done.code
    assert [d.kind for d in done.state.decisions] == ["reject", "approve"]


def test_an_approver_answers_without_stopping(pool: KernelPool) -> None:
    seen: list[str] = []

    def reviewer(proposal: Proposal, state: HealState) -> Decision:
        seen.append(proposal.kind)
        return Approve() if "ValueError" in proposal.code else Reject("Raise ValueError.")

    done = selfheal.heal(
        DEMO_SPEC,
        provider="mock",
        config=HealConfig(autonomy="review_repairs"),
        approver=reviewer,
        executor=pool,
    )
    assert isinstance(done, HealResult)
    assert done.status == "verified" and seen == ["repair"]


def test_forks_of_the_demo_with_a_lesson_and_with_code(pool: KernelPool) -> None:
    run, _ = _proposal_run(pool)
    run.resume(Approve())
    lesson = "Average the two middle values when the count is even."
    child = run.fork(0, lessons=[lesson])
    forked = child.run(lambda proposal, state: Approve())
    assert forked.status == "verified" and forked.lessons[0] == lesson
    assert forked.state.parent is not None and forked.state.parent.changes == ("lessons",)
    generate = [e for e in forked.timeline if e.kind == "llm" and e.node == "generate"]
    assert any(lesson in m.content for m in generate[0].messages), "the lesson reaches the model"
    edited = run.fork(1, code=STATISTICS).run()
    # the human's code is run like any candidate; it passes every test but nothing agrees with it
    assert edited.code == STATISTICS and edited.evidence.trusted_passed == 2
    assert edited.status == "unverified" and not edited.evidence.agreed
