"""ask_structured and ask_code against the real local model (Qwen2.5-Coder 1.5B on the supervised
llama-server), reached through auto-resolution exactly as a user without a key or Ollama would."""

from __future__ import annotations

import ast

import pytest
from pydantic import BaseModel, Field
from required_components import local_model_missing

from selfheal.llm import Message, ask_code, ask_structured, resolve_model_string, resolve_provider

pytestmark = pytest.mark.local_model


needs_model = pytest.mark.skipif(bool(local_model_missing()), reason=local_model_missing() or "-")


class Plan(BaseModel):
    """A small test plan."""

    asserts: list[str] = Field(description="Python assert statements")


@pytest.fixture(scope="module")
def local() -> object:
    env = {"OLLAMA_HOST": "127.0.0.1:9"}  # nothing listens there: auto must pick the local model
    assert resolve_model_string(None, env=env).startswith("local:")
    return resolve_provider(None, env=env)


@needs_model
def test_structured_reply_from_the_real_model(local: object) -> None:
    messages = [
        Message(role="system", content="You write Python tests. Reply with JSON only."),
        Message(
            role="user",
            content="Write 2 assert statements testing median([1, 2, 3]) == 2. "
            'Reply as {"asserts": ["assert ...", "assert ..."]}.',
        ),
    ]
    reply = ask_structured(local, messages, Plan, max_tokens=96)  # type: ignore[arg-type]
    assert reply.value.asserts
    assert all(isinstance(a, str) and a.strip() for a in reply.value.asserts)
    assert reply.completions[-1].model.startswith("local:")


@needs_model
def test_code_reply_from_the_real_model(local: object) -> None:
    messages = [
        Message(
            role="user",
            content="Write a Python function `median(xs)` that returns the median of a list "
            "of numbers. Reply with one ```python block and nothing else.",
        )
    ]
    reply = ask_code(local, messages, entry_point="median", max_tokens=200)  # type: ignore[arg-type]
    tree = ast.parse(reply.code)
    assert any(isinstance(node, ast.FunctionDef) and node.name == "median" for node in tree.body)
