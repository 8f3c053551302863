"""The Anthropic provider with the real ``anthropic`` SDK against a fake server speaking the
Messages API wire format (JSON and SSE streaming events) on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from llm_fakes import FakeServer, Request, Response
from pydantic import BaseModel

from selfheal.errors import (
    AuthenticationFailed,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from selfheal.llm.anthropic import AnthropicProvider, to_anthropic_messages
from selfheal.llm.ask import ask_structured
from selfheal.llm.base import Message, Provider
from selfheal.llm.retry import RetryPolicy

FAST = RetryPolicy(timeout=5.0, attempts=3, base_delay=0.01, max_delay=0.05)
CHAT = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="Say hi"),
]


def message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 21, "output_tokens": 4},
    }


def sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def text_stream(pieces: list[str], stop: str = "end_turn") -> list[bytes]:
    start = message([], stop="")
    start["stop_reason"] = None
    start["usage"] = {"input_tokens": 21, "output_tokens": 1}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
        for p in pieces
    ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": len(pieces)},
        },
        {"type": "message_stop"},
    ]
    return sse(events)


def tool_stream(name: str, parts: list[str]) -> list[bytes]:
    start = message([], stop="")
    start["stop_reason"] = None
    block = {"type": "tool_use", "id": "toolu_01", "name": name, "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
    ]
    events += [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for p in parts
    ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    return sse(events)


TOOL_PARTS = ['{"value": ', '7, "note"', ': "séance"}']


def anthropic_handler(text: str = "Hi!") -> Callable[[Request], Response]:
    def handle(request: Request) -> Response:
        if request.path != "/v1/messages":
            return Response.json({"type": "error", "error": {"type": "not_found_error"}}, 404)
        body = request.json()
        if body.get("tools") and body.get("stream"):
            return Response(
                body=tool_stream(body["tools"][0]["name"], TOOL_PARTS),
                headers={"content-type": "text/event-stream"},
            )
        if body.get("tools"):
            tool = {
                "type": "tool_use",
                "id": "toolu_01",
                "name": body["tools"][0]["name"],
                "input": {"value": 7, "note": "séance"},
            }
            return Response.json(message([tool], stop="tool_use"))
        if body.get("stream"):
            return Response(
                body=text_stream(["Hel", "lo ", "wörld"]),
                headers={"content-type": "text/event-stream"},
                chunk_delay=0.01,
            )
        return Response.json(message([{"type": "text", "text": text}]))

    return handle


def error(status: int, kind: str, text: str, **headers: str) -> Response:
    return Response.json(
        {"type": "error", "error": {"type": kind, "message": text}}, status, **headers
    )


def make(server: FakeServer, policy: RetryPolicy = FAST, model: str = "claude-test") -> Any:
    return AnthropicProvider(model, api_key="sk-test-key", base_url=server.url, policy=policy)


def test_is_a_provider(http_server: Any) -> None:
    assert isinstance(make(http_server(anthropic_handler())), Provider)


def test_message_conversion() -> None:
    system, turns = to_anthropic_messages(
        [
            Message(role="system", content="a"),
            Message(role="user", content="u1"),
            Message(role="user", content="u2"),
            Message(role="system", content="b"),
            Message(role="assistant", content="x"),
        ]
    )
    assert system == "a\n\nb"
    assert turns == [
        {"role": "user", "content": "u1\n\nu2"},
        {"role": "assistant", "content": "x"},
    ]


def test_happy_path(http_server: Any) -> None:
    server = http_server(anthropic_handler("Hello there"))
    provider = make(server)
    completion = provider.complete(CHAT, max_tokens=64, temperature=0.3, stop=["END"])
    assert completion.text == "Hello there"
    assert (completion.prompt_tokens, completion.completion_tokens) == (21, 4)
    assert completion.finish_reason == "stop"
    assert completion.model == "anthropic:claude-test"
    request = server.requests[0]
    # The key travels as x-api-key (older SDKs) or a bearer token (newer ones).
    sent = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert sent.removeprefix("Bearer ") == "sk-test-key"
    assert "anthropic-version" in request.headers
    body = request.json()
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": "Say hi"}]
    assert body["max_tokens"] == 64
    if provider._takes_temperature:  # the installed SDK decides whether it is sent
        assert body["temperature"] == 0.3
    else:
        assert "temperature" not in body
    assert body["stop_sequences"] == ["END"]
    assert "tools" not in body


def test_streaming_sse(http_server: Any) -> None:
    server = http_server(anthropic_handler())
    pieces: list[str] = []
    completion = make(server).complete(CHAT, on_token=pieces.append)
    assert pieces == ["Hel", "lo ", "wörld"]
    assert completion.text == "Hello wörld"
    assert completion.completion_tokens == 3
    assert completion.prompt_tokens == 21
    assert completion.time_to_first_token is not None
    assert server.requests[0].json()["stream"] is True


def test_structured_output_uses_forced_tool(http_server: Any) -> None:
    class Answer(BaseModel):
        value: int
        note: str

    server = http_server(anthropic_handler())
    reply = ask_structured(make(server), CHAT, Answer)
    assert reply.value == Answer(value=7, note="séance")
    assert reply.degraded is False
    body = server.requests[0].json()
    assert body["tools"][0]["input_schema"] == Answer.model_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}


def test_structured_output_while_streaming(http_server: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "note": {"type": "string"}},
    }
    pieces: list[str] = []
    completion = make(http_server(anthropic_handler())).complete(
        CHAT, schema=schema, on_token=pieces.append
    )
    assert pieces == TOOL_PARTS
    assert json.loads(completion.text) == {"value": 7, "note": "séance"}
    assert "séance" in completion.text  # not \u-escaped
    assert completion.finish_reason == "stop"


def test_length_finish_reason(http_server: Any) -> None:
    server = http_server(
        lambda r: Response.json(message([{"type": "text", "text": "cut"}], stop="max_tokens"))
    )
    assert make(server).complete(CHAT).finish_reason == "length"


def test_429_then_success_honours_retry_after(http_server: Any) -> None:
    calls = [0]

    def handle(request: Request) -> Response:
        calls[0] += 1
        if calls[0] == 1:
            return error(429, "rate_limit_error", "slow down", **{"retry-after": "0"})
        return Response.json(message([{"type": "text", "text": "ok"}]))

    server = http_server(handle)
    assert make(server).complete(CHAT).text == "ok"
    assert len(server.requests) == 2


def test_retry_after_too_long_gives_up_at_once(http_server: Any) -> None:
    server = http_server(
        lambda r: error(429, "rate_limit_error", "later", **{"retry-after": "600"})
    )
    with pytest.raises(ProviderUnavailable) as info:
        make(server).complete(CHAT)
    assert "rate limiting" in str(info.value)
    assert len(server.requests) == 1


def test_500_storm_gives_up(http_server: Any) -> None:
    server = http_server(lambda r: error(500, "api_error", "internal trouble"))
    with pytest.raises(ProviderUnavailable) as info:
        make(server).complete(CHAT)
    assert len(server.requests) == 3
    assert "internal trouble" in str(info.value)
    assert "Gave up after 3 attempts." in info.value.__notes__


def test_overloaded_529_is_retried(http_server: Any) -> None:
    calls = [0]

    def handle(request: Request) -> Response:
        calls[0] += 1
        if calls[0] < 3:
            return error(529, "overloaded_error", "Overloaded")
        return Response.json(message([{"type": "text", "text": "finally"}]))

    assert make(http_server(handle)).complete(CHAT).text == "finally"


def test_connection_refused(closed_port: int) -> None:
    provider = AnthropicProvider(
        "claude-test", api_key="k", base_url=f"http://127.0.0.1:{closed_port}", policy=FAST
    )
    with pytest.raises(ProviderUnavailable) as info:
        provider.complete(CHAT)
    assert "Cannot reach Anthropic's API" in str(info.value)


def test_unknown_model_is_model_not_found(http_server: Any) -> None:
    server = http_server(lambda r: error(404, "not_found_error", "model: claude-nope"))
    with pytest.raises(ModelNotFound) as info:
        make(server, model="claude-nope").complete(CHAT)
    assert "claude-nope" in str(info.value)
    assert len(server.requests) == 1


def test_bad_key_is_authentication_failed(http_server: Any) -> None:
    server = http_server(lambda r: error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(AuthenticationFailed) as info:
        make(server).complete(CHAT)
    assert "ANTHROPIC_API_KEY" in str(info.value)


def test_missing_key_is_authentication_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AuthenticationFailed) as info:
        AnthropicProvider("claude-test")
    assert "ANTHROPIC_API_KEY" in str(info.value)


def test_bad_request_is_not_retried(http_server: Any) -> None:
    server = http_server(lambda r: error(400, "invalid_request_error", "max_tokens too big"))
    with pytest.raises(ProviderError) as info:
        make(server).complete(CHAT)
    assert type(info.value) is ProviderError
    assert "max_tokens too big" in str(info.value)
    assert len(server.requests) == 1


def test_slow_server_times_out(http_server: Any) -> None:
    slow = Response.json(message([{"type": "text", "text": "late"}]))
    slow.delay = 1.5
    server = http_server(lambda r: slow)
    with pytest.raises(ProviderTimeout):
        make(server, RetryPolicy(timeout=0.3, attempts=2, base_delay=0.01)).complete(CHAT)
    assert len(server.requests) == 1


async def test_async_complete_and_stream(http_server: Any) -> None:
    server = http_server(anthropic_handler("async hello"))
    provider = make(server)
    assert (await provider.acomplete(CHAT)).text == "async hello"
    pieces: list[str] = []
    streamed = await provider.acomplete(CHAT, on_token=pieces.append)
    assert streamed.text == "Hello wörld"
    assert pieces == ["Hel", "lo ", "wörld"]


async def test_async_retry_and_errors(http_server: Any) -> None:
    calls = [0]

    def handle(request: Request) -> Response:
        calls[0] += 1
        if calls[0] == 1:
            return error(503, "api_error", "unavailable")
        return Response.json(message([{"type": "text", "text": "ok"}]))

    assert (await make(http_server(handle)).acomplete(CHAT)).text == "ok"
    missing = http_server(lambda r: error(404, "not_found_error", "no such model"))
    with pytest.raises(ModelNotFound):
        await make(missing).acomplete(CHAT)


def test_a_prefilled_reply_is_continued(http_server: Any) -> None:
    # the API continues a final assistant turn and refuses one ending in whitespace: it is sent
    # trimmed, and the reply is what follows the prefill as it was given
    server = http_server(anthropic_handler("\n    return a + b"))
    chat = [*CHAT, Message(role="assistant", content="def add(a, b):\n    ")]
    completion = make(server).complete(chat, max_tokens=16)
    turns = server.requests[0].json()["messages"]
    assert turns[-1] == {"role": "assistant", "content": "def add(a, b):"}
    assert completion.text == "return a + b"
    assert "def add(a, b):\n    " + completion.text == "def add(a, b):\n    return a + b"
