"""The immutable state of a heal run and the records inside it.

Nodes never mutate a state: they return ``state.model_copy(update=...)``. Every state the
runner produces is appended to the run log, so any of them can be reloaded or forked.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import Field

from selfheal._record import Record
from selfheal.config import HealConfig
from selfheal.kernel_sandbox.rewrite import pytest_item_test
from selfheal.kernel_sandbox.types import (
    AssertTest,
    CallTest,
    ExecutionReport,
    Outcome,
    SandboxTest,
)
from selfheal.llm.base import Message

Status = Literal["running", "awaiting_approval", "verified", "failed", "exhausted", "unverified"]
"""``verified``: every active test passed (and the critic accepted); ``failed``: the run could
not go on (an error is recorded); ``exhausted``: the iteration, token or time budget ran out
with tests still failing; ``unverified``: code was produced but no test ran (single shot)."""

Origin = Literal["spec_blind", "adversarial", "example", "user", "critic"]
"""Where a test came from. ``example`` and ``user`` tests are trusted; model-written ones are not."""

NodeName = Literal[
    "recall",
    "plan_tests",
    "generate",
    "gate",
    "adversarial",
    "execute",
    "select",
    "consult",
    "critic",
    "diagnose",
    "lessons",
    "repair",
    "finish",
    "done",
]

EventKind = Literal["start", "end", "llm", "degraded", "error", "decision", "info", "tool"]
"""``tool``: one of the debugger's tool calls ran (its seconds in the sandbox in
``duration``; the model call that chose it is the ``llm`` event before it)."""

DebugTool = Literal[
    "run_snippet", "inspect_function", "diff_candidates", "trace_failure", "unknown"
]
"""The debugger's tools (``roles/debugtools/``); ``unknown``: the model named none of them."""

DiagnosisCategory = Literal[
    "logic",
    "edge_case",
    "exception",
    "syntax",
    "import",
    "timeout",
    "crash",
    "wrong_test",
    "spec_ambiguity",
    "performance",
    "other",
]
"""What kind of fault a diagnosis found (the debugger's reply model offers these choices)."""

Blame = Literal["code", "test", "both", "unclear"]
"""Whether a diagnosis finds the code or the test wrong."""

Verdict = Literal["accept", "reject"]
"""The critic's verdict."""


class Example(Record):
    """An input/output example written in the spec."""

    call: str
    """The call expression, e.g. ``add(2, 3)``."""
    expected: str
    """The expected value as Python source, e.g. ``5``."""


class Spec(Record):
    """What the user asked for."""

    text: str
    """The spec as written (plain language, or a signature with a docstring)."""
    entry_point: str | None = None
    """Name of the function to write, when known."""
    signature: str | None = None
    """The ``def`` line, when known."""
    examples: tuple[Example, ...] = ()
    """Examples found in the text (doctests, ``f(x) -> y`` lines)."""
    prelude: str = ""
    """Imports written in the spec (a HumanEval prompt's ``from typing import List``)."""


