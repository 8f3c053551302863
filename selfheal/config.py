"""``HealConfig``: every knob of one heal run, frozen and recorded with its result."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from selfheal._record import Record
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox.boundary import BoundaryMode

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

Form = Literal["instruct", "complete"]
"""A prompt form of the generator: ``instruct`` (write this function) or ``complete`` (continue
the spec's own header, prefilled as the start of the reply)."""

FORMS: Mapping[str, tuple[Form, ...]] = {
    "instruct": ("instruct",),
    "complete": ("complete",),
    "both": ("complete", "instruct"),
}
"""``HealConfig.first_answer`` -> the forms its first round takes turns across, the lead's first."""


class HealConfig(Record):
    """How a heal run behaves. Every result records the config it ran with."""

    max_iterations: int = Field(default=2, ge=1, le=50)
    """Most rounds: the first population counts as one, each repair round as one more."""
    candidates: int | Literal["auto"] = "auto"
    """Independent candidates in the first round (1 to 16): the greedy answer plus
    ``candidates - 1`` sampled at ``sample_temperature``, requested concurrently. ``auto``: as
    many as the generator's backend decodes at once (its ``batch_hint``: llama-server's slots,
    a GPU batch), at least 4 and at most 16 (:func:`population_size`); the run records the
    number chosen in its config."""
    first_sample: int = Field(default=2, ge=1, le=16)
    """Spend where it pays: the first round asks for this many candidates first; when the greedy
    one passes every trusted test and they all agree on every probe, the round stops there,
    otherwise it tops up to ``candidates``. Set it to ``candidates`` to always ask for all."""
    top_up: Literal["to_agree", "when_failing"] = "to_agree"
    """When the first round asks for the rest of its ``candidates`` after the first
    ``first_sample``: ``to_agree`` also when the greedy answer passes every trusted test but the
    first answers disagree (or there is no trusted test), to find a majority that can verify it;
    ``when_failing`` only when no candidate passes every trusted test, as plain sampling does
    (faster; a passing greedy answer the first sample does not confirm is then unverified)."""
    sample_temperature: float = Field(default=0.8, ge=0.0, le=2.0)
    """Temperature of the sampled candidates and of fresh samples in repair rounds."""
    seed: int | None = Field(default=None, ge=0)
    """Base of the sampled candidates' seeds (each request's seed is derived from it and the
    request's place in the run), where the backend takes one (llama-server, OpenAI-compatible
    servers, Ollama): the same seed, spec and model ask the same questions with the same seeds,
    so two configurations can be compared on the same samples. None: random seeds. The
    benchmark derives one from each task's id."""
    first_answer: Literal["instruct", "complete", "both"] = "instruct"
    """How the first round asks the model (the prompt form; docs/loop.md): ``instruct`` (the
    spec, then "write this function"); ``complete``: the model completes the spec's own header
    (the ``def`` line and docstring when the spec is code, ``def name(`` when it is prose),
    prefilled as the start of its reply, and a reply that does not complete it is asked again as
    ``instruct``; ``both``: the greedy answer in each form (completing first: it is the lead and
    the single shot), and the samples take turns across the two. Measured with the local 1.5B
    on HumanEval-164, greedy, outside selfheal: 117 passed completing against 106 instructed,
    with half the tokens, and the two answers together 124: the forms fail differently, so the
    second greedy answer is a cheap, deterministic second opinion. The default stays
    ``instruct`` until the benchmark of issue 32 (``heal-both`` against ``heal-r4``) decides."""
    repair_width: int = Field(default=3, ge=1, le=16)
    """Candidates each repair round asks for at once: a targeted patch of the best failing
    candidate, then (when wider) a patch of the next distinct one and fresh rewrites."""
    probes: bool = True
    """Run every candidate on probe inputs (mutations of the examples, values from the
    signature, the calls in model-written tests) and compare their outputs."""
    max_probes: int = Field(default=12, ge=0, le=100)
    """Most probe inputs."""
    agreement: int = Field(default=2, ge=1, le=16)
    """Candidates that must pass every trusted test and behave alike on every probe for the
    status ``verified``. A lone candidate that passes the spec's examples is the best there is,
    not evidence: on HumanEval with the local model, 3 of the 17 lone winners the first 164-task
    run called verified failed the reference tests. A remembered solution (``memory``; it was
    verified in an earlier run) counts twice. 1 accepts a lone candidate."""
    oracle_calls: int = Field(default=3, ge=0, le=20)
    """Most spec-oracle questions per run, asked for inputs where passing clusters disagree
    (and for failing model-written equality tests of a lone candidate)."""
    token_budget: int | None = Field(default=None, ge=1)
    """Stop (status ``exhausted``) once prompt + completion tokens exceed this."""
    time_budget: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stop (status ``exhausted``) once the run has taken this many seconds."""
    autonomy: Autonomy = "full_auto"
    """Whether a human approves repairs (and the first version) before they run."""
    on_headless: HeadlessPolicy = "error"
    """What an approval does when nothing can answer it (nbclient, papermill, CI):
    ``error`` raises ``ApprovalRequired``; ``approve``/``reject`` decide automatically."""
    example_tests: bool = True
    """Turn the examples written in the spec into trusted tests."""
    spec_blind_tests: bool | Literal["auto"] = "auto"
    """Ask the test writer for tests from the spec alone, at the same time as the first
    candidates: their calls become probe inputs, their expected values untrusted claims.
    ``auto`` asks only when the spec gives no trusted test or too few probe inputs (fewer than
    4): with examples, mutations of them are the probes, and the test writer's longer reply
    would be the slowest request of the first round."""
    spec_blind_form: Literal["tests", "inputs"] = "tests"
    """What the spec-blind test writer writes: ``tests``, asserts with expected values
    (untrusted claims; their calls become probe inputs too), or ``inputs``, calls alone, each a
    probe input: no guessed value to dispute and a shorter reply (it is asked at the same time
    as the first candidates, and the round waits for it). A spec whose function has no name
    yet always gets ``tests`` (the test writer names it)."""
    adversarial_tests: bool = False
    """Ask the adversarial QA role for edge cases against the first candidate."""
    critic: bool = False
    """Ask the critic to review the chosen candidate; it must name a counterexample input,
    which counts only if it separates the candidates and the spec oracle sides against the
    chosen one (an opinion alone is kept as advice)."""
    lessons: bool = False
    """Keep a rolling list of at most five lessons and show them to the repairer (one more
    model call before every repair round; off by default: HumanEval runs showed no repair it
    made possible, and it costs a sequential call per round)."""
    repair: bool = True
    """Repair failing candidates. Off means one generation only."""
    run_tests: bool = True
    """Execute the candidate against the tests. Off (with no tests) is the single-shot baseline."""
    max_spec_tests: int = Field(default=4, ge=0, le=30)
    """Most spec-blind tests to keep."""
    max_adversarial_tests: int = Field(default=3, ge=0, le=30)
    """Most adversarial tests to keep."""
    max_critic_tests: int = Field(default=3, ge=0, le=30)
    """Most tests the critic may add."""
    diagnosis: bool = True
    """Ask the debugger for a structured diagnosis (root cause, category, strategy) before a
    repair round. Off: the round patches the failing candidates from their failing tests
    alone (self-debugging), with fresh rewrites beside them; failing model-written tests are
    still judged against the spec oracle first."""
    debugger_steps: int = Field(default=0, ge=0, le=10)
    """Tool calls of the debugger's investigation before it diagnoses (think, call a tool,
    read what it shows): ``run_snippet``, ``inspect_function``, ``diff_candidates``,
    ``trace_failure``, all run through the kernel sandbox. 0 (the default) means one
    structured diagnosis from the failing tests alone: with the local 1.5B model, 3 steps
    gained one problem in 18 diagnosed at four times the diagnosis time (docs/loop.md)."""
    debugger_tool_calls: Literal["native", "structured"] = "native"
    """How the debugger calls its tools: ``native`` through the provider's own tool calling
    where it has one (OpenAI-compatible servers, the local llama-server, Anthropic) and a
    structured JSON reply otherwise; ``structured`` always the JSON reply."""
    critic_rounds: int = Field(default=1, ge=0, le=5)
    """How many times the critic may send a passing candidate back."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of the greedy candidate and of every other role."""
    max_tokens: int = Field(default=1024, ge=16)
    """Most tokens one model reply may have."""
    model: str | None = None
    """Default model string (``local``, ``mock``, ``ollama:NAME``, ``anthropic:NAME``,
    ``hf:NAME``, ``auto``). None means the ``provider`` argument or ``auto``."""
    models: dict[str, str] = Field(default_factory=dict)
    """Per-role model strings, e.g. ``{"debugger": "anthropic:claude-sonnet-4-5"}``."""
    test_timeout: float = Field(default=5.0, gt=0, le=600, allow_inf_nan=False)
    """Seconds one test may run in the sandbox."""
    run_timeout: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    """Seconds one execution of all tests may take."""
    memory_mb: int = Field(default=2048, ge=64)
    """Memory limit of the sandbox kernel, in MiB."""
    sandbox: BoundaryMode | None = None
    """The boundary the operating system enforces around candidates (docs/sandbox.md):
    ``strict`` (Landlock, or no run), ``auto`` (Landlock, else a weaker fallback that the
    evidence names), ``fallback``, ``off`` (the audit hook alone). None:
    ``$SELFHEAL_SANDBOX``, else ``auto``. Applies to the shared pool, not to an
    ``executor`` passed in."""
    transcripts: bool = True
    """Keep every model call's messages and raw reply on its timeline event (run log,
    result, notebook row detail, benchmark records). Off keeps only tokens and timings."""
    runs_dir: str | None = None
    """Where run logs go; default ``$SELFHEAL_RUNS_DIR`` or ``~/.local/state/selfheal/runs``."""
    memory: bool = True
    """Remember across runs (``selfheal.memory``): at the start, a few lessons learnt on similar
    specs go into the generator's prompts and a verified solution of a very similar spec joins
    the first round as one more candidate (it must pass this spec's trusted tests like any
    other); at the end, the run's lessons and, when verified, its solution are written down."""
    memory_path: str | None = None
    """The memory's SQLite file; default ``$SELFHEAL_MEMORY``, else ``memory.sqlite3`` beside the
    run logs in the runs directory (so a runs directory and its memory go together)."""
    max_spec_chars: int = Field(default=20_000, ge=100)
    """Longest spec accepted, in characters (about 5,700 tokens): the spec goes into every
    model call and every checkpoint, so a longer one is refused before the run starts."""

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

    @model_validator(mode="wrap")
    @classmethod
    def _clear_errors(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """A bad value is a ``ConfigError`` that names the option and what it must be, not a
        pydantic traceback. ``context={"names": {field: "--flag"}}`` names options the way
        the caller spells them (the CLI's flags)."""
        try:
            return handler(data)
        except ValidationError as exc:
            names = (info.context or {}).get("names", {})
            raise ConfigError(config_problems(exc, names)) from None

    @classmethod
    def single_shot(cls, **changes: object) -> HealConfig:
        """One generation, no tests, no repair: the baseline the harness compares against."""
        base: dict[str, object] = {
            "max_iterations": 1,
            "candidates": 1,
            "first_sample": 1,
            "probes": False,
            "example_tests": False,
            "spec_blind_tests": False,
            "adversarial_tests": False,
            "critic": False,
            "lessons": False,
            "repair": False,
            "run_tests": False,
        }
        base.update(changes)
        return cls.model_validate(base)


_CANDIDATES: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=1, le=16)])

