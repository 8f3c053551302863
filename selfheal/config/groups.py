"""The groups of ``HealConfig``, one per part of the run that reads them, each setting
documented once in its group."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, TypeAdapter, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from selfheal._record import Record
from selfheal.kernel_sandbox.boundary import BoundaryMode
from selfheal.kernel_sandbox.types import Limits

Autonomy = Literal["full_auto", "review_repairs", "review_all"]
"""``full_auto`` never stops; ``review_repairs`` stops before running a repair;
``review_all`` also stops before running the first generated code."""

RoleName = Literal[
    "generator", "test_writer", "adversary", "debugger", "oracle", "lessons", "critic"
]
"""The roles that call a model. Per-role models use these names
(env: ``SELFHEAL_MODEL_GENERATOR``, ``SELFHEAL_MODEL_TEST_WRITER``, ...)."""

ROLES: tuple[RoleName, ...] = get_args(RoleName)
"""Every role name, in the order above."""

HeadlessPolicy = Literal["error", "approve", "reject"]

Form = Literal["instruct", "complete", "script"]
"""A prompt form of the generator: ``instruct`` (write this function), ``complete`` (continue
the spec's own header, prefilled as the start of the reply) or ``script`` (EvalPlus's instruct
prompt: a self-contained script for the problem, the reply prefilled with its response prefix
and an opened python block; docs/loop.md)."""

FORMS: dict[str, tuple[Form, ...]] = {
    "instruct": ("instruct",),
    "complete": ("complete",),
    "script": ("script",),
    "both": ("complete", "instruct"),
}
"""``first_answer`` -> the forms its first round takes turns across, the lead's first."""


class Reads:
    """Field metadata: the nodes whose work the field can change while they run
    (``graph.branch.READ_BY``). ``Reads()``: routes alone read it (``branch_point`` asks them
    again), or nothing during a run does; ``Reads(EVERY)``: every node. A field without it
    reads as its group's ``reads``."""

    def __init__(self, *nodes: str) -> None:
        self.nodes = nodes


class Flag:
    """Field metadata: the command-line flag of a field that is not ``--field-name``;
    ``Flag(None)``: none (the CLI sets it another way)."""

    def __init__(self, name: str | None) -> None:
        self.name = name


EVERY = "*"
"""In ``Reads``: every node (the model, its limits, the sandbox's limits, the selection)."""


class Group(Record):
    """A part of ``HealConfig``: the settings one part of the run reads."""

    reads: ClassVar[tuple[str, ...]] = ()
    """The nodes that read a field of this group that has no ``Reads`` of its own."""


