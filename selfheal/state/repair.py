"""What a repair rests on: the debugger's diagnoses with their probes, the critic's reviews,
the lessons, what was recalled from the memory, and the proposals a human decides."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from selfheal._record import Record
from selfheal.state.candidates import Candidate

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
