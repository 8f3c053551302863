"""The Ollama provider with the real ``ollama`` client against a fake server speaking the
Ollama wire format (/api/chat JSON and NDJSON streaming, /api/tags) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from llm_fakes import FakeServer, Request, Response

from selfheal.errors import ModelNotFound, ProviderTimeout, ProviderUnavailable
from selfheal.llm.ask import ask_structured
from selfheal.llm.base import Message, Provider
from selfheal.llm.ollama import OllamaProvider, context_size
from selfheal.llm.retry import RetryPolicy

FAST = RetryPolicy(timeout=5.0, attempts=3, base_delay=0.01, max_delay=0.05)
HELLO = [Message(role="system", content="Be brief."), Message(role="user", content="Say hi")]


def chat_reply(text: str, *, prompt: int = 11, completion: int = 3, reason: str = "stop") -> Any:
    return {
        "model": "m",
        "created_at": "2026-11-22T00:00:00Z",
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": reason,
        "prompt_eval_count": prompt,
        "eval_count": completion,
    }


def ndjson(pieces: list[str]) -> list[bytes]:
    lines = [
        json.dumps(
            {"model": "m", "message": {"role": "assistant", "content": p}, "done": False}
        ).encode()
        + b"\n"
        for p in pieces
    ]
    final = chat_reply("", prompt=7, completion=len(pieces))
    return [*lines, json.dumps(final).encode() + b"\n"]


def ollama_handler(text: str = "Hi!") -> Callable[[Request], Response]:
    def handle(request: Request) -> Response:
        if request.path == "/api/tags":
            return Response.json({"models": [{"name": "m", "model": "m"}]})
        if request.path != "/api/chat":
            return Response(status=404)
        body = request.json()
        if body.get("stream"):
            return Response(
                body=ndjson(["Hel", "lo ", "wörld"]),
                headers={"content-type": "application/x-ndjson"},
                chunk_delay=0.01,
            )
        return Response.json(chat_reply(text))

    return handle


def make(server: FakeServer, policy: RetryPolicy = FAST, **kwargs: Any) -> OllamaProvider:
    return OllamaProvider("m", host=server.url, policy=policy, **kwargs)


def test_is_a_provider(http_server: Any) -> None:
    assert isinstance(make(http_server(ollama_handler())), Provider)


def test_happy_path(http_server: Any) -> None:
    server = http_server(ollama_handler("Hi there"))
    completion = make(server).complete(HELLO, max_tokens=50, temperature=0.2, stop=["\n\n"])
    assert completion.text == "Hi there"
    assert (completion.prompt_tokens, completion.completion_tokens) == (11, 3)
    assert completion.finish_reason == "stop"
    assert completion.model == "ollama:m"
    assert completion.latency > 0
    body = server.requests[0].json()
    assert body["model"] == "m"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hi"},
    ]
    assert body["stream"] is False
    assert body["options"] == {
        "num_ctx": 2048,
        "temperature": 0.2,
        "num_predict": 50,
        "stop": ["\n\n"],
    }
    assert "format" not in body or body["format"] is None


def test_streaming(http_server: Any) -> None:
    server = http_server(ollama_handler())
    pieces: list[str] = []
    completion = make(server).complete(HELLO, on_token=pieces.append)
    assert pieces == ["Hel", "lo ", "wörld"]
    assert completion.text == "Hello wörld"
    assert completion.completion_tokens == 3
    assert completion.prompt_tokens == 7
    assert completion.time_to_first_token is not None
    assert server.requests[0].json()["stream"] is True


def test_structured_output_sends_schema_as_format(http_server: Any) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    server = http_server(ollama_handler('{"value": 42}'))
    reply = ask_structured(make(server), HELLO, Answer)
    assert reply.value == Answer(value=42)
    assert server.requests[0].json()["format"] == Answer.model_json_schema()


def test_num_ctx_fits_long_prompts_and_never_shrinks(http_server: Any) -> None:
    server = http_server(ollama_handler())
    provider = make(server)
    long_prompt = [Message(role="user", content="x" * 35_000)]  # ~10k tokens estimated
    provider.complete(long_prompt, max_tokens=1000)
    provider.complete(HELLO, max_tokens=10)
    sizes = [r.json()["options"]["num_ctx"] for r in server.requests]
    assert sizes == [16384, 16384]
    assert context_size(100, 100) == 2048
    assert context_size(3000, 1024) == 8192


def test_429_then_success(http_server: Any) -> None:
    calls = [0]

    def handle(request: Request) -> Response:
        calls[0] += 1
        if calls[0] == 1:
            return Response.json({"error": "too many requests"}, status=429)
        return Response.json(chat_reply("ok"))

    server = http_server(handle)
    assert make(server).complete(HELLO).text == "ok"
    assert len(server.requests) == 2


def test_500_storm_gives_up(http_server: Any) -> None:
    server = http_server(lambda r: Response.json({"error": "boom"}, status=500))
    with pytest.raises(ProviderUnavailable) as info:
        make(server).complete(HELLO)
    assert len(server.requests) == 3  # FAST.attempts
    assert "HTTP 500" in str(info.value)
    assert "boom" in str(info.value)
    assert "Gave up after 3 attempts." in info.value.__notes__


def test_connection_refused(closed_port: int) -> None:
    provider = OllamaProvider("m", host=f"http://127.0.0.1:{closed_port}", policy=FAST)
    with pytest.raises(ProviderUnavailable) as info:
        provider.complete(HELLO)
    assert "ollama serve" in str(info.value)
    assert info.value.provider == "ollama"


def test_model_not_found(http_server: Any) -> None:
    server = http_server(
        lambda r: Response.json({"error": "model 'nope:7b' not found"}, status=404)
    )
    provider = OllamaProvider("nope:7b", host=server.url, policy=FAST)
    with pytest.raises(ModelNotFound) as info:
        provider.complete(HELLO)
    assert "ollama pull nope:7b" in str(info.value)
    assert len(server.requests) == 1  # not retried


def test_model_not_found_while_streaming(http_server: Any) -> None:
    server = http_server(
        lambda r: Response.json({"error": "model 'nope:7b' not found"}, status=404)
    )
    provider = OllamaProvider("nope:7b", host=server.url, policy=FAST)
    with pytest.raises(ModelNotFound):
        provider.complete(HELLO, on_token=lambda s: None)


def test_slow_server_times_out(http_server: Any) -> None:
    server = http_server(lambda r: _slow())
    policy = RetryPolicy(timeout=0.3, attempts=3, base_delay=0.01)
    with pytest.raises(ProviderTimeout) as info:
        make(server, policy).complete(HELLO)
    assert "0.3 s" in str(info.value)
    assert len(server.requests) == 1  # timeouts are not retried by default


def _slow() -> Response:
    return Response(body=json.dumps(chat_reply("late")).encode(), delay=1.5)


async def test_async_complete_and_stream(http_server: Any) -> None:
    server = http_server(ollama_handler("async hi"))
    provider = make(server)
    completion = await provider.acomplete(HELLO)
    assert completion.text == "async hi"
    pieces: list[str] = []
    streamed = await provider.acomplete(HELLO, on_token=pieces.append)
    assert streamed.text == "Hello wörld"
    assert pieces == ["Hel", "lo ", "wörld"]


async def test_async_errors_map_the_same(http_server: Any, closed_port: int) -> None:
    server = http_server(lambda r: Response.json({"error": "model 'm' not found"}, status=404))
    with pytest.raises(ModelNotFound):
        await make(server).acomplete(HELLO)
    refused = OllamaProvider("m", host=f"http://127.0.0.1:{closed_port}", policy=FAST)
    with pytest.raises(ProviderUnavailable):
        await refused.acomplete(HELLO)


async def test_async_call_can_be_cancelled(http_server: Any) -> None:
    arrived = threading.Event()

    def handler(r: Any) -> Response:
        arrived.set()
        return Response(body=b"{}", delay=3.0)

    server = http_server(handler)
    provider = make(server, RetryPolicy(timeout=10.0))
    task = asyncio.create_task(provider.acomplete(HELLO))
    # cancel once the request is in flight (the server has it), not after a guessed pause
    assert await asyncio.to_thread(arrived.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=1.0)
    assert task.cancelled()


def test_list_models(http_server: Any) -> None:
    assert make(http_server(ollama_handler())).list_models() == ["m"]


def test_a_prefilled_reply_goes_as_the_final_assistant_message(http_server: Any) -> None:
    # Ollama's /api/chat continues a final assistant message through the model's template
    server = http_server(ollama_handler(" there"))
    chat = [*HELLO, Message(role="assistant", content="Hi")]
    completion = make(server).complete(chat, max_tokens=8)
    assert server.requests[0].json()["messages"][-1] == {"role": "assistant", "content": "Hi"}
    assert completion.text == " there"
