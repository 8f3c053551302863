"""OpenAICompatible, driven by the real ``openai`` SDK against a fake OpenAI-compatible server
on 127.0.0.1 that speaks the wire format (JSON errors, SSE chunks, a final usage chunk with
llama.cpp's ``timings``): streaming, usage, schema, seeds, ``complete_many`` concurrency and
the error mapping. No internet, no model, no timed assertions."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from llm_fakes import FakeServer, Request, Response

from selfheal.errors import (
    AuthenticationFailed,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from selfheal.llm import Message, OpenAICompatible, RetryPolicy, acomplete_many, complete_many
from selfheal.llm.mock import MockProvider

MESSAGES = [
    Message(role="system", content="You write Python."),
    Message(role="user", content="Write add(a, b)."),
]


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def sse(
    pieces: list[str],
    *,
    finish: str = "stop",
    prompt_tokens: int = 21,
    cached: int = 5,
    timings: bool = True,
) -> Response:
    """A streamed chat completion as llama-server sends it."""
    events: list[dict[str, Any]] = [chunk("")]
    events += [chunk(p) for p in pieces]
    events.append(chunk(finish=finish))
    final: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_tokens + len(pieces),
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }
    if timings:
        final["timings"] = {"cache_n": cached, "prompt_n": prompt_tokens - cached}
    events.append(final)
    body = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
    return Response(status=200, body=body, headers={"content-type": "text/event-stream"})


def error(status: int, message: str, type_: str = "error", **headers: str) -> Response:
    return Response.json(
        {"error": {"code": status, "message": message, "type": type_}}, status, **headers
    )


def provider(server: FakeServer, **kwargs: Any) -> OpenAICompatible:
    kwargs.setdefault("policy", RetryPolicy(timeout=10.0, attempts=3))
    return OpenAICompatible(model="m", base_url=server.url + "/v1", api_key="k-test", **kwargs)


def test_complete_streams_and_reports_usage(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: sse(["def add", "(a, b):", "\n    return a + b"]))
    p = provider(server)
    tokens: list[str] = []
    c = p.complete(
        MESSAGES, max_tokens=64, temperature=0.2, stop=["\n\n"], on_token=tokens.append, seed=3
    )
    assert c.text == "def add(a, b):\n    return a + b"
    assert tokens == ["def add", "(a, b):", "\n    return a + b"]
    assert (c.prompt_tokens, c.completion_tokens, c.cached_tokens) == (21, 3, 5)
    assert c.finish_reason == "stop"
    assert c.model == p.model_id == "openai:m"
    assert c.time_to_first_token is not None and c.latency >= c.time_to_first_token
    request = server.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k-test"
    body = request.json()
    assert body["model"] == "m"
    assert body["messages"] == [{"role": m.role, "content": m.content} for m in MESSAGES]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["temperature"], body["stop"], body["seed"]) == (
        64,
        0.2,
        ["\n\n"],
        3,
    )
    assert "response_format" not in body and "cache_prompt" not in body


def test_local_server_requests_ask_for_the_prompt_cache(
    http_server: Callable[..., FakeServer],
) -> None:
    server = http_server(lambda r: sse(["ok"]))
    provider(server, local=True).complete(MESSAGES, max_tokens=4)
    assert server.requests[-1].json()["cache_prompt"] is True


def test_finish_reason_length_and_missing_usage(http_server: Callable[..., FakeServer]) -> None:
    def handler(r: Request) -> Response:
        events = [chunk("abc"), chunk(finish="length")]
        body = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
        return Response(status=200, body=body, headers={"content-type": "text/event-stream"})

    c = provider(http_server(handler)).complete(MESSAGES, max_tokens=1)
    assert c.text == "abc" and c.finish_reason == "length"
    assert c.prompt_tokens > 0 and c.completion_tokens > 0  # estimated when the server is silent
    assert c.cached_tokens == 0


def test_schema_goes_to_response_format(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: sse(['{"name": "Bob"}']))
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    c = provider(server).complete(MESSAGES, schema=schema)
    assert json.loads(c.text) == {"name": "Bob"}
    fmt = server.requests[-1].json()["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == schema


def _concurrent_server(
    http_server: Callable[..., FakeServer], n: int
) -> tuple[FakeServer, list[int]]:
    """Answers ``answer <seed>`` only once ``n`` requests are in flight at the same time
    (a barrier: sequential requests would break it and get a 500)."""
    barrier = threading.Barrier(n, timeout=20)
    seeds: list[int] = []
    lock = threading.Lock()

    def handler(r: Request) -> Response:
        seed = int(r.json()["seed"])
        with lock:
            seeds.append(seed)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return error(500, "requests did not overlap")
        # the lowest seed finishes last, so arrival order differs from index order
        return Response(
            status=200,
            body=sse([f"answer {seed}"]).body,
            headers={"content-type": "text/event-stream"},
            chunk_delay=0.02 * (n - (seed % n)),
        )

    return http_server(handler), seeds


def test_complete_many_runs_n_requests_at_once(http_server: Callable[..., FakeServer]) -> None:
    server, seeds = _concurrent_server(http_server, 4)
    p = provider(server, policy=RetryPolicy(timeout=30.0, attempts=1))
    results = p.complete_many(MESSAGES, n=4, max_tokens=16, temperature=0.8, seed=100)
    assert sorted(seeds) == [100, 101, 102, 103]
    assert [c.text for c in results] == [f"answer {100 + i}" for i in range(4)]
    assert all(r.json()["temperature"] == 0.8 for r in server.requests)


def test_complete_many_without_seed_still_sends_distinct_seeds(
    http_server: Callable[..., FakeServer],
) -> None:
    server, seeds = _concurrent_server(http_server, 3)
    results = complete_many(provider(server), MESSAGES, n=3, temperature=0.8, max_tokens=8)
    assert len(set(seeds)) == 3
    assert [c.text for c in results] == [f"answer {s}" for s in sorted(seeds)]


async def test_acomplete_many_from_the_base_helper(http_server: Callable[..., FakeServer]) -> None:
    server, _seeds = _concurrent_server(http_server, 4)
    results = await acomplete_many(provider(server), MESSAGES, n=4, max_tokens=8, seed=7)
    assert [c.text for c in results] == [f"answer {7 + i}" for i in range(4)]


async def test_sync_call_inside_a_running_event_loop(
    http_server: Callable[..., FakeServer],
) -> None:
    """As in Jupyter: the blocking API is called while an event loop runs in this thread."""
    server = http_server(lambda r: sse(["fine"]))
    assert provider(server).complete(MESSAGES).text == "fine"


def test_a_provider_awaited_on_other_loops_runs_on_selfheals_loop(
    http_server: Callable[..., FakeServer],
) -> None:
    """Awaited on loops of the caller's own (two ``asyncio.run``, as two notebook cells) and
    called through its blocking twin, a provider runs each request on selfheal's one loop
    (where its one HTTP client lives): its streamed fragments arrive in that loop's thread."""
    server = http_server(lambda r: sse(["fi", "ne"]))
    p = provider(server)
    threads: list[str] = []

    def on_token(piece: str) -> None:
        threads.append(threading.current_thread().name)

    for _ in range(2):
        assert asyncio.run(p.acomplete(MESSAGES, on_token=on_token)).text == "fine"
    assert p.complete(MESSAGES, on_token=on_token).text == "fine"
    assert len(threads) == 6 and set(threads) == {"selfheal-loop"}


