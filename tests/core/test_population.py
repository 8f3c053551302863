"""Healing by agreement: a population of candidates, probe inputs, clusters, the tournament,
repairs that never stall. Scripted mock model, real kernel pool."""

from __future__ import annotations

import scripted as s

from selfheal import HealConfig, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.result import HealResult

GOOD_DOC = s.block(
    'def clamp(x, lo, hi):\n    """Limit x to [lo, hi]."""\n    return max(lo, min(x, hi))'
)
GOOD_SWAPPED = s.block("def clamp(x, lo, hi):\n    return max(lo, min(hi, x))")
SAME_AS_BROKEN = s.block("def clamp(x, lo, hi):\n    y = x\n    return y")
NO_EXAMPLE_SPEC = "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]."


def nodes(result: HealResult) -> list[str]:
    return [e.node for e in result.timeline if e.kind == "end"]


def run(
    script: dict[str, list[object]], pool: KernelPool, spec: str = s.SPEC, **cfg: object
) -> tuple[HealResult, MockProvider]:
    mock = MockProvider(script)  # type: ignore[arg-type]
    # the memory off: several tests heal the same spec twice to compare populations
    base = {"lessons": False, "memory": False, **s.INSTRUCTED}
    config = HealConfig(**{**base, **cfg})  # type: ignore[arg-type]
    return heal(spec, provider=mock, config=config, executor=pool), mock


def test_two_agreeing_candidates_that_pass_the_examples_stop_early(pool: KernelPool) -> None:
    result, mock = run({"generator": [s.GOOD, GOOD_DOC], "test_writer": [s.NO_TESTS]}, pool)
    assert result.status == "verified"
    assert nodes(result) == [
        "recall", "plan_tests", "generate", "gate", "execute", "select", "finish",
    ]  # fmt: skip
    assert [c.origin for c in result.candidates] == ["greedy", "sample"]
    assert [c.cluster for c in result.candidates] == [0, 0]
    ev = result.evidence
    assert (ev.trusted_passed, ev.trusted_total, ev.clusters) == (1, 1, (2,))
    assert ev.probes > 0 and "2 of 2 candidates that pass them agree" in ev.summary
    # the greedy one is asked at temperature 0, the sample hotter; both at once
    assert len(mock.calls_for("generator")) == 2


def test_disagreement_tops_up_and_the_majority_beats_the_greedy_answer(pool: KernelPool) -> None:
    # BUGGY (min(x, hi)) passes the only example clamp(5, 0, 3) -> 3, but not x below lo
    result, mock = run(
        {"generator": [s.BUGGY, s.GOOD, GOOD_DOC, GOOD_SWAPPED], "test_writer": [s.NO_TESTS]}, pool
    )
    assert result.status == "verified"
    assert len(mock.calls_for("generator")) == 4
    assert nodes(result)[:9] == [
        "recall", "plan_tests", "generate", "gate", "execute", "select", "generate", "gate",
        "execute",
    ]  # fmt: skip
    greedy, *samples = result.candidates
    assert greedy.origin == "greedy" and greedy.cluster == 1
    assert all(c.cluster == 0 for c in samples)
    assert result.evidence.clusters == (3, 1)
    assert "max(lo, min(x, hi))" in (result.code or "")
    assert result.function(-5, 0, 3) == 0


def test_a_wrong_model_test_is_disputed_by_agreement_and_the_right_code_survives(
    pool: KernelPool,
) -> None:
    result, _ = run(
        {"generator": [s.GOOD, GOOD_DOC], "test_writer": [s.WRONG_TEST]},
        pool,
        oracle_calls=0,
        spec_blind_tests=True,
    )
    assert result.status == "verified"
    wrong = next(t for t in result.tests if t.origin == "spec_blind")
    assert wrong.quarantined and wrong.quarantine_reason.startswith("disputed")
    assert result.evidence.disputed == (wrong.id,)
    # its call became a probe input
    assert any(p.call == "clamp(7, 0, 3)" for p in result.state.probes)


def test_without_a_trusted_test_the_result_is_unverified_and_says_why(pool: KernelPool) -> None:
    result, _ = run(
        {"generator": [s.GOOD, GOOD_DOC, GOOD_SWAPPED, s.GOOD], "test_writer": [s.TESTS]},
        pool,
        spec=NO_EXAMPLE_SPEC,
    )
    assert result.status == "unverified" and not result.verified
    # with no trusted test the first small sample is never enough: it samples up to 4
    assert len(result.candidates) == 4 and result.evidence.clusters == (4,)
    assert result.evidence.trusted_total == 0
    assert "no trusted test" in result.evidence.summary


