"""Test writer: trusted tests from the spec's examples, the probe inputs made from the spec
alone, and spec-blind model-written tests (untrusted claims whose calls become probes)."""

from __future__ import annotations

import re

from selfheal.context import Context
from selfheal.example_hints import examples_line
from selfheal.examples import example_assert
from selfheal.probes import calls_in_test, merge_probes, planned_probes
from selfheal.roles._calls import CallLog, ask_for_tests
from selfheal.state import HealState, TestCase
from selfheal.testsuite import add_tests, parse_test_block

NODE = "plan_tests"
_UNNAMED = (
    "the spec names no function yet: its examples are read once the first candidate names one "
    "(name it with --entry-point NAME, entry_point= in Python, to read them before)"
)


def with_examples(state: HealState, log: CallLog) -> HealState:
    """Add the spec's examples (once its entry point is known) as trusted tests."""
    spec = state.spec
    if not state.config.tests.example_tests:
        return state
    if not spec.entry_point:
        log.info(state, _UNNAMED)
        return state
    examples = [(example_assert(ex), "example written in the spec") for ex in spec.examples]
    new = add_tests(state, examples, origin="example", prefix="ex", trusted=True, limit=50)
    line = examples_line(spec, len(new), yours=any(t.trusted for t in state.tests))
    if line:
        log.info(state, line)
    return state.model_copy(update={"tests": state.tests + new})


def with_probes(state: HealState, log: CallLog) -> HealState:
    """Add the probe inputs the spec and the tests give (mutations of the examples, the calls
    inside model-written tests, signature values), up to ``max_probes``."""
    cfg = state.config
    if not (cfg.tests.probes and cfg.tests.run_tests and state.spec.entry_point):
        return state
    pairs = planned_probes(state.spec, state.tests, cfg.tests.max_probes)
    # the calls inside model-written tests come on top of the mechanical ones (the tests
    # themselves are capped by their own limits)
    extra = sum(1 for _, origin in pairs if origin == "model_test")
    probes = merge_probes(
        state.probes, pairs, limit=cfg.tests.max_probes + extra, round=state.iteration
    )
    added = len(probes) - len(state.probes)
    if added:
        log.info(state, f"{added} probe input(s) (compared across candidates)")
    return state.model_copy(update={"probes": probes})


def probes_added(state: HealState, ctx: Context, *, node: str) -> HealState:
    """``with_probes`` for a node outside the roles (``execute``): its event is added too."""
    log = CallLog(ctx, node)
    return log.apply(with_probes(state, log))


async def plan_tests(state: HealState, ctx: Context) -> HealState:
    """Before any code: the spec's examples as trusted tests and the mechanical probe inputs.
    (The spec-blind test writer is asked in ``generate``, at the same time as the candidates.)"""
    log = CallLog(ctx, NODE)
    yours_noted(state, log)
    state = with_examples(state, log)
    state = with_probes(state, log)
    return log.apply(state)


def yours_noted(state: HealState, log: CallLog) -> None:
    """A line for your tests: how many, and which are smoke tests (they check no value)."""
    yours = [t for t in state.tests if t.origin == "user"]
    if not yours:
        return
    smoke = [t.id for t in yours if t.smoke]
    line = f"{len(yours)} test(s) of yours (trusted)"
    if smoke:
        line += (
            f", {len(smoke)} of them smoke test(s) that check no value "
            f"({', '.join(smoke[:3])}{', ...' if len(smoke) > 3 else ''}): they must pass, "
            "and cannot verify on their own"
        )
    log.info(state, line)


async def _ask_spec_blind(state: HealState, log: CallLog, *, inputs_only: bool) -> str:
    """The test writer's reply (a code block), from the spec alone: one lenient call."""
    return await ask_for_tests(
        state,
        log,
        role="test_writer",
        prompt="test_writer",
        variables={"max_tests": state.config.tests.max_spec_tests, "inputs_only": inputs_only},
        max_tokens=200 if inputs_only else 400,  # calls alone are short
    )


async def spec_blind_tests(state: HealState, log: CallLog) -> tuple[TestCase, ...]:
    """Ask the test writer for tests from the spec alone (one lenient call: a reply without
    usable tests adds none; provider errors propagate). Untrusted; their calls become probes."""
    cfg = state.config
    spec = state.spec
    code = await _ask_spec_blind(state, log, inputs_only=False)
    signature, found = parse_test_block(code, spec.entry_point)
    if spec.entry_point is None:
        name = re.match(r"def\s+(\w+)", signature or "")
        found = parse_test_block(code, name.group(1))[1] if name else []
    new = add_tests(
        state,
        found,
        origin="spec_blind",
        prefix="sb",
        trusted=False,
        limit=cfg.tests.max_spec_tests,
    )
    log.info(state, f"{len(new)} spec-blind test(s) (untrusted)")
    return new


def wants_inputs(state: HealState) -> bool:
    """The test writer proposes inputs, not tests (``spec_blind_form="inputs"``, and the
    function has a name to call)."""
    return state.config.tests.spec_blind_form == "inputs" and bool(state.spec.entry_point)


async def spec_blind_inputs(state: HealState, log: CallLog) -> list[str]:
    """Ask the test writer for calls that exercise the spec, from the spec alone (one lenient
    call: a reply without usable calls adds none; provider errors propagate). Each call becomes
    a probe input: candidates are compared on it, nothing is expected of it."""
    code = await _ask_spec_blind(state, log, inputs_only=True)
    found = calls_in_test(code, state.spec.entry_point)
    calls = list(dict.fromkeys(found))[: state.config.tests.max_spec_tests]
    log.info(state, f"{len(calls)} spec-blind input(s) (probes)")
    return calls


def with_inputs(state: HealState, calls: list[str]) -> HealState:
    """``state`` with the test writer's proposed calls as probe inputs (on top of the
    mechanical ones' ``max_probes``)."""
    probes = merge_probes(
        state.probes,
        [(c, "model_input") for c in calls],
        limit=len(state.probes) + len(calls),
        round=state.iteration,
    )
    return state.model_copy(update={"probes": probes})
