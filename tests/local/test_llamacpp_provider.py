"""LlamaCppProvider on the real default model (``make install`` puts it in place).

Kept few and short: every generation is capped at a handful of tokens.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import jsonschema
import pytest

from selfheal.errors import ConfigError
from selfheal.llm.base import Message, Provider

llama_cpp = pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed (make install)"
)

from selfheal.llm.llamacpp import LlamaCppProvider  # noqa: E402
from selfheal.models import find_model  # noqa: E402

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def provider() -> LlamaCppProvider:
    if find_model() is None:
        pytest.skip("the default model is not installed (python -m selfheal.models install)")
    p = LlamaCppProvider.from_default(progress=False, n_ctx=2048)
    p.load()
    return p


def user(text: str) -> list[Message]:
    return [
        Message(role="system", content="You are a concise Python expert."),
        Message(role="user", content=text),
    ]


def test_is_a_provider(provider: LlamaCppProvider) -> None:
    assert isinstance(provider, Provider)
    assert provider.model_id == "local:qwen2.5-coder-1.5b-instruct-q4_k_m"


def test_generates_code_and_reports_usage(provider: LlamaCppProvider) -> None:
    streamed: list[str] = []
    c = provider.complete(
        user("Write a Python function is_even(n) that returns True when n is even. Code only."),
        max_tokens=60,
        on_token=streamed.append,
    )
    assert "def is_even" in c.text
    assert "% 2" in c.text
    assert "".join(streamed) == c.text
    assert c.prompt_tokens > 20
    assert 0 < c.completion_tokens <= 60
    assert c.model == "local:qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert c.time_to_first_token is not None and 0 < c.time_to_first_token <= c.latency
    assert c.finish_reason in ("stop", "length")


def test_max_tokens_caps_generation(provider: LlamaCppProvider) -> None:
    c = provider.complete(user("Count from 1 to 100, comma separated."), max_tokens=8)
    assert c.completion_tokens == 8
    assert c.finish_reason == "length"


def test_stop_sequence_cuts_the_reply(provider: LlamaCppProvider) -> None:
    msgs = user("Count from 1 to 20, comma separated, nothing else.")
    full = provider.complete(msgs, max_tokens=30)
    assert "7" in full.text and "9" in full.text
    cut = provider.complete(msgs, max_tokens=30, stop=["8"])
    assert cut.finish_reason == "stop"
    assert "8" not in cut.text
    assert "7" in cut.text
    assert full.text.startswith(cut.text)


def test_schema_constrained_json_validates(provider: LlamaCppProvider) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "args": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["function", "class"]},
        },
        "required": ["name", "args", "kind"],
        "additionalProperties": False,
    }
    c = provider.complete(
        user("Describe the Python function `def area(width, height)` as JSON."),
        max_tokens=80,
        schema=schema,
    )
    data = json.loads(c.text)
    jsonschema.validate(data, schema)
    assert data["name"] == "area"
    assert data["kind"] == "function"


def test_count_tokens_uses_the_real_tokenizer(provider: LlamaCppProvider) -> None:
    assert provider.count_tokens("") == 0
    assert provider.count_tokens("def") == 1
    n = provider.count_tokens("def add(a, b):\n    return a + b\n")
    assert 8 <= n <= 20


def test_two_threads_get_coherent_answers(provider: LlamaCppProvider) -> None:
    results: dict[str, str] = {}

    def ask(key: str, question: str) -> None:
        results[key] = provider.complete(user(question), max_tokens=12).text

    threads = [
        threading.Thread(target=ask, args=("fr", "What is the capital of France? One word.")),
        threading.Thread(target=ask, args=("jp", "What is the capital of Japan? One word.")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert "Paris" in results["fr"]
    assert "Tokyo" in results["jp"]


async def test_async_does_not_block_the_loop(provider: LlamaCppProvider) -> None:
    ticks = 0
    seen_on_loop: list[bool] = []
    loop_thread = threading.get_ident()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.create_task(ticker())
    c = await provider.acomplete(
        user("Write a Python function square(x). Code only."),
        max_tokens=24,
        on_token=lambda piece: seen_on_loop.append(threading.get_ident() == loop_thread),
    )
    task.cancel()
    assert "def square" in c.text
    # generation takes well over a second on CPU; a blocked loop would not tick at all
    assert ticks >= 10
    assert seen_on_loop and all(seen_on_loop)


async def test_cancelling_acomplete_frees_the_model(provider: LlamaCppProvider) -> None:
    task = asyncio.create_task(
        provider.acomplete(user("Write a long essay about sorting algorithms."), max_tokens=400)
    )
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the worker stops at its next token, so the next call runs promptly and correctly
    c = await asyncio.wait_for(
        provider.acomplete(user("What is 2 + 3? Answer with the number only."), max_tokens=4),
        timeout=60,
    )
    assert "5" in c.text


def test_prompt_longer_than_context_is_a_config_error(provider: LlamaCppProvider) -> None:
    with pytest.raises(ConfigError, match="context holds"):
        provider.complete(user("word " * 5000), max_tokens=4)


def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        LlamaCppProvider(tmp_path / "nope.gguf")
