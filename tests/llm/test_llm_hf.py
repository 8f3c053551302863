"""The transformers provider on a tiny Llama model built inside the test (no download).

The model's output head is zeroed, so every logit ties and greedy decoding always picks
token 0: output is predictable although the weights are otherwise random.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from tiny_hf import build_model, cancel_then_ask  # noqa: E402

from selfheal.errors import ModelNotFound  # noqa: E402
from selfheal.llm.base import Message, Provider  # noqa: E402
from selfheal.llm.hf import HFProvider, pick_device  # noqa: E402
from selfheal.llm.tokens import count_tokens  # noqa: E402


@pytest.fixture(scope="module")
def word_model(tmp_path_factory: pytest.TempPathFactory) -> HFProvider:
    folder = build_model(tmp_path_factory.mktemp("tiny-hello"), first_token="hello")
    return HFProvider(str(folder), device="cpu")


@pytest.fixture(scope="module")
def eos_model(tmp_path_factory: pytest.TempPathFactory) -> HFProvider:
    folder = build_model(tmp_path_factory.mktemp("tiny-eos"), first_token="<eos>")
    return HFProvider(str(folder), device="cpu")


CHAT = [Message(role="system", content="add"), Message(role="user", content="def add ( a b )")]


def test_loads_and_is_a_provider(word_model: HFProvider) -> None:
    assert isinstance(word_model, Provider)
    assert word_model.model_id.startswith("hf:")
    assert word_model.device == "cpu"
    assert word_model.quantized is False
    assert pick_device() == "cpu"  # this machine has no GPU


def test_chat_template_is_applied(word_model: HFProvider) -> None:
    prompt = word_model.render_prompt(CHAT)
    assert prompt == "<|system|> add <|user|> def add ( a b ) <|assistant|> "


def test_counts_tokens_with_real_tokenizer(word_model: HFProvider) -> None:
    assert word_model.count_tokens("def add ( a b )") == 6
    assert count_tokens("def add ( a b )", word_model) == 6  # not the len/3.5 estimate (5)


def test_generates_until_max_tokens(word_model: HFProvider) -> None:
    completion = word_model.complete(CHAT, max_tokens=4)
    assert completion.text.split() == ["hello"] * 4
    assert completion.completion_tokens == 4
    assert completion.prompt_tokens == word_model.count_tokens(word_model.render_prompt(CHAT))
    assert completion.finish_reason == "length"
    assert completion.model == word_model.model_id


def test_eos_stops_generation(eos_model: HFProvider) -> None:
    completion = eos_model.complete(CHAT, max_tokens=8)
    assert completion.text == ""
    assert completion.completion_tokens == 1
    assert completion.finish_reason == "stop"


def test_streaming(word_model: HFProvider) -> None:
    pieces: list[str] = []
    completion = word_model.complete(CHAT, max_tokens=3, on_token=pieces.append)
    assert pieces
    assert "".join(pieces).split() == completion.text.split() == ["hello"] * 3
    assert completion.time_to_first_token is not None


def test_stop_strings(word_model: HFProvider) -> None:
    completion = word_model.complete(CHAT, max_tokens=10, stop=["hello"])
    assert completion.text.strip() == ""
    assert completion.completion_tokens < 10
    assert completion.finish_reason == "stop"


def test_stop_string_not_seen_still_reports_length(word_model: HFProvider) -> None:
    completion = word_model.complete(CHAT, max_tokens=3, stop=["world"])
    assert completion.text.split() == ["hello"] * 3
    assert completion.finish_reason == "length"


async def test_async(word_model: HFProvider) -> None:
    completion = await word_model.acomplete(CHAT, max_tokens=2)
    assert completion.text.split() == ["hello", "hello"]


async def test_async_cancel_stops_the_worker(word_model: HFProvider) -> None:
    task = asyncio.create_task(word_model.acomplete(CHAT, max_tokens=200_000))
    # The model lock is released once the worker sees the cancellation.
    completion = await cancel_then_ask(word_model, task, CHAT, max_tokens=1)
    assert completion.completion_tokens == 1


def test_missing_folder_is_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound) as info:
        HFProvider(str(tmp_path / "nothing-here"), device="cpu")
    assert "nothing-here" in str(info.value)


def test_router_builds_hf(word_model: HFProvider, tmp_path: Path) -> None:
    from selfheal.llm.router import Router

    folder = build_model(tmp_path / "routed", first_token="world")
    router = Router(default=f"hf:{folder}", env={})
    provider: Any = router.for_role("generator")
    assert router.for_role("critic") is provider
    assert provider.complete(CHAT, max_tokens=2).text.split() == ["world", "world"]
