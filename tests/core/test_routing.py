"""Every routing path of the pipeline, driven by the scripted mock and a real kernel pool."""

from __future__ import annotations

import asyncio

import pytest
import scripted as s

from selfheal import Approve, Edit, HealConfig, HealRequest, Reject, Run, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.result import HealResult
from selfheal.roles._calls import CODE_TOKENS_FLOOR

PASSING_ADV = s.PASSING_ADV
INTY = s.block("def clamp(x, lo, hi):\n    return max(int(lo), min(int(x), int(hi)))")
GOOD_DOC = s.block(
    'def clamp(x, lo, hi):\n    """Limit x to [lo, hi]."""\n    return max(lo, min(x, hi))'
)


def nodes(result: HealResult) -> list[str]:
    return [e.node for e in result.timeline if e.kind == "end"]


def run(
    script: dict[str, list[str]], pool: KernelPool, **cfg: object
) -> tuple[HealResult, MockProvider]:
    mock = MockProvider(script)
    result = heal(s.SPEC, provider=mock, config=s.chain(**cfg), executor=pool)  # type: ignore[arg-type]
    return result, mock


def test_pass_first_time(pool: KernelPool) -> None:
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [PASSING_ADV],
            "critic": [s.ACCEPT],
        },
        pool,
    )
    assert result.status == "verified" and result.verified
    assert result.iterations == 1
    assert nodes(result) == [
        "recall",
        "plan_tests",
        "generate",
        "gate",
        "adversarial",
        "execute",
        "select",
        "critic",
        "finish",
    ]
    assert [t.origin for t in result.tests] == [
        "example",
        "spec_blind",
        "spec_blind",
        "adversarial",
    ]
    assert [t.trusted for t in result.tests] == [True, False, False, False]
    assert set(result.test_outcomes().values()) == {"passed"}
    assert result.function(7, 0, 3) == 3
    assert len(mock.calls) == 4 and result.usage.calls == 4


def test_fail_diagnose_repair_pass(pool: KernelPool) -> None:
    result, mock = run(s.repair_script(), pool)
    assert result.status == "verified"
    assert result.iterations == 2
    assert nodes(result) == [
        "recall", "plan_tests", "generate", "gate", "adversarial", "execute", "select",
        "diagnose", "lessons", "repair", "gate", "execute", "select", "critic", "finish",
    ]  # fmt: skip
    first = result.attempts[0].report
    assert first is not None and not first.passed
    assert {r.test_id: r.outcome for r in first.results}["sb2"] == "failed"
    assert result.diagnoses[0].category == "edge_case" and result.diagnoses[0].blame == "code"
    assert result.lessons == ("Clamp from below with max(lo, x).",)
    assert result.attempts[1].strategy == "repair"
    # the repair prompt carried the failing test, the diagnosis and the lesson
    repair_prompt = mock.calls_for("generator")[1].messages[-1].content
    assert (
        "sb2" in repair_prompt
        and "max(lo, ...)" in repair_prompt
        and "Clamp from below" in repair_prompt
    )
    assert "max(lo, min(x, hi))" in (result.code or "")


def test_each_role_asks_for_at_most_its_completion_cap(pool: KernelPool) -> None:
    """A small model sometimes runs on past its JSON (a 768-token lessons reply cost 205 s on
    two CPU cores); each role caps its own reply instead of using the 1024-token default."""
    result, mock = run(s.repair_script(), pool)
    assert result.status == "verified"
    caps = {c.role: c.max_tokens for c in mock.calls}
    # code: sized from its prompt (test_answer_length.py), never over the config's
    assert CODE_TOKENS_FLOOR <= caps["generator"] <= HealConfig().calls.max_tokens
    assert caps["lessons"] <= 256 and caps["critic"] <= 256 and caps["oracle"] <= 320
    assert caps["debugger"] <= 384 and caps["test_writer"] <= 400 and caps["adversary"] <= 400


