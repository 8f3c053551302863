"""Adversarial QA: edge-case tests aimed at the first candidate (untrusted)."""

from __future__ import annotations

from selfheal.context import Context
from selfheal.roles._calls import CallLog, ask_for_tests
from selfheal.state import HealState
from selfheal.testsuite import add_tests, parse_test_block, sources

NODE = "adversarial"


async def adversarial(state: HealState, ctx: Context) -> HealState:
    """Ask for edge cases against the current candidate and add them as untrusted tests."""
    cfg = state.config
    log = CallLog(ctx, NODE)
    current = state.current or (state.candidates[0] if state.candidates else None)
    assert current is not None, "adversarial needs a candidate"
    code = await ask_for_tests(
        state,
        log,
        role="adversary",
        prompt="adversary",
        variables={
            "code": current.code,
            "existing": sources(state.tests),
            "max_tests": cfg.tests.max_adversarial_tests,
        },
    )
    _, found = parse_test_block(code, state.spec.entry_point)
    new = add_tests(
        state,
        found,
        origin="adversarial",
        prefix="adv",
        trusted=False,
        limit=cfg.tests.max_adversarial_tests,
    )
    log.info(state, f"{len(new)} adversarial test(s) (untrusted)")
    return log.apply(state, tests=state.tests + new)
