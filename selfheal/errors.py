"""The exceptions selfheal raises, all rooted at ``SelfHealError`` (the tree: docs/usage.md,
"Errors"); every message says what happened and what to do next."""

from __future__ import annotations

from collections.abc import Sequence

LOCAL_MODEL_INSTALL = (
    '`selfheal install` (after `pip install "selfheal[local]"`; in a clone of the repository: '
    "`make install`)"
)
"""How to install the local model and its llama-server, for a pip user and in a clone: every
message that sends the user to install it says this."""


class SelfHealError(Exception):
    """Base class of every error selfheal raises on purpose."""


class ConfigError(SelfHealError):
    """A user mistake: a bad option, an unknown model string, a missing key or file."""


class MissingDependency(ConfigError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str = "", *, install: str = "") -> None:
        self.package = package
        self.extra = extra
        what = f" for {purpose}" if purpose else ""
        how = install or f'pip install "selfheal[{extra}]"'
        super().__init__(
            f"{package!r} is needed{what} but is not installed. Install it with: {how}"
        )


class MemoryUnavailable(ConfigError):
    """The memory across runs (``selfheal.memory``) cannot be opened, read or written: an
    unwritable path, a file that is not a SQLite database, a lock held too long."""


class ProviderError(SelfHealError):
    """A language-model call failed."""

    def __init__(self, message: str, *, provider: str = "", model: str = "") -> None:
        self.provider = provider
        self.model = model
        super().__init__(message)


class ProviderUnavailable(ProviderError):
    """The backend cannot be reached (server down, connection refused, repeated 5xx)."""


class ModelNotFound(ProviderError):
    """The backend does not know the requested model."""


class AuthenticationFailed(ProviderError):
    """The API key is missing or was refused."""


class ProviderTimeout(ProviderError):
    """A call took longer than its timeout."""


class MalformedReply(ProviderError):
    """The model's reply could not be turned into the expected structure, even after salvage
    and bounded retries. ``raw`` keeps the last reply and ``completions`` every attempt (the
    :class:`selfheal.llm.base.Completion` records: their text and cost), so nothing is lost.
    This module imports nothing of selfheal's, so they are typed loosely here."""

    def __init__(
        self,
        message: str,
        *,
        raw: str = "",
        provider: str = "",
        model: str = "",
        completions: Sequence[object] = (),
    ) -> None:
        self.raw = raw
        self.completions = tuple(completions)
        super().__init__(message, provider=provider, model=model)


class SandboxError(SelfHealError):
    """The kernel sandbox itself failed (could not start a kernel, lost it unrecoverably)."""


class CandidateTimeout(SandboxError):
    """A candidate's whole run went over its time budget."""


class ApprovalRequired(SelfHealError):
    """Control signal: the run waits for a human decision (Approve, Edit or Reject).

    Raised when an approval is needed and nothing can answer it (for example a headless
    notebook run with ``on_headless="error"``). ``state`` is the paused state, which can be
    resumed with ``Run.resume(decision)``."""

    def __init__(self, message: str, *, state: object = None) -> None:
        self.state = state
        super().__init__(message)
