"""The immutable state of a heal run (nodes return ``state.model_copy(update=...)``; every state
is appended to the run log) and the records inside it, by concept (docs/architecture.md)."""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import Field

from selfheal._record import Record
from selfheal.config import HealConfig
from selfheal.kernel_sandbox.types import Outcome
from selfheal.state.candidates import Attempt, Candidate, Evidence
from selfheal.state.cases import ProbeInput, Spec, TestCase
from selfheal.state.questions import Answer as Answer
from selfheal.state.questions import Asked
from selfheal.state.questions import Choice as Choice
from selfheal.state.questions import Question as Question
from selfheal.state.repair import CriticReview, Decision, Diagnosis, Lesson, Proposal, Remembered
from selfheal.state.timeline import Event, Usage

Status = Literal["running", "awaiting_approval", "verified", "failed", "exhausted", "unverified"]
"""``verified``: every active test passed (and the critic accepted); ``failed``: the run could
not go on (an error is recorded); ``exhausted``: the iteration, token or time budget ran out
with tests still failing; ``unverified``: code was produced but no test ran (single shot)."""

NodeName = Literal[
    "recall",
    "plan_tests",
    "generate",
    "gate",
    "adversarial",
    "execute",
    "select",
    "consult",
    "ask",
    "critic",
    "diagnose",
    "lessons",
    "repair",
    "finish",
    "done",
]


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
    questions: tuple[Asked, ...] = ()
    """Every question asked of you (docs/loop.md, "Asking you"), with its answer."""
    can_ask: bool = False
    """Someone can answer questions in this run (an ``asker`` was given: ``heal(asker=...)``,
    the notebook's live view, the CLI on a terminal); set each time the run starts or is
    reopened, from the asker it is given then."""
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

    @property
    def current(self) -> Attempt | None:
        """The latest attempt."""
        return self.attempts[-1] if self.attempts else None

    def attempt(self, iteration: int) -> Attempt | None:
        """The attempt of ``iteration`` (None if there is none)."""
        return next((a for a in self.attempts if a.iteration == iteration), None)

    @property
    def active_tests(self) -> tuple[TestCase, ...]:
        """Tests that block verification (not quarantined)."""
        return tuple(t for t in self.tests if not t.quarantined)

    def test(self, test_id: str) -> TestCase | None:
        """The test ``test_id`` (None if there is none)."""
        return next((t for t in self.tests if t.id == test_id), None)

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
