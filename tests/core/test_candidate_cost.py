"""What each candidate cost: the tokens and seconds of the call that wrote it and its seconds in
the sandbox, in the state, ``runs show`` and the Candidates tab."""

from __future__ import annotations

from pathlib import Path

import selfheal
from selfheal.config import HealConfig
from selfheal.llm.mock import MockProvider
from selfheal.state.candidates import CandidateCost
from selfheal.widgets.candidates import candidates_view
from selfheal.widgets.fragments import candidates_html

SPEC = "Write a function add(a, b) that returns a + b. Example: add(1, 2) -> 3"
SAME = "```python\ndef add(a, b):\n    return a + b\n```"
OTHER = "```python\ndef add(a, b):\n    return b + a\n```"


def test_each_candidate_carries_its_own_tokens_and_seconds(runs_dir: Path) -> None:
    provider = MockProvider({"generator": [SAME, SAME, OTHER, OTHER]}, default="[]")
    config = HealConfig(memory=False, first_sample=2, spec_blind_tests=False)
    result = selfheal.heal(SPEC, provider=provider, config=config)
    candidates = result.candidates
    assert len(candidates) >= 2
    generator = result.state.usage.by_role["generator@mock:scripted"]
    assert sum(c.cost.prompt_tokens for c in candidates) == generator.prompt_tokens
    assert sum(c.cost.completion_tokens for c in candidates) == generator.completion_tokens
    calls = provider.calls_for("generator")
    assert [c.cost.tokens > 0 for c in candidates] == [True] * len(calls)
    assert all(c.cost.sandbox_seconds > 0 for c in candidates)
    # c1 and c2 are the same code: one sandbox run, split between them
    c1, c2 = candidates[0], candidates[1]
    assert c1.code == c2.code and c1.cost.sandbox_seconds == c2.cost.sandbox_seconds
    assert CandidateCost().tokens == 0  # a remembered solution or a human's edit costs nothing

    shown = result.candidates_text()
    assert f"{c1.cost.tokens:>5} tok" in shown and "s sandbox" in shown
    panel = candidates_html(candidates_view(result.state))
    assert ">cost</th>" in panel and f"{c1.cost.tokens} tok · " in panel
