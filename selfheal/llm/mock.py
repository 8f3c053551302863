"""A deterministic, scriptable provider for tests and demos: replies scripted per role (a string,
a function of the messages, or an exception); ``MockProvider.demo()`` replays the median demo
and refuses any other spec (docs/llm.md)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError, ProviderError
from selfheal.llm.base import Completion, CompletionRequest, Message, ProviderBase
from selfheal.llm.mock_demo import DEMO_SCRIPT, DEMO_SPEC, Reply
from selfheal.llm.tokens import estimate_tokens

UNBOUND = "any"
"""The script a call without a role answers from."""


class MockScriptExhausted(ProviderError):
    """The script has no more replies for a role."""


@dataclass(frozen=True)
class MockCall:
    """One recorded call."""

    role: str
    messages: tuple[Message, ...]
    reply: str
    schema: dict[str, Any] | None = None
    max_tokens: int = 1024
    """The completion-token cap the caller asked for."""
    node: str = ""
    """The pipeline node the call came from."""
    temperature: float = 0.0
    """The sampling temperature asked for."""
    seed: int | None = None
    """The sampling seed asked for (None: the backend's choice)."""


@dataclass
class _Script:
    replies: dict[str, list[Reply]]
    default: Reply | None
    repeat_last: bool = False
    positions: dict[str, int] = field(default_factory=dict)

    def next(self, role: str, messages: Sequence[Message]) -> str:
        queue = self.replies.get(role)
        if queue is None:
            if self.default is None:
                raise MockScriptExhausted(
                    f"The mock provider has no script for role {role!r}. Add replies for it: "
                    f"MockProvider({{{role!r}: [...]}}) or a default=.",
                    provider="mock",
                )
            reply: Reply = self.default
        else:
            i = self.positions.get(role, 0)
            if i >= len(queue) and self.repeat_last and queue:
                i = len(queue) - 1
            if i >= len(queue):
                raise MockScriptExhausted(
                    f"The mock script for role {role!r} has {len(queue)} replies and reply "
                    f"#{i + 1} was asked for. Add more replies.",
                    provider="mock",
                )
            self.positions[role] = i + 1
            reply = queue[i]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(messages)
        return reply


class MockProvider(ProviderBase):
    """Scripted replies per role. Implements the ``Provider`` protocol."""

    backend = "mock"
    max_concurrency = 1
    """Requests the pipeline may have in flight at once: one, so scripted replies are consumed
    in a fixed order and a scripted run is reproducible."""

    def __init__(
        self,
        script: Mapping[str, Sequence[Reply]] | None = None,
        *,
        default: Reply | None = None,
        name: str = "scripted",
        latency: float = 0.0,
        token_delay: float = 0.0,
        only_spec: str | None = None,
        repeat_last: bool = False,
    ) -> None:
        """``latency``: seconds each call takes before its reply; ``token_delay``: seconds each
        piece of a reply (a word, about a token) takes after that, streamed or not, like a
        model writing at a fixed speed (a progress display then sees the count grow);
        ``only_spec``: the one spec the script answers for (others are refused before a run
        starts); ``repeat_last``: a role whose replies are used up answers its last one again
        instead of raising ``MockScriptExhausted``."""
        if latency < 0 or token_delay < 0:
            raise ConfigError("The mock provider's latency and token_delay are seconds >= 0.")
        self._script = _Script(
            {k: list(v) for k, v in (script or {}).items()}, default, repeat_last
        )
        self.model = name
        self._latency = latency
        self._token_delay = token_delay
        self._only_spec = only_spec
        self._lock = threading.Lock()
        self.calls: list[MockCall] = []

    def check_spec(self, spec: str) -> None:
        """Refuse a spec the script was not written for, before the run starts."""
        if self._only_spec is not None and spec.split() != self._only_spec.split():
            raise ConfigError(
                f"The {self.model_id} provider only replays its scripted median demo (run "
                "`selfheal heal --provider mock` with no spec); it cannot heal this spec. Use "
                f"a real model: --provider local (the default, installed by {LOCAL_MODEL_INSTALL}), "
                "ollama:MODEL, anthropic:MODEL, openai:MODEL or hf:MODEL; or script the "
                "replies yourself with mock:<script.yaml>."
            )

    def calls_for(self, role: str) -> list[MockCall]:
        return [c for c in self.calls if c.role == role]

    def _take(self, request: CompletionRequest, n: int) -> list[str]:
        """The next ``n`` replies of the request's role, in order, under one lock (so
        concurrent callers never interleave)."""
        role = request.role or UNBOUND
        texts: list[str] = []
        with self._lock:
            for _ in range(n):
                text = self._script.next(role, request.messages)
                self.calls.append(
                    MockCall(
                        role,
                        request.messages,
                        text,
                        request.schema,
                        request.max_tokens,
                        request.node,
                        request.temperature,
                        request.seed,
                    )
                )
                texts.append(text)
        return texts

    async def _answer(self, request: CompletionRequest, text: str) -> Completion:
        cut = min((text.find(s) for s in request.stop if s and s in text), default=-1)
        if cut >= 0:
            text = text[:cut]
        end = request.stop_when(text) if request.stop_when is not None else None
        text = text[:end]  # a model that stops where the reply is done (docs/llm.md)
        if self._latency:
            await asyncio.sleep(self._latency)
        words = text.split(" ")
        # the pieces join to the text, as a stream's do
        pieces = [w + " " for w in words[:-1]] + words[-1:]
        for piece in pieces:
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            if request.on_token is not None:
                request.on_token(piece)
        prompt = "\n".join(m.content for m in request.messages)
        return Completion(
            text=text,
            prompt_tokens=estimate_tokens(prompt),
            completion_tokens=estimate_tokens(text),
            latency=self._latency + self._token_delay * len(pieces),
            model=self.model_id,
            finish_reason="stop",
        )

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        (text,) = await asyncio.to_thread(self._take, request, 1)
        return await self._answer(request, text)

    async def _acomplete_many(self, request: CompletionRequest, n: int) -> list[Completion]:
        """``n`` scripted replies in order, one after the other (deterministic)."""
        texts = await asyncio.to_thread(self._take, request, n)
        return [await self._answer(request.replace(on_token=None), t) for t in texts]

    @classmethod
    def demo(cls) -> MockProvider:
        """The scripted median session: fail, diagnose, learn, repair, verify."""
        return cls(DEMO_SCRIPT, name="demo", latency=0.05, only_spec=DEMO_SPEC, repeat_last=True)

    @classmethod
    def from_file(cls, path: str | Path) -> MockProvider:
        """Load a script from YAML: ``{role: [reply, ...]}``, optionally with ``latency:
        SECONDS`` (each call then takes that long, like a slow model) and ``token_delay:
        SECONDS`` (each word of a reply streams after that long)."""
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"Cannot read mock script {p}: {exc}") from exc
        timing = {}
        for key in ("latency", "token_delay"):
            value = data.pop(key, 0.0) if isinstance(data, dict) else 0.0
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"Mock script {p}: {key} must be a number of seconds >= 0.")
            timing[key] = float(value)
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise ConfigError(f"Mock script {p} must map role names to lists of replies.")
        return cls(
            {str(k): [str(x) for x in v] for k, v in data.items()},
            name=p.stem,
            latency=timing["latency"],
            token_delay=timing["token_delay"],
        )

    @classmethod
    def from_string(cls, rest: str) -> MockProvider:
        """Build from the part after ``mock:`` in a model string: ``demo`` (default) or a YAML path."""
        if rest in {"", "demo"}:
            return cls.demo()
        return cls.from_file(rest)