AUTO_CANDIDATES = 4
"""The population of ``candidates="auto"`` when the backend says it decodes fewer at once (or
nothing): the samples then wait their turn, but fewer candidates would verify less."""


def population_size(batch_hint: int | None) -> int:
    """``candidates="auto"`` for a backend that decodes ``batch_hint`` answers at once: that
    many, at least :data:`AUTO_CANDIDATES` and at most 16."""
    return min(16, max(AUTO_CANDIDATES, batch_hint or AUTO_CANDIDATES))


def candidates_of(config: HealConfig) -> int:
    """``config.candidates`` as a number (``auto`` before a run resolved it:
    :data:`AUTO_CANDIDATES`)."""
    return config.candidates if isinstance(config.candidates, int) else AUTO_CANDIDATES


def default_runs_dir() -> Path:
    """``$SELFHEAL_RUNS_DIR``, else ``$XDG_STATE_HOME/selfheal/runs``, else ``~/.local/state/selfheal/runs``."""
    env = os.environ.get("SELFHEAL_RUNS_DIR")
    if env:
        return Path(env).expanduser()
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "selfheal" / "runs"


def runs_dir_for(configured: str | None) -> Path:
    """The runs directory of a config's ``runs_dir`` (None: the default)."""
    return Path(configured).expanduser() if configured else default_runs_dir()


