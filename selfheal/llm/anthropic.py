"""A provider for Anthropic's Messages API, through the ``anthropic`` SDK.

System messages go to ``system=``; consecutive messages of the same role are merged (the
API wants user and assistant turns to alternate). With ``schema``, the model is made to call
a single tool whose ``input_schema`` is the schema, and the completion's text is that
tool input as JSON: the API then guarantees an object, not prose. Streaming uses
``messages.stream``. The SDK's own retries are off; :mod:`selfheal.llm.retry` retries.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from selfheal.errors import AuthenticationFailed, MissingDependency, ProviderUnavailable
from selfheal.llm.base import Completion, Message, TokenCallback
from selfheal.llm.retry import (
    Failure,
    RetryPolicy,
    acall_with_retry,
    call_with_retry,
    failure_for_status,
    timeout_failure,
)

__all__ = ["ANSWER_TOOL", "AnthropicProvider", "to_anthropic_messages"]

ANSWER_TOOL = "answer"
"""Name of the tool the model must call when a schema is given."""

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length"}


def _import_anthropic() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingDependency("anthropic", "anthropic", "the Anthropic provider") from exc
    return anthropic


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """``(system, messages)`` as the Messages API wants them: system text apart, turns
    alternating (same-role neighbours merged), the first turn a user turn."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"] += "\n\n" + m.content
        else:
            turns.append({"role": m.role, "content": m.content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": "(continue)"})
    return system, turns


class AnthropicProvider:
    """Claude through Anthropic's API. Implements the Provider protocol."""

    def __init__(
        self,
        model: str = "claude-sonnet-4-5",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self._sdk = _import_anthropic()
        self.model = model
        self.policy = policy or RetryPolicy()
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise AuthenticationFailed(
                "No Anthropic API key. Set ANTHROPIC_API_KEY (or pass api_key=...), or use "
                "another model: ollama:<model> or local.",
                provider="anthropic",
                model=model,
            )
        self._client_args: dict[str, Any] = {
            "api_key": key,
            "base_url": base_url,
            "timeout": self.policy.timeout,
            "max_retries": 0,
        }
        self._client = self._sdk.Anthropic(**self._client_args)
        # Recent SDKs dropped ``temperature`` (the newest models fix it); older ones take it.
        create = self._client.messages.create
        self._takes_temperature = "temperature" in inspect.signature(create).parameters

    @property
    def model_id(self) -> str:
        return f"anthropic:{self.model}"

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"

    def _request(
        self,
        messages: Sequence[Message],
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        schema: dict[str, Any] | None,
    ) -> dict[str, Any]:
        system, turns = to_anthropic_messages(messages)
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": turns,
        }
        if self._takes_temperature:
            request["temperature"] = temperature
        if system:
            request["system"] = system
        if stop:
            request["stop_sequences"] = list(stop)
        if schema is not None:
            request["tools"] = [
                {
                    "name": ANSWER_TOOL,
                    "description": "Give the answer as structured data matching the schema.",
                    "input_schema": schema,
                }
            ]
            request["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
        return request

    def _classify(self, exc: BaseException, streamed: bool) -> Failure | None:
        sdk = self._sdk
        failure: Failure | None = None
        if isinstance(exc, sdk.APITimeoutError):
            failure = timeout_failure("anthropic", self.model, self.policy.timeout)
        elif isinstance(exc, sdk.APIConnectionError):
            failure = Failure(
                ProviderUnavailable(
                    f"Cannot reach Anthropic's API ({exc}). Check the network connection "
                    "(and ANTHROPIC_BASE_URL if set), or use a local model.",
                    provider="anthropic",
                    model=self.model,
                ),
                retryable=True,
            )
        elif isinstance(exc, sdk.APIStatusError):
            body = getattr(exc, "body", None)
            detail = str(exc)
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                detail = str(body["error"].get("message") or detail)
            response = getattr(exc, "response", None)
            headers = dict(response.headers) if response is not None else None
            failure = failure_for_status(
                int(exc.status_code),
                detail,
                provider="anthropic",
                model=self.model,
                headers=headers,
                not_found_hint=(
                    "Check the model name (for example claude-sonnet-4-5), or set "
                    "SELFHEAL_ANTHROPIC_MODEL"
                ),
                auth_hint="Set ANTHROPIC_API_KEY to a valid key",
            )
        if failure is not None and streamed and failure.retryable:
            failure = Failure(failure.error, retryable=False)
        return failure

    def _completion(self, message: Any, started: float, ttft: float | None) -> Completion:
        texts: list[str] = []
        tool_input: Any = None
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use" and block.name == ANSWER_TOOL:
                tool_input = block.input
        text = (
            json.dumps(tool_input, ensure_ascii=False) if tool_input is not None else "".join(texts)
        )
        usage = message.usage
        return Completion(
            text=text,
            prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            latency=time.monotonic() - started,
            model=self.model_id,
            finish_reason=_FINISH.get(str(message.stop_reason), str(message.stop_reason or "")),
            time_to_first_token=ttft,
        )

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        request = self._request(messages, max_tokens, temperature, stop, schema)
        streamed = [False]

        def call() -> Completion:
            started = time.monotonic()
            if on_token is None:
                return self._completion(self._client.messages.create(**request), started, None)
            ttft: float | None = None
            with self._client.messages.stream(**request) as stream:
                for event in stream:
                    piece = _piece(event)
                    if piece:
                        if ttft is None:
                            ttft = time.monotonic() - started
                        streamed[0] = True
                        on_token(piece)
                final = stream.get_final_message()
            return self._completion(final, started, ttft)

        return call_with_retry(call, lambda exc: self._classify(exc, streamed[0]), self.policy)

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        request = self._request(messages, max_tokens, temperature, stop, schema)
        streamed = [False]

        async def call() -> Completion:
            started = time.monotonic()
            # A client per call: an async HTTP pool belongs to the event loop it was made in.
            async with self._sdk.AsyncAnthropic(**self._client_args) as client:
                if on_token is None:
                    message = await client.messages.create(**request)
                    return self._completion(message, started, None)
                ttft: float | None = None
                async with client.messages.stream(**request) as stream:
                    async for event in stream:
                        piece = _piece(event)
                        if piece:
                            if ttft is None:
                                ttft = time.monotonic() - started
                            streamed[0] = True
                            on_token(piece)
                    final = await stream.get_final_message()
                return self._completion(final, started, ttft)

        return await acall_with_retry(
            call, lambda exc: self._classify(exc, streamed[0]), self.policy
        )


def _piece(event: Any) -> str:
    """The text fragment a stream event carries (text, or tool-input JSON), if any."""
    kind = getattr(event, "type", "")
    if kind == "text":
        return str(event.text)
    if kind == "input_json":
        return str(event.partial_json)
    return ""
