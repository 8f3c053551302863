"""Answers that stop when the function ends (issue 45, item 4), in a heal: each code request
carries the stop rule and a ``max_tokens`` sized from its prompt (``_calls.code_tokens``), and
the prose a model writes after its function is neither paid for nor kept. Scripted mock model,
real kernel pool."""

from __future__ import annotations

import scripted as s

from selfheal import HealConfig, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockCall, MockProvider
from selfheal.llm.tokens import estimate_tokens
from selfheal.roles._calls import CODE_TOKENS_FLOOR, CODE_TOKENS_PER_PROMPT_TOKEN

ONE = {"candidates": 1, "first_sample": 1, "agreement": 1, "spec_blind_tests": False}
CHATTY = s.GOOD + "\n\nThis function works by clamping x from above with min and from below " * 3


def _prompt_tokens(call: MockCall) -> int:
    return sum(estimate_tokens(m.content) for m in call.messages)


def test_max_tokens_follows_the_prompt_between_a_floor_and_the_config(pool: KernelPool) -> None:
    long_spec = s.SPEC + " Keep in mind:" + " the bounds are inclusive and may be floats." * 60
    for spec, ceiling in ((s.SPEC, 1024), (long_spec, 4096), (long_spec, 500)):
        mock = MockProvider({"generator": [s.GOOD]})
        config = HealConfig(**ONE, repair=False, first_answer="instruct", max_tokens=ceiling)
        heal(spec, provider=mock, config=config, executor=pool)
        (call,) = mock.calls_for("generator")
        sized = max(CODE_TOKENS_FLOOR, CODE_TOKENS_PER_PROMPT_TOKEN * _prompt_tokens(call))
        assert call.max_tokens == min(ceiling, sized)
    assert CODE_TOKENS_FLOOR < sized < 4096  # the long spec is sized above the floor


def test_prose_after_the_function_is_not_kept_or_paid_for(pool: KernelPool) -> None:
    mock = MockProvider({"generator": [CHATTY]})
    config = HealConfig(**ONE, repair=False, first_answer="instruct")
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    (candidate,) = result.candidates
    assert "This function works" not in candidate.rationale
    assert candidate.cost.completion_tokens == estimate_tokens(s.GOOD.removesuffix("```"))