def test_exhausted_keeps_the_best_attempt(pool: KernelPool) -> None:
    result, _ = run(
        {
            "test_writer": [s.TESTS],
            "generator": [
                s.BUGGY,
                s.BROKEN,
                s.block("def clamp(x, lo, hi):\n    return max(x, lo)"),
            ],
            "adversary": [PASSING_ADV],
            "oracle": [s.ORACLE_0, s.ORACLE_0],
            "debugger": [s.DIAG_CODE, s.DIAG_CODE],
            "lessons": [s.LESSONS, s.LESSONS],
        },
        pool,
        max_iterations=3,
    )
    assert result.status == "exhausted" and not result.verified
    assert result.iterations == 3
    # BROKEN fails the trusted example; BUGGY only fails a model-written test: BUGGY is kept
    assert "min(x, hi)" in (result.code or "") and "max" not in (result.code or "")


def test_critic_rejects_with_a_test_that_forces_a_repair(pool: KernelPool) -> None:
    reject = (
        '{"verdict": "reject", "concerns": ["floats are truncated"], '
        '"tests": ["assert clamp(1.5, 1.0, 2.0) == 1.5"]}'
    )
    result, _ = run(
        {
            "test_writer": [s.TESTS],
            "generator": [INTY, s.GOOD],
            "adversary": [PASSING_ADV],
            "critic": [reject],
            "oracle": [s.oracle("1.5")],
            "debugger": [s.DIAG_CODE],
            "lessons": [s.LESSONS],
        },
        pool,
    )
    assert result.status == "verified"
    assert nodes(result)[5:] == [
        "execute", "select", "critic", "execute", "select", "diagnose", "lessons", "repair",
        "gate", "execute", "select", "finish",
    ]  # fmt: skip
    critic_tests = [t for t in result.tests if t.origin == "critic"]
    assert [t.code for t in critic_tests] == ["assert clamp(1.5, 1.0, 2.0) == 1.5"]
    assert result.test_outcomes()[critic_tests[0].id] == "passed"
    assert result.state.reviews[0].verdict == "reject"


def test_critic_concerns_without_a_counterexample_are_advice_only(pool: KernelPool) -> None:
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [PASSING_ADV],
            "critic": [s.REJECT_CONCERNS],
        },
        pool,
    )
    # an opinion without a test to run never changes the status nor triggers a repair
    assert result.status == "verified" and result.iterations == 1
    assert result.state.reviews[-1].verdict == "reject"
    assert result.state.reviews[-1].concerns == ("no docstring",)
    assert len(mock.calls_for("generator")) == 1
    assert nodes(result)[-2:] == ["critic", "finish"]


def _review_script() -> dict[str, list[str]]:
    return {
        "test_writer": [s.TESTS],
        "generator": [s.BUGGY, s.GOOD, s.GOOD],
        "adversary": [PASSING_ADV],
        "oracle": [s.ORACLE_0],
        "debugger": [s.DIAG_CODE],
        "lessons": [s.LESSONS],
        "critic": [s.ACCEPT],
    }


def test_review_repairs_stops_and_approve_resumes(pool: KernelPool) -> None:
    result, mock = run(_review_script(), pool, autonomy="review_repairs")
    assert result.status == "awaiting_approval"
    pending = result.state.pending
    assert pending is not None and pending.kind == "repair"
    assert (
        "-    return min(x, hi)" in pending.diff
        and "+    return max(lo, min(x, hi))" in pending.diff
    )
    assert pending.diagnosis is not None and pending.diagnosis.blame == "code"
    final = Run.load(result.run_id, provider=mock, executor=pool).resume(Approve())
    assert final.status == "verified" and final.iterations == 2
    assert [d.kind for d in final.state.decisions] == ["approve"]


def test_review_edit_runs_the_human_code(pool: KernelPool) -> None:
    result, mock = run(_review_script(), pool, autonomy="review_repairs")
    human = "def clamp(x, lo, hi):\n    return sorted((lo, x, hi))[1]\n"
    final = Run.load(result.run_id, provider=mock, executor=pool).resume(Edit(human))
    assert final.status == "verified"
    assert final.attempts[-1].strategy == "human_edit" and final.code == human


def test_review_reject_feeds_the_reason_back(pool: KernelPool) -> None:
    result, mock = run(_review_script(), pool, autonomy="review_repairs")
    run_ = Run.load(result.run_id, provider=mock, executor=pool)
    again = run_.resume(Reject("keep it one line and use max()"))
    assert again.status == "awaiting_approval"  # a new proposal waits
    third_prompt = mock.calls_for("generator")[2].messages[-1].content
    assert "keep it one line and use max()" in third_prompt
    final = run_.resume(Approve())
    assert final.status == "verified"
    assert [d.kind for d in final.state.decisions] == ["reject", "approve"]


