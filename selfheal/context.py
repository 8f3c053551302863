"""``Context``: the effectful services a node may use (models, sandbox, memory, clock, event
sink); everything that talks to the world goes through it, so tests swap in fakes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from selfheal.asking import Asker
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import Provider
from selfheal.state import Event, HealState, Remembered

EventSink = Callable[[Event], None]
"""Receives events as they happen (the CLI's progress lines, the notebook view)."""

TokenSink = Callable[[str, str], None]
"""Receives ``(role, text_fragment)`` while a model streams."""


class ModelRouter(Protocol):
    """Gives the provider for a role (``selfheal.llm.router.Router`` is the real one)."""

    def for_role(self, role: str) -> Provider: ...


class MemoryStore(Protocol):
    """Remembers across runs (``selfheal.memory.Memory`` is the real one)."""

    path: Any
    """Where it lives (shown on the timeline)."""

    def recall(self, state: HealState) -> tuple[Remembered, ...]:
        """What a new run of ``state``'s spec should be shown."""
        ...

    def learn(self, state: HealState) -> Any:
        """Write down what the finished run ``state`` teaches; the result has
        ``summary(path) -> str``."""
        ...


@dataclass(frozen=True)
class FixedRouter:
    """One provider for every role, with optional per-role overrides."""

    default: Provider
    per_role: Mapping[str, Provider] = field(default_factory=dict)

    def for_role(self, role: str) -> Provider:
        return self.per_role.get(role, self.default)


@dataclass(frozen=True)
class Context:
    """Services for nodes. Built by ``selfheal.graph.build``."""

    llm: ModelRouter
    """Gives each role its provider."""
    executor: Executor
    """Runs candidates (the kernel pool)."""
    clock: Callable[[], float] = time.time
    """Wall clock (injectable for tests)."""
    sink: EventSink | None = None
    """Live event receiver."""
    on_token: TokenSink | None = None
    """Live token receiver."""
    memory_store: MemoryStore | None = None
    """The memory across runs (None: off)."""
    asker: Asker | None = None
    """Answers questions when the evidence runs out (None: nothing is asked; docs/loop.md)."""

    def provider(self, role: str) -> Provider:
        """The provider for ``role`` (the role itself travels with each call, as
        ``CompletionRequest.role``)."""
        return self.llm.for_role(role)

    def emit(self, event: Event) -> None:
        if self.sink is not None:
            with contextlib.suppress(Exception):  # a broken view must not break the run
                self.sink(event)
