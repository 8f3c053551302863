"""``HealRequest``: the options of one heal, written once.

``selfheal.heal`` and ``selfheal.aheal`` take these fields as their keywords (their signature
is this record's) and build one request; the notebook frontend, ``Run.start`` and the CLI pass
that record along instead of copying the keyword list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field

from selfheal.approval import Approver
from selfheal.config import HealConfig
from selfheal.context import EventSink, TokenSink
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import Provider
from selfheal.spec import parse_spec
from selfheal.state import HealState, TestCase

__all__ = ["HealRequest", "ProviderArg"]

ProviderArg = str | Provider | None
"""A model string (``"local"``, ``"ollama:<model>"``, ...), a Provider object, or None for
``config.model`` / ``$SELFHEAL_MODEL`` / auto-detection."""


@dataclass(frozen=True)
class HealRequest:
    """One heal: the spec and everything that says how to heal it.

    Not a saved record (it holds live objects: a provider, a sandbox, callbacks); what a run
    needs again is in its state (``config``, the spec, the tests)."""

    spec: str
    """The plain-language spec (examples in it become trusted tests)."""
    _: KW_ONLY
    provider: ProviderArg = None
    """The model for every role (``config.models`` overrides per role)."""
    config: HealConfig = field(default_factory=HealConfig)
    """The options recorded with the run; a model string in ``provider`` fills ``config.model``
    when that is unset."""
    entry_point: str | None = None
    """The function's name (default: read from the spec)."""
    tests: Sequence[str | TestCase] = ()
    """Your own assertion tests (trusted: the winner must pass them all)."""
    approver: Approver | None = None
    """Answers proposals when ``config.autonomy`` asks for review."""
    executor: Executor | None = None
    """The sandbox candidates run in (default: the shared kernel pool)."""
    on_event: EventSink | None = None
    """Receives every timeline event as it happens."""
    on_token: TokenSink | None = None
    """Receives ``(role, text)`` while a model streams."""

    def __post_init__(self) -> None:
        config = self.config if self.config is not None else HealConfig()
        if isinstance(self.provider, str) and config.model is None:
            config = config.model_copy(update={"model": self.provider})
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "tests", tuple(self.tests or ()))

    def initial_state(self) -> HealState:
        """The state a run starts from: the parsed spec, the config, your tests (trusted)."""
        user_tests: list[TestCase] = []
        for i, t in enumerate(self.tests, start=1):
            if isinstance(t, TestCase):
                user_tests.append(t.model_copy(update={"trusted": True, "origin": "user"}))
            else:
                user_tests.append(
                    TestCase(
                        id=f"u{i}",
                        origin="user",
                        code=str(t),
                        trusted=True,
                        rationale="given by the user",
                    )
                )
        return HealState(
            spec=parse_spec(self.spec, entry_point=self.entry_point),
            config=self.config,
            tests=tuple(user_tests),
        )