def test_review_all_stops_before_the_first_version_too(pool: KernelPool) -> None:
    seen: list[str] = []

    def approver(proposal, state):  # type: ignore[no-untyped-def]
        seen.append(proposal.kind)
        return Approve()

    mock = MockProvider(_review_script())
    result = heal(
        s.SPEC,
        provider=mock,
        config=s.chain(autonomy="review_all"),
        executor=pool,
        approver=approver,
    )
    assert result.status == "verified"
    assert seen == ["initial", "repair"]


def test_async_approver_with_arun(pool: KernelPool) -> None:
    async def approver(proposal, state):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        return Approve()

    async def main() -> HealResult:
        r = Run.start(
            HealRequest(
                s.SPEC,
                provider=MockProvider(_review_script()),
                config=s.chain(autonomy="review_repairs"),
                executor=pool,
            )
        )
        return await r.arun(approver)

    assert asyncio.run(main()).status == "verified"


def test_headless_policy_approves_without_an_approver(pool: KernelPool) -> None:
    result, _ = run(_review_script(), pool, autonomy="review_repairs", on_headless="approve")
    assert result.status == "verified"
    assert result.state.decisions[0].reason == "on_headless=approve"


def test_malformed_generator_reply_fails_clearly(pool: KernelPool) -> None:
    result, mock = run(
        {"test_writer": [s.TESTS], "generator": ["I cannot do that.", "Still no code.", "Nope."]},
        pool,
    )
    assert result.status == "failed" and not result.verified
    assert "generator gave no usable code" in result.error
    assert len(mock.calls_for("generator")) == 3  # first try + 2 retries, then it gives up
    assert any(e.kind == "error" and e.node == "generate" for e in result.timeline)


def test_every_model_call_keeps_its_exchange_even_an_unusable_one(pool: KernelPool) -> None:
    result, mock = run(
        {"test_writer": [s.TESTS], "generator": ["I cannot do that.", "Still no code.", "Nope."]},
        pool,
    )
    llm = [e for e in result.timeline if e.kind == "llm"]
    # all three unusable generator replies and the test writer's call (asked at the same time,
    # after them with the one-at-a-time mock) are on the timeline
    assert [e.node for e in llm] == ["generate"] * 4
    assert [e.reply for e in llm[:3]] == ["I cannot do that.", "Still no code.", "Nope."]
    # each event holds exactly what the model was sent: the retries carry the correction
    assert [e.messages for e in llm] == [c.messages for c in mock.calls]
    assert len(llm[1].messages) > len(llm[0].messages)
    assert s.SPEC in llm[0].messages[-1].content
    assert result.state.usage.calls == 4
    shown = result.transcript_text()
    assert "=== call 3/4 · generate" in shown and "--- reply\nNope." in shown


def test_transcripts_off_keeps_counts_but_no_text(pool: KernelPool) -> None:
    result, _ = run({"test_writer": [s.TESTS], "generator": [s.GOOD]}, pool, transcripts=False,
                    adversarial_tests=False, critic=False)  # fmt: skip
    llm = [e for e in result.timeline if e.kind == "llm"]
    assert len(llm) == 2 and all(e.completion_tokens > 0 for e in llm)
    assert all(e.messages == () and e.reply == "" for e in llm)
    assert "(transcript not kept)" in result.transcript_text()


def test_malformed_diagnosis_falls_back_to_a_heuristic(pool: KernelPool) -> None:
    result, _ = run(s.repair_script(["no idea", "really no idea", "{broken"]), pool)
    assert result.status == "verified"
    assert result.diagnoses[0].source == "heuristic"
    assert "sb2" in result.diagnoses[0].root_cause


def test_salvaged_reply_is_marked_degraded(pool: KernelPool) -> None:
    prose = "Sure! Here is my diagnosis:\n" + s.DIAG_CODE + "\nHope this helps."
    result, _ = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.BUGGY, s.GOOD],
            "adversary": [PASSING_ADV],
            "oracle": [s.ORACLE_0],
            "debugger": [prose],
            "lessons": [s.LESSONS],
            "critic": [s.ACCEPT],
        },
        pool,
    )
    assert result.status == "verified"
    assert result.diagnoses[0].source == "debugger"
    assert any(e.kind == "degraded" and e.node == "diagnose" for e in result.timeline)


