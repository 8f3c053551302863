"""``HealRequest``: the options of one heal, written once (``heal``'s and ``aheal``'s keywords
are its fields; the notebook, ``Run.start`` and the CLI pass the record along)."""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from selfheal._parse import parse_or_none
from selfheal._sync import sync_twin
from selfheal.approval import Approver
from selfheal.asking import Asker
from selfheal.config import HealConfig
from selfheal.context import EventSink, TokenSink
from selfheal.errors import ConfigError
from selfheal.inputs import check_python
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.llm.base import Provider
from selfheal.llm.router import parse_model_string
from selfheal.probes import merge_probes
from selfheal.spec import check_spec
from selfheal.state import Event, HealState, Spec, TestCase
from selfheal.testchecks import check_contradictions, check_imports, defined_names, marked
from selfheal.usertests import UserTest, auser_test_cases, read_user_tests

ProviderArg = str | Provider | None
"""A model string (``"local"``, ``"ollama:<model>"``, ...), a Provider object, or None for
``config.calls.model`` / ``$SELFHEAL_MODEL`` / auto-detection."""


@dataclass(frozen=True, init=False)
class HealRequest:
    """One heal: the spec and everything that says how to heal it (not a saved record: it holds
    live objects; what a run needs again is in its state). Read and checked once, when it is
    made, before any model call or kernel start; a mistake is a ``ConfigError`` that says what to
    change (docs/architecture.md, "The route of one ``heal()`` call"). Each field is written once."""

    spec: str
    """The plain-language spec (examples in it become trusted tests); UTF-8 ``bytes`` are
    accepted too."""
    provider: ProviderArg
    """The model for every role (``config.calls.models`` overrides per role)."""
    config: HealConfig
    """The options recorded with the run; a model string in ``provider`` fills
    ``config.calls.model`` when that is unset."""
    entry_point: str | None
    """The function's name (default: read from the spec)."""
    code: str | None
    """Code you already have, to heal: it runs first, as candidate ``c0`` (origin ``user``);
    when it passes every trusted test the run ends there, otherwise the repairs start from it
    (``HealResult.diff`` is the change against it)."""
    tests: tuple[UserTest | TestCase, ...]
    """Your own tests (trusted: the winner must pass them all): assert lines, a pytest module's
    text, a path to a pytest file (a ``Path``, or a one-line string ending in ``.py``), or a
    list of those; read and checked here. A pytest module is collected by pytest in the
    sandbox and each of its items is one test (``selfheal.usertests``)."""
    probes: tuple[str, ...]
    """Calls every candidate runs on, e.g. ``f([-1, -2])``, whose outputs are compared across
    candidates (nothing is expected of them; ``%selfheal`` gives the call that raised)."""
    approver: Approver | None
    """Answers proposals when ``config.approval.autonomy`` asks for review."""
    executor: Executor | None
    """The sandbox candidates run in (default: the shared kernel pool)."""
    on_event: EventSink | None
    """Receives every timeline event as it happens."""
    on_token: TokenSink | None
    """Receives ``(role, text)`` while a model streams."""
    asker: Asker | None
    """Answers questions when the evidence runs out (``selfheal.asking``; at most
    ``config.approval.ask_limit``, never under ``autonomy="full_auto"``); None never asks."""
    parsed: Spec = field(init=False)
    """The spec as read (its examples, entry point, signature), parsed once, here."""

    def __init__(
        self,
        spec: str | bytes,
        *,
        provider: ProviderArg = None,
        config: HealConfig | Mapping[str, object] | None = None,
        entry_point: str | None = None,
        code: str | None = None,
        tests: Sequence[str | os.PathLike[str] | TestCase] | str | os.PathLike[str] = (),
        probes: Sequence[str] = (),
        approver: Approver | None = None,
        executor: Executor | None = None,
        on_event: EventSink | None = None,
        on_token: TokenSink | None = None,
        asker: Asker | None = None,
    ) -> None:
        checked = _checked_config(config, provider)
        if asker is not None and not callable(asker):
            raise ConfigError(
                f"asker must be a function of (question, state) returning an answer "
                f"(selfheal.Pick, NoneOfThese or Skip), not {type(asker).__name__}."
            )
        max_chars = checked.budgets.max_spec_chars
        text, parsed = check_spec(spec, entry_point=entry_point, max_chars=max_chars)
        entry = parsed.entry_point
        given_tests = _checked_tests(tests, entry)
        given_code = check_python(code, "Your code") if code is not None else None
        given = [t for t in given_tests if isinstance(t, UserTest)]
        if given_code is not None:
            check_imports(given, given_code, entry)
        known = {entry} if entry else set()
        known |= defined_names(given_code or "") or set()
        known |= {i.name for t in given for i in t.imports if i.name}
        cases = [t for t in given_tests if isinstance(t, TestCase)]
        check_contradictions(given, parsed.examples, known, cases)
        values = {
            "spec": text,
            "provider": provider,
            "config": checked,
            "entry_point": entry_point,
            "code": given_code,
            "tests": given_tests,
            "probes": tuple(_checked_probe(c) for c in probes),
            "approver": approver,
            "executor": executor,
            "on_event": on_event,
            "on_token": on_token,
            "asker": asker,
            "parsed": parsed,
        }
        for name, value in values.items():  # each field once (the record is frozen)
            object.__setattr__(self, name, value)

    async def ainitial_state(
        self,
        executor: Executor | None = None,
        *,
        config: HealConfig | None = None,
        events: Sequence[Event] = (),
        can_ask: bool | None = None,
    ) -> HealState:
        """The state a run starts from: the parsed spec, ``config`` (default: the request's;
        a run's comes from ``graph.build`` with its models resolved) with ``events`` saying
        how it was settled, ``can_ask`` whether someone answers its questions (default: the
        request has an asker), your tests (trusted; a pytest module's items are collected in
        ``executor``, the run's sandbox)."""
        config = config or self.config
        given = [t for t in self.tests if isinstance(t, UserTest)]
        limits = Limits(test_timeout=max(config.limits.test_timeout, 30.0))
        user_tests = list(await auser_test_cases(given, executor, limits))
        for t in self.tests:
            if isinstance(t, TestCase):
                user_tests.append(t.model_copy(update={"trusted": True, "origin": "user"}))
        probes = merge_probes(
            (), [(c, "user") for c in self.probes], limit=len(self.probes), round=0
        )
        return HealState(
            spec=self.parsed,
            config=config,
            tests=marked(user_tests),
            probes=probes,
            given_code=self.code,
            can_ask=self.asker is not None if can_ask is None else can_ask,
            events=tuple(events),
        )

    initial_state = sync_twin(ainitial_state)


