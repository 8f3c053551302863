"""The benchmark modes and the ``HealConfig`` each one runs with: one table, nothing else.

Every mode of a run uses the same model, temperature and iteration budget; only the
switches in ``MODES`` differ. ``single_shot`` is the baseline: one generation, no tests,
no repair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evaluation.errors import SuiteError
from selfheal.config import HealConfig

__all__ = [
    "DEFAULT_MODES",
    "MODES",
    "PAIRED",
    "PASSES",
    "asks_of",
    "base_of",
    "config_for",
    "with_asks",
    "parse_modes",
    "split_mode",
]


def _single_shot_switches() -> dict[str, object]:
    """What ``HealConfig.single_shot()`` changes from the defaults (selfheal's own
    definition of the baseline, so the two cannot drift apart)."""
    default = HealConfig().flat()
    single = HealConfig.single_shot().flat()
    return {k: v for k, v in single.items() if v != default[k]}


def _sampling(n: int) -> dict[str, object]:
    """Plain sampling of ``n`` answers: the greedy one, and only when it fails the spec's
    examples ``n - 1`` samples, keeping the first that passes them; asked in the instructed
    form, so that the yardstick is the same in every run (rounds 1-5 asked so)."""
    return {
        "candidates": n,
        "first_answer": "instruct",
        "first_sample": 1,
        "probes": False,
        "spec_blind_tests": False,
        "repair": False,
        "oracle_calls": 0,
    }


MODES: Mapping[str, Mapping[str, object]] = {
    "single_shot": _single_shot_switches(),
    "single_shot-complete": {**_single_shot_switches(), "first_answer": "complete"},
    "single_shot-instruct": {**_single_shot_switches(), "first_answer": "instruct"},
    "single_shot-script": {**_single_shot_switches(), "first_answer": "script"},
    "heal": {},
    "heal-r4": {"candidates": 4, "first_answer": "instruct"},
    "heal-complete": {"first_answer": "complete"},
    "heal-both": {"first_answer": "both"},
    "heal-mixed": {
        "population_forms": ("complete", "instruct"),
        "population_temperatures": (0.6, 1.0),
    },
    "heal-three-forms": {"population_forms": ("complete", "instruct", "script")},
    "heal-k1": {"candidates": 1, "first_sample": 1},
    "heal-all-at-once": {"first_sample": 4},
    "heal-greedy-first": {"first_sample": 1},
    "heal-lean": {"first_sample": 1, "repair": False},
    "heal-top-up-when-failing": {"top_up": "when_failing"},
    "heal-no-probes": {"probes": False, "spec_blind_tests": False},
    "heal-no-repair": {"repair": False},
    "heal-spec-tests": {"spec_blind_tests": True},
    "heal-spec-inputs": {"spec_blind_form": "inputs"},
    "heal-critic": {"critic": True},
    "heal-lessons": {"lessons": True},
    "heal-adversarial": {"adversarial_tests": True},
    "heal-no-critic": {"critic": False},
    "heal-no-adversarial": {"adversarial_tests": False},
    "heal-no-spec-tests": {"spec_blind_tests": False},
    "heal-no-examples": {"example_tests": False},
    "heal-no-lessons": {"lessons": False},
    "heal-no-diagnosis": {"diagnosis": False},
    "heal-debugger": {"debugger_steps": 3},
    "heal-debugger-json": {"debugger_steps": 3, "debugger_tool_calls": "structured"},
    "sample-5": _sampling(5),
    "sample-4": _sampling(4),
    "heal-memory": {"memory": True},
}
"""Mode name -> the ``HealConfig`` fields it sets on top of the shared settings.
The prompt forms (``HealConfig.first_answer``): ``single_shot-instruct``,
``single_shot-complete`` and ``single_shot-script`` (EvalPlus's instruct prompt) name the
single shot's form explicitly (``single_shot`` follows the default); ``heal-complete`` asks
every first-round answer completing the spec's header; ``heal-both`` the greedy answer
completing, then instructed, and the samples taking turns; ``heal-mixed`` is ``heal`` whose
samples also take turns across temperatures, completing at 0.6 and instructed at 1.0 (the same
mean as heal's 0.8; docs/loop.md, "A population drawn across forms"); ``heal-three-forms`` is
``heal`` whose round takes turns across the three forms (the two greedy answers completing and
instructed, then a sample in the ``script`` form, then completing, ...). ``heal-r4`` is heal with round 4's
defaults (a population of 4, every answer instructed). ``sample-4`` is ``sample-5`` at heal's
population size on this machine (4), so heal is also compared at equal candidates.
``heal`` is the loop with selfheal's defaults (a population of 4, the first 2 asked first);
``heal-k1`` one candidate per round (the old chain); ``heal-all-at-once`` all 4 candidates in
the first request; ``heal-greedy-first`` the greedy answer alone first (samples only when it
fails the examples or there are none: no confirming sample when it passes them); ``heal-lean``
that and no repair round (the greedy answer, else a population of 4 chosen by agreement: the
parts of heal that cost about what plain sampling costs); ``heal-top-up-when-failing`` asks
for the rest of the first round only when no candidate passes the examples (not to settle a
disagreement with a passing greedy answer); ``heal-no-probes`` no probe inputs and no spec-blind tests (candidates are
then chosen by the trusted tests alone, greedy first: sampling plus a filter by the spec's
examples, plus repair); ``heal-no-repair`` the first round only; ``heal-critic`` /
``heal-adversarial`` turn on roles that are off by default; ``heal-spec-tests`` asks the
spec-blind test writer on every task (the default asks it only when the spec has no example);
``heal-spec-inputs`` has it propose inputs (calls alone, each a probe) instead of tests; each ``heal-no-*`` turns one
component off; ``heal-debugger`` lets the debugger make up to three tool calls (run a snippet,
inspect a function, diff two candidates, trace a failing test; through the provider's native
tool calling where it has one) before it diagnoses, ``heal-debugger-json`` the same through
structured JSON replies; ``heal-no-diagnosis`` asks no diagnosis at all (the repair round
patches from the failing tests); ``sample-5`` is the plain-sampling yardstick heal must beat: the greedy
answer, and only if it fails the spec's examples 4 samples, keeping the first that passes them
(no probes, no model-written tests, no oracle, no repair); ``heal-memory`` is ``heal`` with the
memory across runs, run twice (see ``PASSES``). Every other mode runs with the memory off, so no
task can learn from another."""

PASSES: Mapping[str, int] = {"heal-memory": 2}
"""Modes that run the whole suite more than once, in order, sharing one memory that starts
empty (``memory.sqlite3`` beside the results): their records are ``heal-memory:1`` (the first
pass, which remembers as it goes) and ``heal-memory:2`` (the suite again, recalling what the
first pass learnt). The report pairs the second pass with the first."""

PAIRED: Mapping[str, str] = {
    "heal-critic": "heal",
    "heal-adversarial": "heal",
    "heal-lessons": "heal",
    "heal-no-repair": "heal",
    "heal-top-up-when-failing": "heal",
    "heal-no-diagnosis": "heal",
    "heal-debugger": "heal",
    "heal-debugger-json": "heal",
}
"""With ``--paired``: mode -> its base mode. Such a mode differs from its base only in switches
read by routes (the critic, the adversary, the lessons, the repair round) or by a few nodes
(``selfheal.graph.branch.READ_BY``), so instead of a run of its own it continues the base
mode's run of the same task from the first state where its config would have gone another way
(``selfheal.graph.branch``): the same first round, the same answers up to there, so the pair
differs by what the switch does and not by the luck of its samples (``evaluation.paired``)."""

DEFAULT_MODES: tuple[str, ...] = ("single_shot", "heal")
"""Modes run when ``--modes`` is not given."""


def config_for(
    mode: str,
    *,
    max_iterations: int | None = None,
    temperature: float = 0.0,
    extra: Mapping[str, object] | None = None,
) -> HealConfig:
    """The ``HealConfig`` of ``mode``. ``extra`` holds settings shared by every mode
    (e.g. timeouts); the mode's own switches win over it, so a mode means the same thing in
    every run. Repair runs always use ``headless approve`` so nothing waits for a human, and
    the memory across runs is off unless the mode turns it on. ``mode`` may name a pass of a
    mode in ``PASSES`` (``heal-memory:2``)."""
    switches = MODES[split_mode(mode)[0]]
    asks = asks_of(mode)
    fields: dict[str, object] = {
        "temperature": temperature,
        "max_iterations": max_iterations or HealConfig().repairs.max_iterations,
        "autonomy": "full_auto",
        "on_headless": "approve",
        "memory": False,  # tasks never learn from each other, except in the memory modes
    }
    fields.update(extra or {})
    fields.update(switches)
    if asks:
        # a simulated user answers (evaluation.simulated_user); questions are never asked
        # under full_auto, so the gate's approvals are asked too, and approved (on_headless)
        fields.update({"autonomy": "review_repairs", "ask_limit": asks})
    return HealConfig.model_validate(fields)


ASK = "+ask"
"""The suffix of a mode run with a simulated user: ``heal+ask2`` is ``heal`` whose questions
(at most 2) the task's reference answers (``--ask 2``)."""


def with_asks(mode: str, n: int) -> str:
    """``("heal", 2)`` -> ``"heal+ask2"``; ``n == 0`` leaves the mode as it is."""
    return f"{mode}{ASK}{n}" if n > 0 else mode


def asks_of(label: str) -> int:
    """The questions a mode's simulated user may answer (``heal+ask2`` -> 2; 0 without)."""
    _, sep, n = label.partition(ASK)
    return int(n) if sep and n.isdigit() else 0


def without_asks(label: str) -> str:
    """``"heal+ask2"`` -> ``"heal"``: the mode it is compared with."""
    return label.partition(ASK)[0]


def split_mode(label: str) -> tuple[str, int]:
    """``"heal-memory:2"`` -> ``("heal-memory", 2)``; ``"heal"`` -> ``("heal", 1)``. Raises
    ``SuiteError`` for an unknown mode or pass."""
    asked, has_ask, n = label.partition(ASK)
    if has_ask:
        if not n.isdigit() or not 1 <= int(n) <= 20:
            raise SuiteError(f"Unknown mode {label!r}: {ASK}N takes N from 1 to 20.")
        label = asked
    mode, sep, number = label.partition(":")
    if mode not in MODES:
        raise SuiteError(f"Unknown mode {mode!r}. Choose from: {', '.join(MODES)}.")
    passes = PASSES.get(mode, 1)
    if not sep:
        return mode, 1
    if not number.isdigit() or not 1 <= int(number) <= passes or mode not in PASSES:
        raise SuiteError(
            f"Unknown pass {label!r}: "
            + (f"{mode} has passes 1 to {passes}." if mode in PASSES else f"{mode} has one.")
        )
    return mode, int(number)


def parse_modes(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"single_shot,heal"`` -> ``("single_shot", "heal")``, validated, order kept, no
    repeats; a mode in ``PASSES`` becomes one label per pass (``heal-memory`` ->
    ``heal-memory:1``, ``heal-memory:2``)."""
    items = text.split(",") if isinstance(text, str) else list(text)
    modes: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        mode, _ = split_mode(item)
        labels = [f"{mode}:{n}" for n in range(1, PASSES[mode] + 1)] if mode in PASSES else [mode]
        modes += [label for label in labels if label not in modes]
    if not modes:
        raise SuiteError(f"No mode given. Choose from: {', '.join(MODES)}.")
    return tuple(modes)


def base_of(mode: str) -> str | None:
    """With ``--paired``, the mode whose run ``mode`` continues: ``PAIRED``'s, or for a mode
    with a simulated user (``heal+ask2``) the same mode without one, continued from the first
    state where a question would have been open (``selfheal.graph.branch.question_point``);
    None for a mode that runs on its own."""
    if asks_of(mode):
        return without_asks(mode)
    return PAIRED.get(mode)