def test_wrong_model_test_is_quarantined_not_obeyed(pool: KernelPool) -> None:
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [s.WRONG_TEST],
            "oracle": [s.oracle("3")],
            "critic": [s.ACCEPT],
        },
        pool,
    )
    assert result.status == "verified" and result.iterations == 1
    adv = next(t for t in result.tests if t.id == "adv1")
    assert adv.quarantined and "spec oracle says clamp(7, 0, 3) == 3" in adv.quarantine_reason
    assert not mock.calls_for("debugger")  # settled by the oracle, no diagnosis needed
    assert result.test_outcomes()["adv1"] == "failed"  # still run and reported
    assert len(mock.calls_for("generator")) == 1  # the code was not "repaired" to fit the bad test


def test_oracle_agreeing_with_the_test_keeps_it(pool: KernelPool) -> None:
    result, _ = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD, s.GOOD, s.GOOD],
            "adversary": [s.WRONG_TEST],
            "oracle": [s.oracle("7")],  # the oracle is wrong too: no quarantine on one reading
            "debugger": [s.DIAG_CODE],
            "lessons": [s.LESSONS],
        },
        pool,
        max_iterations=2,
    )
    adv = next(t for t in result.tests if t.id == "adv1")
    assert not adv.quarantined
    assert not result.verified
    # the best attempt is kept: the trusted tests pass either way
    assert "max(lo, min(x, hi))" in (result.code or "")


def test_debugger_blaming_a_non_equality_test_quarantines_it(pool: KernelPool) -> None:
    wrong = s.block("# why: wrong\nassert clamp(7, 0, 3) in (7, 8)")
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [wrong],
            "debugger": [s.DIAG_TEST],
            "critic": [s.ACCEPT],
        },
        pool,
    )
    adv = next(t for t in result.tests if t.id == "adv1")
    assert adv.quarantined and "adv1 expects 7" in adv.quarantine_reason
    assert result.status == "verified" and result.iterations == 1
    assert not mock.calls_for("oracle")  # not an `assert call == value` test


def test_trusted_tests_are_never_quarantined(pool: KernelPool) -> None:
    diag = s.DIAG_TEST.replace('"adv1"', '"u1"')
    mock = MockProvider(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD, s.GOOD, s.GOOD],
            "adversary": [PASSING_ADV],
            "debugger": [diag],
            "lessons": [s.LESSONS],
        }
    )
    result = heal(
        s.SPEC,
        provider=mock,
        config=s.chain(max_iterations=2),
        executor=pool,
        tests=["assert clamp(7, 0, 3) == 7"],
    )
    u1 = next(t for t in result.tests if t.id == "u1")
    assert u1.trusted and not u1.quarantined
    assert result.status == "exhausted" and not result.verified


def test_token_budget_exhausts(pool: KernelPool) -> None:
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.BUGGY, s.GOOD],
            "adversary": [PASSING_ADV],
            "debugger": [s.DIAG_CODE],
        },
        pool,
        token_budget=200,
    )
    # the test writer and the first (buggy) candidate (asked for together) spend the budget:
    # the run ends exhausted before its gate, the debugger or a second candidate
    assert result.status == "exhausted" and not result.verified
    assert any("token budget spent" in e.detail for e in result.timeline)
    assert sorted(c.role for c in mock.calls) == ["generator", "test_writer"]
    assert nodes(result) == ["recall", "plan_tests", "generate", "finish"]


def test_single_shot_is_unverified(pool: KernelPool) -> None:
    mock = MockProvider({"generator": [s.GOOD]})
    result = heal(s.SPEC, provider=mock, config=HealConfig.single_shot(), executor=pool)
    assert result.status == "unverified" and not result.verified
    assert result.tests == () and result.iterations == 1
    assert nodes(result) == ["recall", "plan_tests", "generate", "gate", "finish"]
    assert result.evidence.summary.startswith("not executed")
    assert result.code is not None and "max(lo, min(x, hi))" in result.code


def test_every_result_records_its_config(pool: KernelPool) -> None:
    result, _ = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [PASSING_ADV],
            "critic": [s.ACCEPT],
        },
        pool,
        max_iterations=2,
        critic_rounds=1,
    )
    assert result.config.repairs.max_iterations == 2
    assert result.to_dict()["config"]["repairs"]["max_iterations"] == 2


