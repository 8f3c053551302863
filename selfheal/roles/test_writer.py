"""Test writer: trusted tests from the spec's examples, then spec-blind tests before any code."""

from __future__ import annotations

import re

from selfheal.graph.context import Context
from selfheal.roles._calls import CallLog, ask_for_tests, info
from selfheal.roles.testcode import add_tests, parse_test_block
from selfheal.spec import example_assert, find_examples
from selfheal.state import HealState

NODE = "plan_tests"


def _with_examples(state: HealState, ctx: Context, log: CallLog) -> HealState:
    """Add the spec's examples (once its entry point is known) as trusted tests."""
    spec = state.spec
    if not (state.config.example_tests and spec.entry_point and spec.examples):
        return state
    examples = [(example_assert(ex), "example written in the spec") for ex in spec.examples]
    new = add_tests(state, examples, origin="example", prefix="ex", trusted=True, limit=50)
    if new:
        info(log, ctx, state, NODE, f"{len(new)} example test(s) from the spec (trusted)")
    return state.model_copy(update={"tests": state.tests + new})


def plan_tests(state: HealState, ctx: Context) -> HealState:
    """Add example tests (trusted) and spec-blind tests (untrusted) to the state."""
    cfg = state.config
    log = CallLog()
    state = _with_examples(state, ctx, log)
    spec = state.spec
    if cfg.spec_blind_tests and cfg.max_spec_tests > 0:
        # one lenient call: a reply without usable tests adds none (provider errors propagate)
        code = ask_for_tests(
            ctx,
            state,
            log,
            node=NODE,
            role="test_writer",
            prompt="test_writer",
            variables={
                "spec": spec.text,
                "signature": spec.signature or "",
                "entry_point": spec.entry_point or "",
                "max_tests": cfg.max_spec_tests,
            },
        )
        signature, found = parse_test_block(code, spec.entry_point)
        if spec.entry_point is None and signature:
            name = re.match(r"def\s+(\w+)", signature)
            if name:
                spec = spec.model_copy(
                    update={
                        "entry_point": name.group(1),
                        "signature": signature,
                        "examples": find_examples(spec.text, name.group(1)),
                    }
                )
                state = _with_examples(state.model_copy(update={"spec": spec}), ctx, log)
                found = parse_test_block(code, spec.entry_point)[1]
        if spec.entry_point is None:
            found = []
        new = add_tests(
            state, found, origin="spec_blind", prefix="sb", trusted=False, limit=cfg.max_spec_tests
        )
        info(log, ctx, state, NODE, f"{len(new)} spec-blind test(s) (untrusted)")
        state = state.model_copy(update={"tests": state.tests + new})
    return log.apply(state)