class TestCase(Record):
    """One test, with where it came from and whether it can overturn code."""

    __test__ = False

    id: str
    """Stable id: ``ex1`` example, ``u1`` user, ``sb1`` spec-blind, ``adv1`` adversarial, ``cr1`` critic."""
    origin: Origin
    """Who wrote it."""
    code: str | None = None
    """Assertion code, e.g. ``assert f(2) == 4`` (or None for a call/expect test)."""
    function: str | None = None
    """For call/expect tests: the function to call."""
    args: tuple[Any, ...] = ()
    """For call/expect tests: positional arguments."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """For call/expect tests: keyword arguments."""
    expected: Any = None
    """For call/expect tests: the value the call must return."""
    pytest_module: str | None = None
    """For an item of a pytest module you gave: the module (``code`` is then the item's
    function, as shown)."""
    pytest_item: str | None = None
    """For an item of a pytest module: pytest's item as collected (JSON: ``id``, ``cls``,
    ``func``, ``k`` the index of its parameter set, ``params`` as shown, ``line``)."""
    rationale: str = ""
    """Why the test exists."""
    trusted: bool = False
    """Trusted tests (examples, the user's) must pass; an untrusted test alone never overturns code."""
    quarantined: bool = False
    """A quarantined test still runs and is reported, but no longer blocks verification."""
    quarantine_reason: str = ""
    """Why it was quarantined (the debugger's finding that the test is wrong)."""
    added_at: int = 0
    """Iteration at which the test was added (0: before any code)."""

    def to_sandbox(self) -> SandboxTest:
        if self.pytest_module is not None and self.pytest_item is not None:
            item = json.loads(self.pytest_item)
            code = pytest_item_test(self.pytest_module, item["cls"], item["func"], item["k"])
            return AssertTest(id=self.id, code=code)
        if self.code is not None:
            return AssertTest(id=self.id, code=self.code)
        return CallTest(
            id=self.id,
            function=self.function or "",
            args=self.args,
            kwargs=self.kwargs,
            expected=self.expected,
        )

    @property
    def source(self) -> str:
        """The test as Python source, whatever its form."""
        if self.code is not None:
            return self.code
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"assert {self.function}({', '.join(parts)}) == {self.expected!r}"


class Probe(Record):
    """One step of the debugger's investigation: a tool call and what it showed."""

    thought: str
    """Why the debugger made the call (the model's words)."""
    code: str
    """The call: the snippet for ``run_snippet`` (run after the candidate was loaded), else
    the call as text, e.g. ``trace_failure(test_id='ex2')``."""
    observation: str
    """What came back (bounded to fit the model's context): a value, the printed output or
    the exception; a function's facts; a diff and the inputs where two candidates differ;
    the traced lines with the locals."""
    tool: DebugTool = "run_snippet"
    """The tool called."""
    arguments: dict[str, str] = Field(default_factory=dict)
    """Its arguments, as the model gave them."""
    seconds: float = 0.0
    """Seconds the tool took (its runs in the sandbox)."""
    prompt_tokens: int = 0
    """Prompt tokens of the model call that chose it."""
    completion_tokens: int = 0
    """Completion tokens of that call."""
    native: bool = False
    """Chosen through the provider's native tool calling (else a structured JSON reply)."""


class Diagnosis(Record):
    """The debugger's (or critic's, or a human's) account of why a candidate failed."""

    iteration: int
    """The attempt it diagnoses."""
    root_cause: str
    """What is wrong, in one or two sentences."""
    category: DiagnosisCategory = "logic"
    """What kind of fault (:data:`DiagnosisCategory`)."""
    repair_strategy: str = ""
    """What to change."""
    confidence: float = 0.5
    """0..1, the diagnoser's confidence."""
    blame: Blame = "code"
    """Whether the code or the test is wrong."""
    suspect_tests: tuple[str, ...] = ()
    """Ids of tests the diagnoser believes are wrong."""
    source: Literal["debugger", "critic", "human", "heuristic"] = "debugger"
    """Who wrote it. ``heuristic`` when the model's reply was unusable."""
    probes: tuple[Probe, ...] = ()
    """The investigation behind it (``HealConfig.debugger_steps`` > 0), oldest first."""


CandidateOrigin = Literal[
    "greedy", "sample", "patch", "rewrite", "regenerate", "human_edit", "memory", "user"
]
"""How a candidate was made: the greedy first answer, an independent ``sample``, a targeted
``patch`` of a failing candidate from its diagnosis, a ``rewrite`` from the spec with the lessons,
a ``regenerate`` (fresh sample after a low-confidence diagnosis or a repeated repair), a human's
edit, a remembered solution, or the code you gave (``heal(code=...)``, ``c0``)."""


class ProbeInput(Record):
    """An input every candidate is run on; outputs are compared, never judged alone."""

    id: str
    """Stable id: ``p1``, ``p2``, ..."""
    call: str
    """The call expression, e.g. ``f([3, 1], 2)``."""
    origin: Literal[
        "example", "mutation", "signature", "model_test", "model_input", "critic", "user"
    ]
    """Where the input came from: a spec example's call, a mutation of one, a value drawn
    from the signature's type hints, the call inside a model-written test, a call the test
    writer proposed as an input (``spec_blind_form="inputs"``), or a critic's
    counterexample."""
    added_at: int = 0
    """Round at which it was added."""


class CandidateCost(Record):
    """What one candidate cost: the model call(s) that wrote it and its sandbox runs."""

    prompt_tokens: int = 0
    """Prompt tokens of the call(s) that produced it (a retry after an unusable reply
    included)."""
    completion_tokens: int = 0
    """Completion tokens of those calls."""
    model_seconds: float = 0.0
    """Seconds those calls took (request to last token; calls made at the same time overlap)."""
    sandbox_seconds: float = 0.0
    """Seconds of its runs in the sandbox, on every test and probe input (a run shared by
    identical candidates is split between them)."""

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


class Candidate(Record):
    """One member of the population: a version of the code, how it behaves, where it stands."""

    id: str
    """Stable id: ``c1``, ``c2``, ..."""
    code: str
    """The source."""
    origin: CandidateOrigin
    """How it was made."""
    round: int
    """The round (iteration) that produced it."""
    parent: str | None = None
    """The candidate it was repaired from (``patch``), if any."""
    temperature: float = 0.0
    """Sampling temperature of the request that produced it."""
    rationale: str = ""
    """The model's explanation, if it gave one."""
    report: ExecutionReport | None = None
    """Its run on every test and probe (the latest one)."""
    behaviour: dict[str, str] = Field(default_factory=dict)
    """Probe id -> the canonical text of what it returned (or ``raise Type``)."""
    cluster: int | None = None
    """Its cluster (0 = the largest) among candidates that pass every trusted test; None when it
    fails one or did not load."""
    memory_id: str | None = None
    """For a ``memory`` candidate: the id of the remembered solution it is (``S3``, one of
    ``HealState.remembered``)."""
    cost: CandidateCost = Field(default_factory=CandidateCost)
    """What it cost: tokens and seconds of the call that wrote it, seconds in the sandbox
    (nothing for a remembered solution or a human's edit)."""


class Evidence(Record):
    """What a result's status rests on, in one record."""

    trusted_passed: int = 0
    """Trusted tests (spec examples, the user's) the chosen code passes."""
    trusted_total: int = 0
    """Trusted tests in all."""
    candidates: int = 0
    """Candidates produced and run."""
    passing: int = 0
    """Candidates that pass every trusted test."""
    clusters: tuple[int, ...] = ()
    """Sizes of the behaviour clusters among those, largest first."""
    chosen_cluster: int = 0
    """Size of the chosen code's cluster."""
    probes: int = 0
    """Probe inputs the candidates were compared on."""
    disputed: tuple[str, ...] = ()
    """Model-written tests the agreeing candidates fail (kept, shown, not blocking)."""
    failing: tuple[str, ...] = ()
    """Active tests the chosen code still fails (undisputed)."""
    oracle: int = 0
    """Spec-oracle answers used to choose between clusters."""
    summary: str = ""
    """One sentence for the CLI, the notebook and the benchmark records."""

    agreed: bool = True
    """At least ``HealConfig.agreement`` candidates share the chosen behaviour (pass every
    trusted test, alike on every probe). ``verified`` needs it."""
    majority: bool = True
    """The chosen behaviour is held by more than half of the contenders: the candidates that
    pass every trusted test and fail no credible (active, undisputed) model-written one. True
    with fewer than two contenders. ``verified`` needs it: a plurality of disagreeing samples, or
    the spec oracle's word, picks the winner but is not evidence enough."""


class Attempt(Record):
    """One version of the code and what happened when it ran: the candidate a round chose."""

    iteration: int
    """1 for the first generation, then one more per repair."""
    code: str
    """The candidate source."""
    strategy: Literal["initial", "repair", "human_edit", "critic_repair"] = "initial"
    """How it was produced."""
    rationale: str = ""
    """The model's explanation, if it gave one."""
    report: ExecutionReport | None = None
    """The sandbox's verdict, once executed."""
    candidate: str | None = None
    """The id of the candidate this attempt is (population runs)."""


class Remembered(Record):
    """Something a run recalled from the memory across runs at its start (``selfheal.memory``)."""

    id: str
    """Its id in the memory: ``L3`` a lesson, ``S2`` a verified solution (``selfheal memory
    show ID``)."""
    kind: Literal["lesson", "solution"]
    """A lesson (goes into the generator's prompts) or a verified solution (joins the first
    round as a ``memory`` candidate)."""
    text: str
    """The lesson, or the solution's code."""
    run_id: str
    """The run it was learnt in."""
    spec: str
    """The spec of that run."""
    score: float = 0.0
    """How closely that spec matches this one: 0..1, the share of their keywords in common."""


class Lesson(Record):
    """A short, reusable lesson learnt during the run."""

    text: str
    """The lesson."""
    iteration: int = 0
    """When it was (last) written."""


class Proposal(Record):
    """Code waiting for a human decision (autonomy ``review_*``)."""

    kind: Literal["initial", "repair"]
    """First version or a repair."""
    code: str
    """The proposed code."""
    previous_code: str = ""
    """The code it replaces (empty for the first version)."""
    diff: str = ""
    """Unified diff from ``previous_code`` to ``code``."""
    diagnosis: Diagnosis | None = None
    """The diagnosis the repair answers."""
    strategy: Literal["initial", "repair", "critic_repair"] = "initial"
    """How the code was produced."""
    rationale: str = ""
    """The model's explanation."""
    candidates: tuple[Candidate, ...] = ()
    """The whole round, ``code`` first: approving runs all of them; an edit replaces the first."""


class Decision(Record):
    """A human's answer to a proposal."""

    kind: Literal["approve", "edit", "reject"]
    """What was decided."""
    code: str | None = None
    """The edited code (``edit``)."""
    reason: str = ""
    """Why (``reject``, optional otherwise)."""
    iteration: int = 0
    """The iteration the proposal belonged to."""


class CriticReview(Record):
    """The critic's review of a passing candidate."""

    iteration: int
    """The attempt reviewed."""
    verdict: Verdict
    """Accept or send back."""
    concerns: tuple[str, ...] = ()
    """What the critic worries about."""
    added_tests: tuple[str, ...] = ()
    """Ids of the tests the critic added."""
    counterexample: str = ""
    """A call on which the critic says the code is wrong (run on every candidate; it counts
    only if it separates them and the spec oracle sides against the chosen one)."""


class Event(Record):
    """One entry of the timeline."""

    time: float
    """Unix time."""
    node: str
    """Node (or role) the event belongs to."""
    kind: EventKind
    """``start``/``end`` of a node, an ``llm`` call, a ``degraded`` reply, an ``error``..."""
    duration: float = 0.0
    """Seconds (for ``end`` and ``llm``)."""
    prompt_tokens: int = 0
    """Prompt tokens (``llm``, and summed on ``end``)."""
    completion_tokens: int = 0
    """Completion tokens (``llm``, and summed on ``end``)."""
    cached_tokens: int = 0
    """``llm`` events: prompt tokens the server reused from its prompt cache."""
    model: str = ""
    """Model id used."""
    iteration: int = 0
    """Iteration the event happened in."""
    detail: str = ""
    """A one-line human summary."""
    messages: tuple[Message, ...] = ()
    """``llm`` events: the exact messages sent (empty when ``HealConfig.transcripts`` is off)."""
    reply: str = ""
    """``llm`` events: the model's raw reply text (empty when transcripts are off)."""


class RoleUsage(Record):
    """Usage of one role with one model."""

    calls: int = 0
    """Model calls."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Completion tokens."""
    cached_tokens: int = 0
    """Prompt tokens the server reused from its prompt cache (not processed again)."""
    latency: float = 0.0
    """Seconds spent waiting for the model."""


class Usage(Record):
    """What the run cost."""

    calls: int = 0
    """Model calls."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Completion tokens."""
    cached_tokens: int = 0
    """Prompt tokens the server reused from its prompt cache (not processed again)."""
    latency: float = 0.0
    """Seconds spent waiting for models."""
    executions: int = 0
    """Sandbox runs."""
    by_role: dict[str, RoleUsage] = Field(default_factory=dict)
    """Per ``role@model``."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ForkInfo(Record):
    """Where a forked run came from."""

    run_id: str
    """The parent run."""
    at_iteration: int
    """The parent's iteration the fork started from."""
    changes: tuple[str, ...] = ()
    """Names of what was changed."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class HealState(Record):
    """Everything about a run at one point in time."""

    run_id: str = Field(default_factory=new_run_id)
    """Unique id; also the run log's file name."""
    spec: Spec
    """What was asked."""
    config: HealConfig = Field(default_factory=HealConfig)
    """The config it runs with."""
    status: Status = "running"
    """Where the run stands."""
    next: NodeName = "recall"
    """The node the runner executes next (``done`` when finished)."""
    step: int = 0
    """Number of nodes executed."""
    iteration: int = 0
    """Number of code versions accepted so far."""
    tests: tuple[TestCase, ...] = ()
    """Every test, in order; never silently dropped."""
    given_code: str | None = None
    """The code you gave to heal (``heal(code=...)``, ``--code FILE``, ``%selfheal``): it is
    candidate ``c0``, run before any model is asked; the result's diff is against it."""
    attempts: tuple[Attempt, ...] = ()
    """Every code version, in order."""
    candidates: tuple[Candidate, ...] = ()
    """The population: every candidate of every round, in order."""
    probes: tuple[ProbeInput, ...] = ()
    """Inputs every candidate runs on, to compare behaviour."""
    oracle: dict[str, str] = Field(default_factory=dict)
    """Spec-oracle answers: call -> the value (Python source) it says the call returns; asked
    once per input."""
    evidence: Evidence | None = None
    """What the latest selection rests on."""
    diagnoses: tuple[Diagnosis, ...] = ()
    """Every diagnosis, in order."""
    lessons: tuple[Lesson, ...] = ()
    """The rolling lessons (at most five)."""
    remembered: tuple[Remembered, ...] = ()
    """What the run recalled from the memory across runs (lessons and at most one verified
    solution), at its start."""
    reviews: tuple[CriticReview, ...] = ()
    """Every critic review."""
    decisions: tuple[Decision, ...] = ()
    """Every human decision."""
    pending: Proposal | None = None
    """Code waiting to be accepted (by the gate or a human)."""
    feedback: str = ""
    """A reviewer's rejection reason, shown to the next generation."""
    events: tuple[Event, ...] = ()
    """The timeline."""
    usage: Usage = Field(default_factory=Usage)
    """What it cost so far."""
    models: dict[str, str] = Field(default_factory=dict)
    """Role -> model id actually used."""
    started_at: float = Field(default_factory=time.time)
    """When the run started (Unix time)."""
    elapsed: float = 0.0
    """Seconds spent in nodes so far (survives reloads)."""
    error: str = ""
    """Why the run failed, when ``status == "failed"``."""
    stop_reason: str = ""
    """Why the runner stopped early (a spent token or time budget), if it did."""
    final_code: str | None = None
    """The code the run settled on (set by ``finish``)."""
    parent: ForkInfo | None = None
    """Set on forked runs."""

    # -- convenience views (pure) ----------------------------------------------------------

    @property
    def current(self) -> Attempt | None:
        """The latest attempt."""
        return self.attempts[-1] if self.attempts else None

    @property
    def active_tests(self) -> tuple[TestCase, ...]:
        """Tests that block verification (not quarantined)."""
        return tuple(t for t in self.tests if not t.quarantined)

    def test(self, test_id: str) -> TestCase | None:
        for t in self.tests:
            if t.id == test_id:
                return t
        return None

    def outcomes(self, attempt: Attempt | None = None) -> dict[str, Outcome]:
        """Test id -> outcome for an attempt (default: the latest executed one)."""
        if attempt is None:
            executed = [a for a in self.attempts if a.report is not None]
            attempt = executed[-1] if executed else None
        if attempt is None or attempt.report is None:
            return {}
        return {r.test_id: r.outcome for r in attempt.report.results}

    @property
    def finished(self) -> bool:
        return self.next == "done"