def test_unknown_provider_is_a_config_error() -> None:
    from selfheal.errors import ConfigError

    with pytest.raises(ConfigError):
        heal(s.SPEC, provider="nosuch:model")


def test_a_repair_that_repeats_old_code_is_resampled_then_stops(pool: KernelPool) -> None:
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.BUGGY, s.BUGGY, s.BUGGY],
            "adversary": [PASSING_ADV],
            "oracle": [s.ORACLE_0],
            "debugger": [s.DIAG_CODE],
            "lessons": [s.LESSONS],
        },
        pool,
    )
    assert result.status == "exhausted" and result.iterations == 1
    assert result.state.stop_reason == "repairs repeat earlier versions"
    calls = mock.calls_for("generator")
    assert len(calls) == 3
    # the repeat was replaced by a fresh sample from the spec (hotter), not a patch again
    assert "Current code" in calls[1].messages[-1].content
    assert "Current code" not in calls[2].messages[-1].content
    assert "sb2" in calls[2].messages[-1].content
    assert nodes(result)[-2:] == ["repair", "finish"]


def test_a_repeated_repair_gets_one_more_chance(pool: KernelPool) -> None:
    result, _ = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.BUGGY, s.BUGGY, s.GOOD],
            "adversary": [PASSING_ADV],
            "oracle": [s.ORACLE_0],
            "debugger": [s.DIAG_CODE],
            "lessons": [s.LESSONS],
            "critic": [s.ACCEPT],
        },
        pool,
    )
    assert result.status == "verified" and result.iterations == 2


def test_a_float_rounding_failure_is_quarantined_without_asking_anyone(pool: KernelPool) -> None:
    spec = "Write a function frac(x) that returns the fractional part of a positive float x. Example: frac(3.5) -> 0.5"
    code = s.block("def frac(x):\n    return x - int(x)")
    tests = s.block("# why: rounding trap\nassert frac(1.1) == 0.1")
    mock = MockProvider(
        {
            "test_writer": [tests],
            "generator": [code],
            "adversary": [s.block("assert frac(2.25) == 0.25")],
            "critic": [s.ACCEPT],
        }
    )
    result = heal(spec, provider=mock, config=s.chain(), executor=pool)
    sb1 = next(t for t in result.tests if t.id == "sb1")
    assert sb1.quarantined and "float rounding" in sb1.quarantine_reason
    assert result.test_outcomes()["sb1"] == "failed"  # still run and shown
    assert result.status == "verified"
    assert not mock.calls_for("oracle") and not mock.calls_for("debugger")


def test_an_unconfirmed_model_test_is_quarantined(pool: KernelPool) -> None:
    result, mock = run(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [s.WRONG_TEST],
            "oracle": [s.oracle("5")],  # neither the test's 7 nor the code's 3
            "critic": [s.ACCEPT],
        },
        pool,
    )
    adv = next(t for t in result.tests if t.id == "adv1")
    assert adv.quarantined and adv.quarantine_reason.startswith("unconfirmed")
    assert result.status == "verified" and len(mock.calls_for("generator")) == 1


def test_a_reviewer_who_edits_every_proposal_ends_the_first_round(pool: KernelPool) -> None:
    # review_all on the population: each edit takes the place of the answer it replaced, so
    # the round stops asking once it has its candidates (before: it topped up forever)
    human = "def clamp(x, lo, hi):\n    return sorted((lo, x, hi))[1]\n"
    kinds: list[str] = []

    def approver(proposal, state):  # type: ignore[no-untyped-def]
        kinds.append(proposal.kind)
        assert len(kinds) <= 8, "the reviewer is asked again and again"
        return Edit(human)

    mock = MockProvider(
        {"generator": [s.BUGGY, s.GOOD, GOOD_DOC, s.GOOD], "test_writer": [s.NO_TESTS]}
    )
    result = heal(
        s.SPEC,
        provider=mock,
        config=HealConfig(autonomy="review_all", lessons=False, memory=False, **s.INSTRUCTED),
        executor=pool,
        approver=approver,
    )
    assert result.status == "verified" and result.code == human
    assert sum(c.round == 1 for c in result.candidates) == 4
    assert any(c.origin == "human_edit" for c in result.candidates)
