"""``TaskRecord``: one line of ``results.jsonl``, everything needed to study one (task, mode)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from evaluation.honesty import HonestyReport
from evaluation.scoring import ReferenceVerdict
from selfheal.records import Record
from selfheal.state.timeline import Tokens

__all__ = ["AttemptRecord", "PairInfo", "TaskRecord", "TestRecord"]

_FLAT = {
    "llm_calls": "calls",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "cached_tokens": "cached_tokens",
}
"""A record's counts as they were written before ``usage`` held them."""


class TestRecord(Record):
    """One test the agent used, with where it came from and how the final code did."""

    __test__ = False  # not a pytest class

    id: str
    """The agent's test id."""
    origin: str
    """``spec_blind``, ``adversarial``, ``example``, ``user`` or ``critic``."""
    trusted: bool
    """Whether the agent treated it as ground truth."""
    code: str
    """The test's source."""
    outcome: str | None = None
    """Outcome on the last execution (None if it never ran)."""


class AttemptRecord(Record):
    """One version of the code the agent produced."""

    iteration: int
    """1 for the first generation."""
    strategy: str
    """``initial``, ``repair``, ``critic_repair`` or ``human_edit``."""
    code: str
    """The code of this attempt."""
    own_tests_passed: bool | None = None
    """Whether it passed the agent's own tests (None if it was never executed)."""


class PairInfo(Record):
    """How a paired mode's record relates to its base mode's run of the same task
    (``--paired``, ``evaluation.paired``)."""

    base: str
    """The base mode (``heal``)."""
    base_run_id: str
    """The base mode's run this record continued."""
    diverged: bool
    """Whether the mode's config ever made the run go another way; False: it would have done
    exactly what the base run did, and the record repeats the base's result."""
    at_node: str = ""
    """The node the branch went on with (``critic``, ``diagnose`` ...); empty when it never
    diverged."""
    at_step: int = 0
    """The base run's step the branch started from."""
    shared_seconds: float = 0.0
    """Seconds of the base run before the branch (counted in ``wall_time``)."""
    shared_calls: int = 0
    """Model calls of the base run before the branch (counted in ``usage.calls``)."""


class TaskRecord(Record):
    """The result of running one task in one mode."""

    suite: str
    """Suite name."""
    task_id: str
    """Task id."""
    category: str
    """Task category."""
    mode: str
    """Benchmark mode (see ``evaluation.modes``); a pass of a mode run several times is
    ``MODE:N`` (``heal-memory:2``)."""
    model: str
    """``provider:model`` that served the run."""
    passed: bool
    """Reference verdict on the final code (pass@1)."""
    first_attempt_passed: bool
    """Reference verdict on the first attempt's code."""
    verified: bool
    """What the agent reported (``HealResult.verified``)."""
    status: str
    """The agent's final status, or ``harness_error`` when the run raised."""
    iterations: int = 0
    """Code versions the agent produced."""
    usage: Tokens = Field(default_factory=Tokens)
    """The model calls and their tokens, over all calls."""
    wall_time: float = 0.0
    """Seconds the agent ran (scoring excluded)."""
    score_time: float = 0.0
    """Seconds the reference scoring took."""
    code: str | None = None
    """The final code."""
    verdict: ReferenceVerdict
    """Reference verdict on the final code, with the failing assertion."""
    first_verdict: ReferenceVerdict | None = None
    """Reference verdict on the first attempt (None if there was no attempt)."""
    attempts: tuple[AttemptRecord, ...] = ()
    """Every version of the code."""
    tests: tuple[TestRecord, ...] = ()
    """Every test the agent used, with its origin and outcome."""
    diagnoses: tuple[dict[str, Any], ...] = ()
    """The agent's diagnoses, as dicts."""
    lessons: tuple[str, ...] = ()
    """Lessons the agent wrote."""
    timeline: tuple[dict[str, Any], ...] = ()
    """The agent's timeline events, as dicts."""
    evidence: dict[str, Any] | None = None
    """What the agent's status rested on (``HealResult.evidence``: trusted tests, candidates,
    clusters, probes, disputed tests, one-line summary)."""
    candidates: tuple[dict[str, Any], ...] = ()
    """The population: each candidate's origin, round, parent, cluster, test outcomes, probe
    outputs, code and cost (tokens, model seconds, sandbox seconds: ``CandidateCost``)."""
    remembered: tuple[dict[str, Any], ...] = ()
    """What the run recalled from the memory across runs (``heal-memory`` only): lessons and
    a verified solution, each with the run it was learnt in."""
    honesty: HonestyReport | None = None
    """Check that no reference assertion was sent to the model."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The ``HealConfig`` the run used."""
    run_id: str = ""
    """The agent's run id (its run log can be reloaded)."""
    error: str = ""
    """``Type: message`` when the agent raised instead of returning a result."""
    finished_at: float = 0.0
    """Unix time the record was written."""
    worker: str = ""
    """The cluster worker that ran the pair (its address); empty when it ran in the
    benchmark's own process."""
    paired: PairInfo | None = None
    """With ``--paired``: the base run this record continued (None: a run of its own)."""
    asked: int = 0
    """Questions the agent asked (a ``+askN`` mode's simulated user answers them)."""
    answered: int = 0
    """Questions whose answer became a trusted test (not skipped)."""
    questions: tuple[dict[str, Any], ...] = ()
    """Each question: the input, the competing outputs, the answer and the test it made."""

    @model_validator(mode="before")
    @classmethod
    def _flat_usage(cls, data: Any) -> Any:
        """A record written before ``usage`` held its counts flat (``llm_calls``, ...)."""
        if not isinstance(data, dict) or not _FLAT.keys() & data.keys():
            return data
        usage = {new: data[old] for old, new in _FLAT.items() if old in data}
        return {**{k: v for k, v in data.items() if k not in _FLAT}, "usage": usage}

    @property
    def key(self) -> tuple[str, str]:
        """(task_id, mode): the unit of resumption."""
        return (self.task_id, self.mode)

    @property
    def healed(self) -> bool:
        """The first attempt failed the reference tests, the final code passes."""
        return self.passed and not self.first_attempt_passed

    @property
    def false_success(self) -> bool:
        """The agent said verified, the reference tests fail."""
        return self.verified and not self.passed

    @property
    def leaked(self) -> bool:
        """A reference assertion reached the model during the run (``honesty.leaks``)."""
        return bool(self.honesty and self.honesty.leaks)

    @property
    def credited(self) -> bool:
        """The run counts as passed: the reference tests pass and none of them leaked to the
        model. A leaky run that passes proves nothing, so the metrics do not count it."""
        return self.passed and not self.leaked

    @property
    def false_failure(self) -> bool:
        """The agent tested its code and gave up (``failed``/``exhausted``), yet the
        reference tests pass. ``unverified`` (single shot: nothing was claimed) is not one."""
        return self.status in ("failed", "exhausted") and self.passed

    @property
    def disputed(self) -> bool:
        """The agent gave up although its final code passes every trusted test (at least
        one) and only model-written tests fail: code and the model's own tests disagree,
        and no trusted evidence settles it. Judged on the agent's own tests, not the
        reference."""
        if self.status not in ("failed", "exhausted"):
            return False
        trusted = [t for t in self.tests if t.trusted and t.outcome is not None]
        failing = [t for t in self.tests if t.outcome not in (None, "passed")]
        return (
            bool(trusted)
            and all(t.outcome == "passed" for t in trusted)
            and bool(failing)
            and not any(t.trusted for t in failing)
        )
