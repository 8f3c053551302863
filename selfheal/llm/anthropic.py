"""A provider for Anthropic's Messages API, through the ``anthropic`` SDK (what is sent, and its
retries held to :class:`RetryPolicy`: docs/llm.md, "Providers", "Reliability")."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from selfheal.errors import (
    AuthenticationFailed,
    MissingDependency,
    ProviderError,
    ProviderUnavailable,
)
from selfheal.llm.aio import OwnedClient
from selfheal.llm.base import (
    Completion,
    CompletionRequest,
    Message,
    ProviderBase,
    ToolCall,
)
from selfheal.llm.prefill import prefill_of
from selfheal.llm.retry import (
    RETRYABLE_STATUS,
    Failure,
    RetryPolicy,
    failure_for_status,
    gave_up,
    retry_after_from_headers,
    should_retry,
    timeout_failure,
)
from selfheal.llm.stream import ReplyStream

ANSWER_TOOL = "answer"
"""Name of the tool the model must call when a schema is given."""

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length"}


def _import_anthropic() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingDependency("anthropic", "anthropic", "the Anthropic provider") from exc
    return anthropic


def _content(m: Message) -> str | list[dict[str, Any]]:
    """A message's content: its text, or blocks for a tool call or a tool result."""
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]
    if not m.tool_calls:
        return m.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    for c in m.tool_calls:
        try:
            args = json.loads(c.arguments or "{}")
        except ValueError:
            args = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": c.id,
                "name": c.name,
                "input": args if isinstance(args, dict) else {},
            }
        )
    return blocks


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` as the Messages API wants them: system text apart, turns
    alternating (same-role neighbours merged), the first turn a user turn; a tool result is
    a user turn's ``tool_result`` block, a tool call an assistant turn's ``tool_use``."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "user" if m.role == "tool" else m.role
        content = _content(m)
        if turns and turns[-1]["role"] == role:
            prev = turns[-1]["content"]
            if isinstance(prev, str) and isinstance(content, str):
                turns[-1]["content"] = prev + "\n\n" + content
            else:
                turns[-1]["content"] = _blocks(prev) + _blocks(content)
        else:
            turns.append({"role": role, "content": content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": "(continue)"})
    if turns[-1]["role"] == "assistant" and isinstance(turns[-1]["content"], str):
        # a prefilled reply, which the API continues; it refuses one that ends in whitespace
        turns[-1]["content"] = turns[-1]["content"].rstrip()
    return system, turns


class AnthropicProvider(ProviderBase):
    """Claude through Anthropic's API. Implements the Provider protocol."""

    backend = "anthropic"
    supports_tools = True
    """Native tool calling through ``tools`` / ``tool_use`` blocks (see the module docs)."""
    batch_hint = 1
    """An API with rate limits: one answer at a time is all it promises."""

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
            "max_retries": max(0, self.policy.attempts - 1),
        }
        client_class = self._sdk.AsyncAnthropic
        if "middleware" in inspect.signature(client_class).parameters:
            self._client_args["middleware"] = [_policy_middleware(self._sdk, self.policy)]
        self._client: OwnedClient[Any] = OwnedClient()
        # Recent SDKs dropped ``temperature`` (the newest models fix it); older ones take it.
        create = client_class(**self._client_args).messages.create
        self._takes_temperature = "temperature" in inspect.signature(create).parameters

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"

    def _request(self, request: CompletionRequest) -> dict[str, Any]:
        system, turns = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": turns,
        }
        if self._takes_temperature:
            body["temperature"] = request.temperature
        if system:
            body["system"] = system
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            body["tool_choice"] = {"type": "any" if request.tool_choice == "required" else "auto"}
        elif request.schema is not None:
            body["tools"] = [
                {
                    "name": ANSWER_TOOL,
                    "description": "Give the answer as structured data matching the schema.",
                    "input_schema": request.schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
        return body

    def _classify(self, exc: BaseException) -> Failure | None:
        sdk = self._sdk
        if isinstance(exc, _NotRetried):
            exc = exc.cause
        if isinstance(exc, sdk.APITimeoutError):
            return timeout_failure("anthropic", self.model, self.policy.timeout)
        if isinstance(exc, sdk.APIConnectionError):
            return Failure(
                ProviderUnavailable(
                    f"Cannot reach Anthropic's API ({exc}). Check the network connection "
                    "(and ANTHROPIC_BASE_URL if set), or use a local model.",
                    provider="anthropic",
                    model=self.model,
                ),
                retryable=True,
            )
        if isinstance(exc, sdk.APIStatusError):
            body = getattr(exc, "body", None)
            detail = str(exc)
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                detail = str(body["error"].get("message") or detail)
            response = getattr(exc, "response", None)
            headers = dict(response.headers) if response is not None else None
            return failure_for_status(
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
        return None

    def _completion(self, message: Any, reply: ReplyStream, native: bool = False) -> Completion:
        texts: list[str] = []
        tool_input: Any = None
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use" and native:
                calls.append(
                    ToolCall(
                        id=str(block.id),
                        name=str(block.name),
                        arguments=json.dumps(block.input, ensure_ascii=False),
                    )
                )
            elif block.type == "tool_use" and block.name == ANSWER_TOOL:
                tool_input = block.input
        text = (
            json.dumps(tool_input, ensure_ascii=False) if tool_input is not None else "".join(texts)
        )
        usage = message.usage
        return reply.completion(
            text=text,
            prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            model=self.model_id,
            finish_reason=_FINISH.get(str(message.stop_reason), str(message.stop_reason or "")),
            tool_calls=tuple(calls),
        )

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        done = await self._send(request)
        prefill = prefill_of(request.messages)
        trimmed = prefill[len(prefill.rstrip()) :]
        if not trimmed:
            return done
        # the API continued the prefill without its trailing whitespace: the reply is what
        # follows the prefill as it was given
        whole = prefill.rstrip() + done.text
        text = whole[len(prefill) :] if whole.startswith(prefill) else done.text.lstrip()
        return done.model_copy(update={"text": text})

    async def _send(self, request: CompletionRequest) -> Completion:
        body = self._request(request)
        client = self._client.get(None, lambda: self._sdk.AsyncAnthropic(**self._client_args))
        reply = ReplyStream(request.on_token)
        try:
            native = bool(request.tools)
            if request.on_token is None:
                return self._completion(await client.messages.create(**body), reply, native)
            async with client.messages.stream(**body) as stream:
                async for event in stream:
                    reply.add(_piece(event))
                final = await stream.get_final_message()
            return self._completion(final, reply, native)
        except ProviderError:
            raise
        except Exception as exc:
            failure = self._classify(exc)
            if failure is None:
                raise
            # the SDK retried what the policy allows (not a stream once tokens flowed)
            retried = should_retry(failure, self.policy) and not reply.streamed
            attempts = self.policy.attempts if retried else 1
            raise gave_up(failure, attempts) from exc


class _NotRetried(Exception):
    """Raised by the middleware around an error the policy does not retry (the SDK retries
    only the errors it knows)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _policy_middleware(sdk: Any, policy: RetryPolicy) -> Callable[..., Awaitable[Any]]:
    """An SDK middleware (it runs inside the SDK's retry loop, once per attempt) that holds
    the SDK's retries to ``policy``."""

    async def middleware(request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        try:
            response = await call_next(request)
        except sdk.APITimeoutError as exc:
            if policy.retry_timeouts:
                raise
            raise _NotRetried(exc) from None
        http = response.http_response
        if http.status_code in RETRYABLE_STATUS:  # the policy's list, not the SDK's
            wait = retry_after_from_headers(http.headers)
            too_long = wait is not None and wait > policy.max_retry_after
            http.headers["x-should-retry"] = "false" if too_long else "true"
        return response

    return middleware


def _piece(event: Any) -> str:
    """The text fragment a stream event carries (text, or tool-input JSON), if any."""
    kind = getattr(event, "type", "")
    if kind == "text":
        return str(event.text)
    if kind == "input_json":
        return str(event.partial_json)
    return ""