async def test_generic_providers_get_n_concurrent_acomplete_calls() -> None:
    started = 0
    both = asyncio.Event()

    class Slow:
        model_id = "fake:slow"

        def complete(self, messages: Any, **kw: Any) -> Any:
            raise AssertionError("acomplete_many must use acomplete")

        async def acomplete(self, messages: Any, **kw: Any) -> Any:
            nonlocal started
            from selfheal.llm import Completion

            started += 1
            if started == 2:
                both.set()
            await asyncio.wait_for(both.wait(), 10)  # only returns when both run at once
            return Completion(text=f"t{kw['temperature']}", model="fake:slow")

    results = await acomplete_many(Slow(), MESSAGES, n=2, temperature=0.5, max_tokens=8)  # type: ignore[arg-type]
    assert [c.text for c in results] == ["t0.5", "t0.5"]


def test_mock_complete_many_is_sequential_and_in_order() -> None:
    mock = MockProvider({"generator": ["a", "b", "c", "d"]})
    results = complete_many(mock, MESSAGES, n=3, temperature=0.8, max_tokens=5, role="generator")
    assert [c.text for c in results] == ["a", "b", "c"]
    assert [c.reply for c in mock.calls] == ["a", "b", "c"]
    assert asyncio.run(acomplete_many(mock, MESSAGES, n=1, role="generator"))[0].text == "d"


# ------------------------------------------------------------------------------- errors


def test_connection_refused_is_provider_unavailable(closed_port: int) -> None:
    p = OpenAICompatible(
        model="m",
        base_url=f"http://127.0.0.1:{closed_port}/v1",
        policy=RetryPolicy(timeout=5.0, attempts=1),
    )
    with pytest.raises(ProviderUnavailable) as info:
        p.complete(MESSAGES)
    assert "Cannot reach" in str(info.value) and "selfheal serve" in str(info.value)


def test_bad_key_is_authentication_failed(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: error(401, "Invalid API Key", "authentication_error"))
    with pytest.raises(AuthenticationFailed) as info:
        provider(server).complete(MESSAGES)
    assert "Invalid API Key" in str(info.value) and "OPENAI_API_KEY" in str(info.value)
    assert len(server.requests) == 1  # not retried


def test_unknown_model_is_model_not_found(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: error(404, "model 'm' not found", "not_found_error"))
    with pytest.raises(ModelNotFound) as info:
        provider(server).complete(MESSAGES)
    assert "/v1/models" in str(info.value)


