"""A tiny transformers model and word-level tokenizer built in the test (no download)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import tokenizers
import torch
import transformers

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
WORDS = ["def", "return", "x", "add", "a", "b", "+", "(", ")", ":", "hello", "world"]


def build_model(folder: Path, *, first_token: str, sampling: bool = False) -> Path:
    """Save a 2-layer model and a word-level tokenizer whose token 0 is ``first_token``: a
    Llama whose output head is zeroed (every logit ties, greedy decoding always picks token
    0), or with ``sampling`` a Qwen2 (the local model's architecture) with its random head
    kept, so sampled answers differ."""
    specials = ["<eos>", "<pad>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>"]
    ordered = [first_token] + [t for t in [*specials, *WORDS] if t != first_token]
    vocab = {token: i for i, token in enumerate(ordered)}
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    core.decoder = tokenizers.decoders.WordPiece(prefix="##", cleanup=False)
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"],
    )
    tok.chat_template = TEMPLATE
    tok.save_pretrained(folder)
    shape = dict(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        eos_token_id=vocab["<eos>"],
        pad_token_id=vocab["<pad>"],
        bos_token_id=None,
    )
    torch.manual_seed(0)
    if sampling:
        model: Any = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape))
        with torch.no_grad():
            model.lm_head.weight.zero_()
    model.save_pretrained(folder)
    return folder


async def cancel_then_ask(
    provider: Any, task: asyncio.Task[Any], messages: list[Any], max_tokens: int
) -> Any:
    """Cancel ``task`` (a generation in flight) after 0.3 s, check it raised CancelledError,
    and ask ``provider`` again: once the worker saw the cancellation the model is free, so the
    new answer comes within 30 s."""
    await asyncio.sleep(0.3)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the cancelled task finished")
    return await asyncio.wait_for(provider.acomplete(messages, max_tokens=max_tokens), timeout=30)
