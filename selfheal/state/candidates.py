"""The population: each candidate with its cost and behaviour, the attempts a round chose,
and the evidence a selection rests on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from selfheal._record import Record
from selfheal.config.groups import Form
from selfheal.kernel_sandbox.types import ExecutionReport

CandidateOrigin = Literal[
    "greedy", "sample", "patch", "rewrite", "regenerate", "human_edit", "memory", "user"
]
"""How a candidate was made: the greedy first answer, an independent ``sample``, a targeted
``patch`` of a failing candidate from its diagnosis, a ``rewrite`` from the spec with the lessons,
a ``regenerate`` (fresh sample after a low-confidence diagnosis or a repeated repair), a human's
edit, a remembered solution, or the code you gave (``heal(code=...)``, ``c0``)."""


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
    form: Form | None = None
    """The prompt form of the request that produced it: ``complete`` (the model continued the
    spec's header, prefilled) or ``instruct`` (a chat request for the function; a patch's
    too); None for code no model was asked for (yours, a human's edit, a remembered
    solution)."""
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
    smoke: tuple[str, ...] = ()
    """Trusted tests that check no value (smoke tests): they must pass; ``verified`` needs a
    trusted test besides them."""
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


def numbered(candidates: tuple[Candidate, ...] | list[Candidate]) -> int:
    """How many candidates ids have been given to: your code is ``c0``, so the model's (and a
    remembered solution's, a human's edit) count from ``c1`` after the ones before."""
    return sum(1 for c in candidates if c.origin != "user")


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