class Generation(Group):
    """The first round: how many candidates, how they are asked and sampled."""

    reads = ("generate",)

    candidates: Annotated[int | Literal["auto"], Reads("generate", "repair")] = "auto"
    """Independent candidates in the first round (1 to 16): the greedy answer plus
    ``candidates - 1`` sampled at ``sample_temperature``, requested concurrently. ``auto``: as
    many as the generator's backend decodes at once, at least 4 and at most 16
    (:func:`population_size`); the run records the number chosen in its config."""
    first_sample: int = Field(default=2, ge=1, le=16)
    """Candidates asked for first, the greedy one and confirming samples. When the greedy one
    passes every trusted test and they all agree on every probe, the round stops there,
    otherwise it tops up to ``candidates``. Set it to ``candidates`` to always ask for all. Left
    unset, a backend whose batch costs about one answer (``batch_free``: transformers on a GPU)
    asks for all (docs/gpu.md)."""
    top_up: Annotated[Literal["to_agree", "when_failing"], Reads()] = "to_agree"
    """When the first round asks for the rest of its ``candidates`` after the first
    ``first_sample``: ``to_agree`` also when the greedy answer passes every trusted test but
    the first answers disagree (or there is no trusted test), to find a majority that can
    verify it; ``when_failing`` only when no candidate passes every trusted test (faster; a
    passing greedy answer the first sample does not confirm is then unverified)."""
    sample_temperature: Annotated[float, Reads("generate", "repair")] = Field(
        default=0.8, ge=0.0, le=2.0
    )
    """Temperature of the sampled candidates and of fresh samples in repair rounds."""
    population_forms: tuple[Form, ...] = Field(default=(), max_length=16)
    """The prompt forms the first round's samples take turns across (comma-separated on the
    command line: ``complete,instruct``). The round's n-th answer, its greedy answers counted,
    is asked in the n-th form, the list repeated as long as needed, and a top-up goes on where
    the round stopped. Empty: the forms of ``first_answer`` (docs/loop.md, "A population
    drawn across forms")."""
    population_temperatures: tuple[Annotated[float, Field(ge=0.0, le=2.0)], ...] = Field(
        default=(), max_length=16
    )
    """The temperatures the first round's samples take turns across, counted as the forms are
    (comma-separated on the command line: ``0.6,1.0``). A value repeated crosses them with the
    forms: ``0.6,0.6,1.0,1.0`` with two forms asks each form at each temperature. Empty:
    ``sample_temperature`` alone."""
    seed: Annotated[int | None, Reads("generate", "repair")] = Field(default=None, ge=0)
    """Base of the sampled candidates' seeds, where the backend takes one (none: random). Each
    request's seed is derived from it and the request's place in the run, so two configurations
    can be compared on the same samples."""
    first_answer: Literal["instruct", "complete", "script", "both"] = "both"
    """How the first round asks the model (the prompt form; docs/loop.md): ``instruct`` (the
    spec, then "write this function"); ``complete``: the model completes the spec's own header,
    prefilled as the start of its reply (a reply that does not complete it is asked again as a
    sampled repair of it); ``script``: EvalPlus's instruct prompt, the reply prefilled with its
    response prefix; ``both``: the greedy answer completing, then instructed, and the samples
    take turns across the two."""

    @field_validator("population_forms", "population_temperatures", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """``"complete,instruct"`` (a command-line option, a ``name=value`` word) is the
        tuple ``("complete", "instruct")``."""
        if isinstance(value, str):
            return tuple(item.strip() for item in value.split(",") if item.strip())
        return value

    @field_validator("candidates", mode="before")
    @classmethod
    def _count_or_auto(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            return _CANDIDATES.validate_python(value)
        except ValidationError as exc:  # the count's own error, not one per union member
            err = exc.errors()[0]
            raise PydanticCustomError(err["type"], err["msg"], err.get("ctx")) from None


class Tests(Group):
    """The tests and probe inputs the candidates are judged by."""

    __test__ = False  # not a pytest class
    reads = ("generate",)

    example_tests: Annotated[bool, Flag("--examples"), Reads("plan_tests", "generate")] = True
    """Turn the examples written in the spec into trusted tests."""
    run_tests: Annotated[bool, Reads("plan_tests")] = True
    """Execute the candidate against the tests. Off (with no tests) is the single-shot baseline."""
    spec_blind_tests: Annotated[bool | Literal["auto"], Flag("--spec-tests")] = "auto"
    """Ask the test writer for tests from the spec alone, at the same time as the first
    candidates: their calls become probe inputs, their expected values untrusted claims.
    ``auto`` asks only when the spec gives no trusted test or fewer than 4 probe inputs."""
    spec_blind_form: Literal["tests", "inputs"] = "tests"
    """What the spec-blind test writer writes: ``tests`` (asserts, whose expected values are
    untrusted claims) or ``inputs`` (calls alone, each a probe input: a shorter reply). A spec
    whose function has no name yet always gets ``tests`` (the test writer names it)."""
    max_spec_tests: int = Field(default=4, ge=0, le=30)
    """Most spec-blind tests to keep."""
    probes: Annotated[bool, Reads("plan_tests", "execute")] = True
    """Run every candidate on probe inputs (mutations of the examples, values from the
    signature, the calls in model-written tests) and compare their outputs."""
    max_probes: Annotated[int, Reads("plan_tests", "execute")] = Field(default=12, ge=0, le=100)
    """Most probe inputs."""
    adversarial_tests: Annotated[bool, Flag("--adversarial"), Reads()] = False
    """Ask the adversarial QA role for edge-case tests against the first candidate."""
    max_adversarial_tests: Annotated[int, Reads("adversarial")] = Field(default=3, ge=0, le=30)
    """Most adversarial tests to keep."""


class Selection(Group):
    """How the answer is chosen among the candidates, and who may question it."""

    agreement: Annotated[int, Reads(EVERY)] = Field(default=2, ge=1, le=16)
    """Candidates that must pass every trusted test and behave alike on every probe for the
    status ``verified`` (docs/loop.md); 1 accepts a lone candidate. A remembered solution
    (``memory``) counts twice."""
    oracle_calls: Annotated[int, Reads("consult", "diagnose")] = Field(default=3, ge=0, le=20)
    """Most spec-oracle questions per run, asked for inputs where passing clusters disagree
    (and for failing model-written equality tests of a lone candidate)."""
    critic: bool = False
    """Review the chosen code and ask for a counterexample. The critic must name an input,
    which counts only if it separates the candidates and the spec oracle sides against the
    chosen one (an opinion alone is kept as advice)."""
    critic_rounds: int = Field(default=1, ge=0, le=5)
    """How many times the critic may send a passing candidate back."""
    max_critic_tests: Annotated[int, Reads("critic")] = Field(default=3, ge=0, le=30)
    """Most tests the critic may add."""


class Repairs(Group):
    """The repair rounds after the first: how many, how wide, how the failures are diagnosed."""

    max_iterations: int = Field(default=2, ge=1, le=50)
    """Most rounds, the first population included. Each repair round counts as one more."""
    repair: bool = True
    """Repair failing candidates in further rounds. Off means one generation only."""
    repair_width: Annotated[int, Reads("repair")] = Field(default=3, ge=1, le=16)
    """Candidates each repair round asks for at once: a targeted patch of the best failing
    candidate, then (when wider) a patch of the next distinct one and fresh rewrites."""
    diagnosis: Annotated[bool, Reads("diagnose", "repair")] = True
    """Ask the debugger for a diagnosis (root cause, category, strategy) before a repair round.
    Off: the round patches the failing candidates from their failing tests alone
    (self-debugging), with fresh rewrites beside them; failing model-written tests are still
    judged against the spec oracle first."""
    debugger_steps: Annotated[int, Reads("diagnose")] = Field(default=0, ge=0, le=10)
    """Tool calls the debugger may make before it diagnoses (``run_snippet``,
    ``inspect_function``, ``diff_candidates``, ``trace_failure``, all run through the kernel
    sandbox). 0 means one structured diagnosis from the failing tests alone (docs/loop.md)."""
    debugger_tool_calls: Annotated[Literal["native", "structured"], Reads("diagnose")] = "native"
    """How the debugger calls its tools: ``native`` through the provider's own tool calling
    where it has one and a structured JSON reply otherwise; ``structured`` always the JSON
    reply."""
    lessons: bool = False
    """Keep lessons from failures and show them to the repairer: a rolling list of at most
    five, one more model call before every repair round (off by default: docs/results.md)."""


class Calls(Group):
    """Every model call: which model, its sampling and length, what is kept of it."""

    reads = (EVERY,)

    model: Annotated[str | None, Flag(None)] = None
    """Default model string (``local``, ``mock``, ``ollama:NAME``, ``anthropic:NAME``,
    ``hf:NAME``, ``auto``). None means the ``provider`` argument or ``auto``."""
    models: Annotated[dict[str, str], Flag(None)] = Field(default_factory=dict)
    """Per-role model strings, e.g. ``{"debugger": "anthropic:claude-sonnet-4-5"}``."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of the greedy candidate and of every other role."""
    max_tokens: int = Field(default=1024, ge=16)
    """Most tokens one model reply may have."""
    transcripts: bool = True
    """Keep every model call's messages and raw reply on its timeline event (run log,
    result, notebook row detail, benchmark records). Off keeps only tokens and timings."""


class SandboxLimits(Limits, Group):
    """The kernel sandbox's limits (``kernel_sandbox.Limits``) and its boundary."""

    reads = (EVERY,)

    sandbox: BoundaryMode | None = None
    """The boundary the operating system enforces around candidates (docs/sandbox.md); none:
    ``$SELFHEAL_SANDBOX``, else ``auto``. Applies to the shared pool, not to an ``executor``
    passed in."""


class Budgets(Group):
    """Limits on the whole run, checked by the runner (and before it starts)."""

    token_budget: int | None = Field(default=None, ge=1)
    """Stop once this many tokens (prompt + completion) are spent: status ``exhausted``."""
    time_budget: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stop after this many seconds: status ``exhausted``."""
    max_spec_chars: int = Field(default=20_000, ge=100)
    """Longest spec accepted, in characters: a longer one is refused before the run starts."""


class Storage(Group):
    """Where the run is written down, and what it remembers across runs."""

    reads = ("recall", "finish")

    runs_dir: Annotated[str | None, Reads()] = None
    """Where run logs go; default ``$SELFHEAL_RUNS_DIR`` or ``~/.local/state/selfheal/runs``."""
    memory: bool = True
    """Recall lessons and verified solutions from earlier runs, and remember this one
    (``selfheal.memory``; docs/memory.md)."""
    memory_path: str | None = None
    """The memory's SQLite file; default ``$SELFHEAL_MEMORY``, else ``memory.sqlite3`` beside the
    run logs in the runs directory (so a runs directory and its memory go together)."""


class Approval(Group):
    """Whether a human approves code before it runs, and answers questions."""

    reads = (EVERY,)

    autonomy: Annotated[Autonomy, Reads("gate")] = "full_auto"
    """Who approves code before it runs: nobody (``full_auto``), you for each repair
    (``review_repairs``), you for every version (``review_all``); on a terminal you are asked,
    otherwise the run waits for ``selfheal runs resume ID --approve``."""
    on_headless: HeadlessPolicy = "error"
    """What an approval does when nothing can answer it (nbclient, papermill, CI):
    ``error`` raises ``ApprovalRequired``; ``approve``/``reject`` decide automatically."""
    ask_limit: Annotated[int, Reads()] = Field(default=3, ge=0, le=20)
    """Most questions a run may ask you when the evidence runs out (candidates that pass every
    trusted test disagree on an input, or every candidate fails the model's tests and there is
    no trusted test; docs/loop.md, "Asking you"); 0 never asks. Asked only where someone can
    answer (an ``asker``: the notebook's live view, the CLI on a terminal) and never under
    ``autonomy="full_auto"``."""


_CANDIDATES: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=1, le=16)])