def test_context_too_long_says_what_to_do(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(
        lambda r: error(
            400,
            "request (5030 tokens) exceeds the available context size (4096 tokens)",
            "exceed_context_size_error",
        )
    )
    with pytest.raises(ProviderError) as info:
        provider(server, local=True).complete(MESSAGES)
    assert type(info.value) is ProviderError
    message = str(info.value)
    assert "does not fit" in message and "SELFHEAL_LOCAL_CTX" in message
    assert len(server.requests) == 1


def test_rate_limit_then_success_is_retried_by_the_sdk(
    http_server: Callable[..., FakeServer],
) -> None:
    answers = [error(429, "slow down", **{"retry-after-ms": "10"}), sse(["done"])]
    server = http_server(lambda r: answers.pop(0))
    assert provider(server).complete(MESSAGES).text == "done"
    assert len(server.requests) == 2


def test_rate_limit_that_never_ends_gives_up(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: error(429, "slow down", **{"retry-after-ms": "5"}))
    with pytest.raises(ProviderUnavailable) as info:
        provider(server, policy=RetryPolicy(attempts=2)).complete(MESSAGES)
    assert "rate limiting" in str(info.value)
    assert len(server.requests) == 2


def test_server_error_is_unavailable(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: error(500, "boom", **{"retry-after-ms": "5"}))
    with pytest.raises(ProviderUnavailable) as info:
        provider(server, policy=RetryPolicy(attempts=2)).complete(MESSAGES)
    assert "HTTP 500" in str(info.value)


def test_silent_server_times_out(http_server: Callable[..., FakeServer]) -> None:
    def handler(r: Request) -> Response:
        return Response(
            status=200,
            body=[f"data: {json.dumps(chunk('a'))}\n\n".encode(), b"data: [DONE]\n\n"],
            headers={"content-type": "text/event-stream"},
            chunk_delay=1.5,
        )

    p = provider(http_server(handler), policy=RetryPolicy(timeout=0.3, attempts=1))
    with pytest.raises(ProviderTimeout) as info:
        p.complete(MESSAGES)
    assert "sent nothing for 0.3 s" in str(info.value)


def test_error_event_inside_the_stream(http_server: Callable[..., FakeServer]) -> None:
    def handler(r: Request) -> Response:
        body = [
            f"data: {json.dumps(chunk('a'))}\n\n".encode(),
            f"data: {json.dumps({'error': {'message': 'slot crashed', 'code': 500}})}\n\n".encode(),
        ]
        return Response(status=200, body=body, headers={"content-type": "text/event-stream"})

    with pytest.raises(ProviderError) as info:
        provider(http_server(handler)).complete(MESSAGES)
    assert "slot crashed" in str(info.value)


def test_stream_cut_without_finish_reason(http_server: Callable[..., FakeServer]) -> None:
    def handler(r: Request) -> Response:
        body = [f"data: {json.dumps(chunk('def f'))}\n\n".encode()]  # then the server hangs up
        return Response(status=200, body=body, headers={"content-type": "text/event-stream"})

    with pytest.raises(ProviderUnavailable) as info:
        provider(http_server(handler)).complete(MESSAGES)
    assert "cut off" in str(info.value) and "without a finish_reason" in str(info.value)


def test_needs_a_model_name() -> None:
    from selfheal.errors import ConfigError

    with pytest.raises(ConfigError):
        OpenAICompatible(base_url="http://127.0.0.1:1/v1")


def test_env_gives_url_and_key(
    http_server: Callable[..., FakeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = http_server(lambda r: sse(["x"]))
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    from selfheal.llm import build_provider

    p = build_provider("openai:served-name")
    assert p.complete(MESSAGES).text == "x"
    assert server.requests[-1].headers["authorization"] == "Bearer from-env"
    assert server.requests[-1].json()["model"] == "served-name"


PREFILLED = [*MESSAGES, Message(role="assistant", content="def add(a, b):\n")]


def test_llama_server_continues_a_prefilled_reply(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: sse(["    return a + b"]))
    c = provider(server, local=True).complete(PREFILLED, max_tokens=16)
    sent = server.requests[-1].json()["messages"]
    assert sent[-1] == {"role": "assistant", "content": "def add(a, b):\n"}  # sent as it is
    assert c.text == "    return a + b"  # the continuation alone


def test_other_servers_get_the_prefill_as_an_instruction(
    http_server: Callable[..., FakeServer],
) -> None:
    # a server that answers a final assistant message: the model is asked to begin with it
    server = http_server(lambda r: sse(["def add(a, b):\n", "    return a + b"]))
    p = provider(server)
    assert p.prefill == "instruct"
    c = p.complete(PREFILLED, max_tokens=16)
    sent = server.requests[-1].json()["messages"]
    assert [m["role"] for m in sent] == [m.role for m in MESSAGES] + ["user"]
    assert sent[-1]["content"].endswith("def add(a, b):\n")
    assert c.text == "    return a + b"  # the same continuation as llama-server's
    # a server told it continues (vLLM with continue_final_message) gets the message as it is
    provider(server, prefill="continue").complete(PREFILLED, max_tokens=16)
    assert server.requests[-1].json()["messages"][-1]["role"] == "assistant"