def test_a_failing_trusted_example_drives_a_repair_round(pool: KernelPool) -> None:
    result, mock = run(
        {
            "generator": [s.BROKEN, s.BROKEN, s.GOOD, GOOD_DOC],
            "test_writer": [s.NO_TESTS],
            "debugger": [s.DIAG_CODE],
        },
        pool,
        candidates=2,
        repair_width=2,
    )
    assert result.status == "verified"
    assert result.iterations == 2
    origins = [c.origin for c in result.candidates]
    assert origins == ["greedy", "sample", "patch", "rewrite"]
    patch = result.candidates[2]
    assert patch.parent == "c1" and patch.round == 2
    # the patch prompt showed the failing trusted example and the diagnosis
    prompt = mock.calls_for("generator")[2].messages[-1].content
    assert "ex1" in prompt and "max(lo, ...)" in prompt


def test_a_repair_that_repeats_a_known_version_is_replaced_by_a_fresh_sample(
    pool: KernelPool,
) -> None:
    result, mock = run(
        {
            "generator": [s.BROKEN, s.BROKEN, s.BROKEN, s.BROKEN, s.GOOD, GOOD_DOC],
            "test_writer": [s.NO_TESTS],
            "debugger": [s.DIAG_CODE],
        },
        pool,
        candidates=2,
        repair_width=2,
    )
    assert result.status == "verified"
    assert [c.origin for c in result.candidates][2:] == ["regenerate", "regenerate"]
    assert any("repeated a known version" in e.detail for e in result.timeline)
    assert len(mock.calls_for("generator")) == 6


def test_a_low_confidence_diagnosis_routes_to_fresh_samples_not_a_patch(pool: KernelPool) -> None:
    unsure = s.DIAG_CODE.replace('"confidence": 0.9', '"confidence": 0.2')
    result, _ = run(
        {
            "generator": [s.BROKEN, s.BROKEN, s.GOOD, GOOD_DOC],
            "test_writer": [s.NO_TESTS],
            "debugger": [unsure],
        },
        pool,
        candidates=2,
        repair_width=2,
    )
    assert result.status == "verified"
    assert [c.origin for c in result.candidates][2:] == ["regenerate", "regenerate"]
    assert any("low-confidence diagnosis" in e.detail for e in result.timeline)


def test_a_round_with_no_new_behaviour_stops_the_run_and_says_so(pool: KernelPool) -> None:
    result, _ = run(
        {
            "generator": [s.BROKEN, s.BROKEN, SAME_AS_BROKEN],
            "test_writer": [s.NO_TESTS],
            "debugger": [s.DIAG_CODE],
        },
        pool,
        candidates=2,
        repair_width=1,
        max_iterations=4,
    )
    assert result.status == "exhausted"
    assert result.state.stop_reason == "the repair round brought no new behaviour"
    assert result.iterations == 2


def test_the_spec_oracle_breaks_a_tie_between_clusters(pool: KernelPool) -> None:
    result, mock = run(
        {
            "generator": [s.BUGGY, s.GOOD],
            "test_writer": [s.NO_TESTS],
            "oracle": [s.oracle_from_truth] * 3,
        },
        pool,
        candidates=2,
    )
    assert "consult" in nodes(result)
    assert mock.calls_for("oracle") and result.state.oracle
    assert result.evidence.oracle >= 1
    assert result.function(-5, 0, 3) == 0  # the sample, not the greedy BUGGY
    # the oracle picks the winner, but one of two is no majority: not evidence enough to verify
    assert result.status == "unverified" and not result.evidence.majority
    assert "no behaviour holds a majority" in result.evidence.summary


def test_verified_needs_a_strict_majority_of_the_contenders(pool: KernelPool) -> None:
    # three of four pass the example; two agree (right), one is BUGGY: 2 of 3 is a majority
    result, _ = run(
        {"generator": [s.BUGGY, s.GOOD, GOOD_DOC, s.BROKEN], "test_writer": [s.NO_TESTS]},
        pool,
        oracle_calls=0,
    )
    assert result.evidence.clusters == (2, 1) and result.evidence.majority
    assert result.status == "verified" and result.function(-5, 0, 3) == 0
    # two against two with no oracle: the greedy answer wins the tie but verifies nothing
    result, _ = run(
        {"generator": [s.BUGGY, s.GOOD, GOOD_DOC, BUGGY_DOC], "test_writer": [s.NO_TESTS]},
        pool,
        oracle_calls=0,
    )
    assert result.evidence.clusters == (2, 2) and not result.evidence.majority
    assert result.status == "unverified"


def test_one_candidate_per_round_is_the_old_chain(pool: KernelPool) -> None:
    result, mock = run(
        {"generator": [s.GOOD], "test_writer": [s.TESTS]},
        pool,
        candidates=1,
        first_sample=1,
        agreement=1,
    )
    assert result.status == "verified"
    assert len(result.candidates) == 1 and result.evidence.summary.endswith("one candidate")
    assert len(mock.calls_for("generator")) == 1