def memory_path_for(config: HealConfig) -> Path:
    """Where ``config``'s memory lives: ``memory_path``, else ``$SELFHEAL_MEMORY``, else
    ``memory.sqlite3`` beside the run logs in its runs directory."""
    if config.memory_path:
        return Path(config.memory_path).expanduser()
    env = os.environ.get("SELFHEAL_MEMORY")
    if env:
        return Path(env).expanduser()
    return runs_dir_for(config.runs_dir) / "memory.sqlite3"


def _requirement(err: Mapping[str, Any]) -> str:
    ctx = err.get("ctx") or {}
    kind = err.get("type", "")
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}"
    if kind == "greater_than":
        return f"must be greater than {ctx['gt']}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}"
    if kind == "less_than":
        return f"must be less than {ctx['lt']}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}"
    if kind == "extra_forbidden":
        return "is not an option of HealConfig (see help(HealConfig))"
    msg = str(err.get("msg", "is not valid"))
    return msg[:1].lower() + msg[1:]


def config_problems(exc: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """One sentence per bad option of a ``HealConfig``, e.g. ``--max-iterations 0: must be at
    least 1``; ``names`` maps field names to how the caller spells them."""
    names = names or {}
    parts = []
    for err in exc.errors():
        field = ".".join(str(x) for x in err.get("loc", ())) or "HealConfig"
        given = err.get("input")
        name = names.get(field)
        shown = f"{name} {given}" if name else f"{field}={given!r}"
        parts.append(f"{shown}: {_requirement(err)}")
    return "Invalid option: " + "; ".join(parts) + "."