def _checked_config(
    config: HealConfig | Mapping[str, object] | None, provider: ProviderArg
) -> HealConfig:
    """The config a request records: ``config`` read, with a model string in ``provider``
    as its ``model`` when it names none; every model string in it checked."""
    if config is None:
        config = HealConfig()
    elif isinstance(config, Mapping):
        config = HealConfig.model_validate(dict(config))
    if not isinstance(config, HealConfig):
        raise ConfigError(f"config must be a HealConfig, not {type(config).__name__}.")
    if isinstance(provider, str):
        parse_model_string(provider)  # an unknown model string fails here, not mid-run
        if config.calls.model is None:
            config = config.changed(model=provider)
    if config.calls.model is not None:
        parse_model_string(config.calls.model)
    for model in config.calls.models.values():
        parse_model_string(model)
    return config


def _checked_probe(call: str) -> str:
    """``call`` if it is one call expression (``f([-1, -2])``); else a ConfigError."""
    tree = parse_or_none(call.strip(), "eval") if isinstance(call, str) else None
    if tree is None or not isinstance(tree.body, ast.Call):
        raise ConfigError(
            f"A probe must be one call of your function, e.g. `f([1, 2])`; got {call!r}."
        )
    return call.strip()


def _checked_tests(
    tests: Sequence[str | os.PathLike[str] | TestCase] | str | os.PathLike[str] | None,
    entry_point: str | None,
) -> tuple[UserTest | TestCase, ...]:
    """Your tests, each read and checked (``selfheal.usertests``): a test that cannot run, or
    that checks nothing, could never be evidence."""
    if tests is None or isinstance(tests, str | bytes | os.PathLike):
        tests = [tests] if tests is not None else []  # one test, not its characters
    out: list[UserTest | TestCase] = []
    texts: list[str | os.PathLike[str]] = []
    for t in tests:
        if isinstance(t, TestCase):
            if t.code is not None:
                check_python(t.code, f"Your test {t.id!r}")
            out.append(t)
        elif isinstance(t, UserTest):
            out.append(t)
        else:
            texts.append(t)
    return (*read_user_tests(texts, entry_point), *out)
