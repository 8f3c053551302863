"""Never an empty result (issue 45, item 3): a reply that does not parse is asked again as a
repair of that reply, sampled with another seed (not the same greedy request again), and when
no reply of the first round parses, the code they held still joins the population, so heal
returns code and its repair round can fix it. Scripted mock model, real kernel pool."""

from __future__ import annotations

import scripted as s

from selfheal import HealConfig, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.llm.parsing import code_like

NO_COLON = s.block("def clamp(x, lo, hi)\n    return max(lo, min(x, hi))")
"""The function the model meant, with a syntax error (the colon is missing)."""

ONE = {
    "candidates": 1,
    "first_sample": 1,
    "agreement": 1,
    "spec_blind_tests": False,
    "probes": False,
    "seed": 7,
}


def test_a_reply_that_does_not_parse_is_repaired_by_a_sample_not_asked_again_greedy(
    pool: KernelPool,
) -> None:
    mock = MockProvider({"generator": [NO_COLON, s.GOOD]})
    config = HealConfig(**ONE, repair=False, first_answer="instruct")
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    assert result.code is not None and "max(lo, min(x, hi))" in result.code
    first, again = mock.calls_for("generator")
    assert first.temperature == 0.0
    assert again.temperature == config.generation.sample_temperature and again.seed != first.seed
    # a repair: the broken reply is shown, with what was wrong
    shown = again.messages[-2]
    assert shown.role == "assistant" and shown.content.startswith(NO_COLON.removesuffix("```"))
    assert "SyntaxError" in again.messages[-1].content


def test_a_completion_that_does_not_parse_is_repaired_as_a_whole_reply(pool: KernelPool) -> None:
    """The completing form's broken reply is shown whole (the prefilled header and the
    continuation) in an instructed repair, sampled; not the instructed greedy answer again."""
    mock = MockProvider({"generator": [" x, lo, hi)\n    return x +\n", s.GOOD]})
    config = HealConfig(**ONE, repair=False, first_answer="complete")
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    assert result.code is not None and "max(lo, min(x, hi))" in result.code
    first, again = mock.calls_for("generator")
    assert first.messages[-1].role == "assistant"  # the prefilled header
    assert again.temperature == config.generation.sample_temperature
    shown = again.messages[-2]
    assert shown.role == "assistant" and shown.content.startswith("```python\ndef clamp(x, lo")
    assert again.messages[-1].role == "user" and "SyntaxError" in again.messages[-1].content


def test_code_that_never_parses_joins_the_population_and_is_repaired(pool: KernelPool) -> None:
    """Three replies without a colon: the run used to end `failed` with no code. The code
    joins as the first candidate, fails to load, and the repair round patches it."""
    mock = MockProvider({"generator": [NO_COLON] * 3 + [s.GOOD]})
    config = HealConfig(
        **ONE,
        first_answer="instruct",
        diagnosis=False,
        repair_width=1,
        max_iterations=2,
    )
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    assert result.status == "verified", result.error
    first = result.candidates[0]
    assert first.code == "def clamp(x, lo, hi)\n    return max(lo, min(x, hi))"
    assert first.report is not None and not first.report.load.ok
    patch = mock.calls_for("generator")[3]
    assert patch.temperature == 0.0 and "does not load" in patch.messages[-1].content
    assert result.code is not None and "def clamp(x, lo, hi):" in result.code


def test_without_a_repair_round_heal_still_returns_the_code_it_got(pool: KernelPool) -> None:
    mock = MockProvider({"generator": [NO_COLON] * 3})
    config = HealConfig(**ONE, repair=False, first_answer="instruct")
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    assert result.status != "failed" and result.code is not None
    assert "return max(lo, min(x, hi))" in result.code


def test_code_like_text_is_the_code_a_reply_meant() -> None:
    assert code_like(NO_COLON) == "def clamp(x, lo, hi)\n    return max(lo, min(x, hi))"
    # the complete statements of a block when they define the function
    cut = s.block("def f(x):\n    return x\n\nprint(f(")
    assert code_like(cut, entry_point="f") == "def f(x):\n    return x"
    assert code_like("Sure! Here is how:\ndef f(x)\n    return x\nHope it helps") == (
        "def f(x)\n    return x"
    )
    assert code_like("I cannot help with that.") is None
    assert code_like("```json\n{}\n```") is None
