"""A population drawn across forms (issue 45 item 2): the first round's samples take turns
across prompt forms (``population_forms``) and temperatures (``population_temperatures``) at
the same number of candidates, the top-up going on where the round stopped; the requests
that share a prompt and a temperature go through the gate side by side; every candidate
records the form and temperature it came from. Scripted mock model, real kernel pool."""

from __future__ import annotations

import scripted as s

from selfheal import HealConfig, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockCall, MockProvider
from selfheal.result import HealResult


def form_of(call: MockCall) -> str:
    """``complete`` when the request prefilled the reply (the header to continue)."""
    return "complete" if call.messages[-1].role == "assistant" else "instruct"


def asked(mock: MockProvider) -> list[tuple[str, float]]:
    return [(form_of(c), c.temperature) for c in mock.calls_for("generator")]


def drawn(result: HealResult) -> list[tuple[str, str | None, float]]:
    return [(c.origin, c.form, c.temperature) for c in result.candidates]


def run(pool: KernelPool, replies: list[str], **cfg: object) -> tuple[HealResult, MockProvider]:
    mock = MockProvider({"generator": replies})  # type: ignore[dict-item]
    base: dict[str, object] = {"memory": False, "spec_blind_tests": False, "repair": False}
    config = HealConfig(**{**base, **cfg})  # type: ignore[arg-type]
    return heal(s.SPEC, provider=mock, config=config, executor=pool), mock


def test_the_samples_take_turns_across_forms_and_temperatures(pool: KernelPool) -> None:
    result, mock = run(
        pool,
        [s.GOOD] * 4,
        candidates=4,
        first_sample=4,
        population_forms=("complete", "instruct"),
        population_temperatures=(0.6, 1.0),
    )
    assert asked(mock) == [
        ("complete", 0.0), ("instruct", 0.0), ("complete", 0.6), ("instruct", 1.0)
    ]  # fmt: skip
    assert drawn(result) == [
        ("greedy", "complete", 0.0), ("greedy", "instruct", 0.0),
        ("sample", "complete", 0.6), ("sample", "instruct", 1.0),
    ]  # fmt: skip
    # the result's dict (the CLI's --json, the benchmark's records) says where each came from
    rows = result.to_dict()["candidates"]
    assert [(r["form"], r["temperature"]) for r in rows] == [
        ("complete", 0.0), ("instruct", 0.0), ("complete", 0.6), ("instruct", 1.0)
    ]  # fmt: skip


def test_the_top_up_goes_on_where_the_round_stopped(pool: KernelPool) -> None:
    """The greedy answers fail the spec's example, so the round tops up to 6: its samples are
    the round's answers 3 to 6, and a temperature repeated crosses the two forms."""
    result, mock = run(
        pool,
        [s.BROKEN, s.BROKEN, s.GOOD, s.GOOD, s.GOOD, s.GOOD],
        candidates=6,
        population_temperatures=(0.6, 0.6, 1.0, 1.0),
    )
    calls = asked(mock)
    assert calls[:2] == [("complete", 0.0), ("instruct", 0.0)]  # the first request
    assert calls[2:] == [("complete", 1.0), ("instruct", 1.0), ("complete", 0.6), ("instruct", 0.6)]
    assert [c.round for c in result.candidates] == [1] * 6
    assert drawn(result)[2:] == [("sample", f, t) for f, t in calls[2:]]
    assert result.code is not None and "max(lo, min(x, hi))" in result.code


def test_one_form_for_the_samples_whatever_the_first_answer() -> None:
    """``population_forms`` sets the samples' forms alone: the greedy answer keeps
    ``first_answer``'s."""
    mock = MockProvider({"generator": [s.GOOD] * 3})
    config = HealConfig(
        candidates=3, first_sample=3, first_answer="complete", population_forms=("instruct",),
        memory=False, spec_blind_tests=False, repair=False, run_tests=False, probes=False,
    )  # fmt: skip
    result = heal(s.SPEC, provider=mock, config=config)
    assert asked(mock) == [("complete", 0.0), ("instruct", 0.8), ("instruct", 0.8)]
    assert [c.form for c in result.candidates] == ["complete", "instruct", "instruct"]


def test_requests_that_share_a_prompt_and_a_temperature_are_asked_side_by_side(
    pool: KernelPool,
) -> None:
    """The scripted mock answers one request at a time (its gate is 1 wide): the samples come
    to it grouped by form and temperature, so that a backend that joins the requests of one
    group (llama-server's ``n``) can ask each as one request; the candidates keep the round's
    order (answers 3, 5, 7 completing at 0.6; 4, 6, 8 instructed at 1.0)."""
    result, mock = run(
        pool,
        [s.GOOD] * 8,
        candidates=8,
        first_sample=8,
        population_temperatures=(0.6, 1.0),
    )
    assert asked(mock) == [
        ("complete", 0.0), ("instruct", 0.0),
        *[("complete", 0.6)] * 3, *[("instruct", 1.0)] * 3,
    ]  # fmt: skip
    assert [(c.form, c.temperature) for c in result.candidates[2:]] == [
        ("complete", 0.6), ("instruct", 1.0)
    ] * 3  # fmt: skip
    assert [c.id for c in result.candidates] == [f"c{i}" for i in range(1, 9)]


def test_the_default_draws_are_the_forms_of_first_answer_at_sample_temperature() -> None:
    g = HealConfig().generation
    assert (g.population_forms, g.population_temperatures) == ((), ())
    parsed = HealConfig(population_forms="complete, instruct", population_temperatures="0.6,1")
    assert parsed.generation.population_forms == ("complete", "instruct")
    assert parsed.generation.population_temperatures == (0.6, 1.0)


def test_a_bad_form_or_temperature_says_which_setting_and_item() -> None:
    import pytest

    from selfheal.cli import build_parser
    from selfheal.cli.heal import heal_config
    from selfheal.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"population_forms.*must be one of 'instruct', 'complete' or 'script'"
    ):
        HealConfig(population_forms=("complete", "chat"))
    args = build_parser().parse_args(["heal", "SPEC", "--population-temperatures", "0.6,3"])
    with pytest.raises(ConfigError, match=r"--population-temperatures \(item 2\) 3"):
        heal_config(args)