def test_a_time_budget_stops_the_population(pool: KernelPool) -> None:
    result, _ = run(
        {"generator": [s.BROKEN, s.BROKEN], "test_writer": [s.NO_TESTS]},
        pool,
        candidates=2,
        token_budget=1,
    )
    assert result.status == "exhausted"
    assert "token budget" in result.state.stop_reason


HARDCODED = s.block("def clamp(x, lo, hi):\n    return 3")


def test_a_candidate_that_returns_the_example_without_reading_its_input_stands_last(
    pool: KernelPool,
) -> None:
    # greedy hardcodes the example's answer; the honest sample wins although the two tie
    result, _ = run(
        {"generator": [HARDCODED, s.GOOD], "test_writer": [s.NO_TESTS]},
        pool,
        candidates=2,
        oracle_calls=0,
    )
    assert result.function(-5, 0, 3) == 0
    hard = result.candidates[0]
    assert hard.code.endswith("return 3") and hard.cluster is None
    assert result.evidence.passing == 1
    # the winner stands alone: the best there is, not evidence
    assert result.status == "unverified" and not result.evidence.agreed
    assert "(2 must agree to verify)" in result.evidence.summary


def test_verified_needs_two_candidates_that_agree(pool: KernelPool) -> None:
    # the same lone winner with a second, differently written candidate that behaves alike
    result, _ = run(
        {"generator": [HARDCODED, s.GOOD, GOOD_DOC], "test_writer": [s.NO_TESTS]},
        pool,
        candidates=3,
        first_sample=3,
        oracle_calls=0,
    )
    assert result.status == "verified" and result.evidence.agreed
    assert result.evidence.chosen_cluster == 2
    # a config that accepts a lone candidate says so (the chain of round 1)
    lone, _ = run(
        {"generator": [HARDCODED, s.GOOD], "test_writer": [s.NO_TESTS]},
        pool,
        candidates=2,
        oracle_calls=0,
        agreement=1,
    )
    assert lone.status == "verified" and lone.evidence.chosen_cluster == 1


def test_ignores_input_reads_the_function_body() -> None:
    from selfheal.agreement import ignores_input

    assert ignores_input("def f(x):\n    return [1, 2]", "f")
    assert not ignores_input("def f(x):\n    return [x]", "f")
    assert not ignores_input("def f(*xs, **kw):\n    return len(xs) + len(kw)", "f")
    assert not ignores_input("def f():\n    return 1", "f")  # nothing to read
    assert not ignores_input("def g(x):\n    return 1", "f")  # not the entry point


BUGGY_DOC = s.block('def clamp(x, lo, hi):\n    """Cap x at hi."""\n    return min(x, hi)')


def _critic(counterexample: str) -> str:
    import json

    return json.dumps(
        {
            "verdict": "reject",
            "concerns": ["values below lo are not raised to lo"],
            "counterexample": counterexample,
            "tests": [],
        }
    )


def test_a_critic_counterexample_the_oracle_confirms_overturns_the_majority(
    pool: KernelPool,
) -> None:
    # two wrong candidates agree (min(x, hi) ignores lo), one right one stands alone
    result, _ = run(
        {
            "generator": [s.BUGGY, BUGGY_DOC, s.GOOD],
            "test_writer": [s.NO_TESTS],
            "critic": [_critic("clamp(-5, 0, 3)")],
            "oracle": [s.oracle_from_truth] * 3,
        },
        pool,
        candidates=3,
        first_sample=3,
        critic=True,
    )
    assert result.state.reviews[0].counterexample == "clamp(-5, 0, 3)"
    assert result.state.oracle == {"clamp(-5, 0, 3)": "0"}
    assert result.function(-5, 0, 3) == 0  # the lone right candidate now leads
    # one of three, chosen on the oracle's word: the right code, but no majority to verify it
    assert result.status == "unverified"
    assert nodes(result)[-6:] == ["critic", "execute", "select", "consult", "select", "finish"]


def test_a_critic_opinion_whose_counterexample_separates_nothing_is_advice(
    pool: KernelPool,
) -> None:
    result, mock = run(
        {
            "generator": [s.GOOD, GOOD_DOC],
            "test_writer": [s.NO_TESTS],
            "critic": [_critic("clamp(2, 0, 3)")],
        },
        pool,
        critic=True,
    )
    assert result.status == "verified"
    assert result.state.reviews[0].verdict == "reject"
    assert not mock.calls_for("oracle") and not result.state.oracle
    assert "max(lo, min(x, hi))" in (result.code or "")


def test_a_seed_gives_every_request_its_own_seed_and_a_repeated_run_the_same_ones(
    pool: KernelPool,
) -> None:
    script = {"generator": [s.BUGGY, s.GOOD, GOOD_DOC, GOOD_SWAPPED], "test_writer": [s.NO_TESTS]}

    def seeds(**cfg: object) -> list[tuple[float, int | None]]:
        _, mock = run(script, pool, **cfg)
        return [(c.temperature, c.seed) for c in mock.calls_for("generator")]

    first = seeds(seed=7)
    assert len(first) == 4 and first[0][0] == 0.0 and all(t == 0.8 for t, _ in first[1:])
    assert len({seed for _, seed in first}) == 4, "each request its own seed"
    assert seeds(seed=7) == first, "the same seed asks with the same seeds"
    assert {seed for _, seed in seeds(seed=8)}.isdisjoint({seed for _, seed in first})
    assert {seed for _, seed in seeds()} == {None}, "no seed: the backend's choice"


def test_without_a_diagnosis_the_repair_round_patches_from_the_failing_tests(
    pool: KernelPool,
) -> None:
    """``diagnosis=False``: no debugger call (the script has none to give); the repair round
    still patches the failing candidate, shown its failing example, beside a rewrite."""
    result, mock = run(
        {"generator": [s.BROKEN, s.BROKEN, s.GOOD, GOOD_DOC], "test_writer": [s.NO_TESTS]},
        pool,
        candidates=2,
        diagnosis=False,
    )
    assert not mock.calls_for("debugger") and not result.diagnoses
    assert result.status == "verified"
    repairs = [c for c in result.candidates if c.round == 2]
    assert [c.origin for c in repairs] == ["patch", "rewrite"]
    patch_prompt = mock.calls_for("generator")[2].messages[-1].content
    assert "Current code:" in patch_prompt and "clamp(5, 0, 3)" in patch_prompt
    assert "Diagnosis:" not in patch_prompt
    detail = [e.detail for e in result.timeline if e.node == "diagnose" and e.kind == "end"]
    assert detail and "no diagnosis asked" in detail[0]


def test_top_up_when_failing_settles_a_disagreement_without_more_samples(
    pool: KernelPool,
) -> None:
    """``top_up="when_failing"``: the greedy answer passes the example, the sample disagrees on
    the probes; no more samples are asked (plain sampling's rule), the oracle breaks the tie, and
    one answer against one is not a majority."""
    result, mock = run(
        {
            "generator": [s.BUGGY, s.GOOD],
            "test_writer": [s.NO_TESTS],
            "oracle": [s.oracle_from_truth] * 4,
        },
        pool,
        top_up="when_failing",
    )
    assert len(mock.calls_for("generator")) == 2
    assert "generate" not in nodes(result)[3:] and "consult" in nodes(result)
    assert result.function(-5, 0, 3) == 0
    assert result.status == "unverified" and result.evidence.clusters == (1, 1)


def test_top_up_when_failing_still_tops_up_a_round_with_no_passing_candidate(
    pool: KernelPool,
) -> None:
    result, mock = run(
        {"generator": [s.BROKEN, s.BROKEN, s.GOOD, GOOD_DOC], "test_writer": [s.NO_TESTS]},
        pool,
        top_up="when_failing",
    )
    assert len(mock.calls_for("generator")) == 4
    assert result.status == "verified" and nodes(result).count("generate") == 2


def test_the_test_writer_can_propose_inputs_instead_of_guessed_values(pool: KernelPool) -> None:
    """``spec_blind_form="inputs"``: the reply is calls alone; each becomes a probe input the
    candidates are compared on, and no model-written test (no guessed value) joins the run."""
    inputs = s.block("clamp(2, 0, 3)\nclamp(-7, 0, 3)\nclamp(9, 0, 3)\nclamp(2, 0, 3)")
    result, mock = run(
        {"generator": [s.BUGGY, s.GOOD, GOOD_DOC, GOOD_SWAPPED], "test_writer": [inputs]},
        pool,
        spec=NO_EXAMPLE_SPEC,
        spec_blind_form="inputs",
    )
    prompt = mock.calls_for("test_writer")[0].messages[-1].content
    assert "No assert, no expected value" in prompt
    assert not [t for t in result.tests if t.origin == "spec_blind"]
    proposed = [p.call for p in result.state.probes if p.origin == "model_input"]
    assert proposed == ["clamp(2, 0, 3)", "clamp(-7, 0, 3)", "clamp(9, 0, 3)"]
    # clamp(-7, 0, 3) separates the buggy greedy answer from the three that agree
    assert result.evidence.clusters == (3, 1)
    assert result.function(-7, 0, 3) == 0
    assert result.status == "unverified"  # no trusted test: agreement alone does not verify
