"""The provider against the real llama-server with the real local model (marker local_model):
complete, complete_many on parallel slots, schema-constrained JSON, the slot prompt cache (told
by the server's own token counts, not by timing), kill -9 mid-request, and no orphan."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any

import jsonschema
import psutil
import pytest
from processes import descendants_named
from required_components import local_model_missing

from selfheal.errors import ProviderError, ProviderUnavailable
from selfheal.llm import Message, build_provider, complete_many
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import server_settings

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(bool(local_model_missing()), reason=local_model_missing() or "-"),
]

CODE = [
    Message(role="system", content="You write Python. Reply with one ```python block only."),
    Message(role="user", content="Write a function add(a, b) that returns a + b."),
]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A private server for this module: 4 slots of 2048 tokens."""
    local = LocalServer(server_settings(slots=4, ctx_per_slot=2048, progress=False))
    yield local
    pid = local.pid
    local.stop()
    if pid is not None:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.fixture(scope="module")
def provider(server: LocalServer) -> LocalProvider:
    return LocalProvider(
        model=server.settings.alias,
        server=server,
        model_id=f"local:{server.settings.alias}",
    )


def test_complete_writes_code_and_reports_usage(provider: LocalProvider) -> None:
    pieces: list[str] = []
    c = provider.complete(CODE, max_tokens=64, on_token=pieces.append)
    assert "def add" in c.text and "return" in c.text
    assert "".join(pieces) == c.text
    assert c.prompt_tokens > 20 and 0 < c.completion_tokens <= 64
    assert c.finish_reason == "stop" and c.time_to_first_token is not None
    assert c.model.startswith("local:qwen2.5-coder")


def test_max_tokens_and_stop(provider: LocalProvider) -> None:
    c = provider.complete(CODE, max_tokens=5)
    assert c.completion_tokens == 5 and c.finish_reason == "length"
    stopped = provider.complete(CODE, max_tokens=64, stop=["def"])
    assert "def" not in stopped.text


def test_complete_many_on_parallel_slots(provider: LocalProvider) -> None:
    messages = [Message(role="user", content="Name one fruit. One word only.")]
    results = provider.complete_many(messages, n=4, max_tokens=8, temperature=0.9, seed=11)
    again = complete_many(provider, messages, n=4, max_tokens=8, temperature=0.9, seed=11)
    # the module-level helper uses the provider's own complete_many: 4 samples each, every one
    # the single word asked for (a trailing full stop allowed), not an empty or cut-off reply
    for batch in (results, again):
        words = [r.text.strip().rstrip(".!").strip() for r in batch]
        assert len(batch) == 4 and all(re.fullmatch(r"[A-Za-z]+", w) for w in words), words
        assert all(0 < r.completion_tokens < 8 for r in batch), [r.text for r in batch]


def test_schema_output_parses_and_validates(provider: LocalProvider) -> None:
    schema = {
        "type": "object",
        "properties": {
            "asserts": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "why": {"type": "string"},
        },
        "required": ["asserts", "why"],
    }
    messages = [
        Message(role="user", content="Give two assert statements testing add(2, 3) == 5, as JSON.")
    ]
    c = provider.complete(messages, max_tokens=120, schema=schema)
    data = json.loads(c.text)
    jsonschema.validate(data, schema)


def test_shared_prefix_is_served_from_the_slot_cache(provider: LocalProvider) -> None:
    nonce = random.random()  # a prefix no slot has seen
    system = f"{nonce} You are a careful Python programmer. " + "Keep functions short. " * 80
    first = provider.complete(
        [Message(role="system", content=system), Message(role="user", content="Write abs2(x).")],
        max_tokens=1,
    )
    second = provider.complete(
        [Message(role="system", content=system), Message(role="user", content="Write neg(x).")],
        max_tokens=1,
    )
    assert first.prompt_tokens > 300
    assert first.cached_tokens < 50  # only the chat template's first tokens, at most
    assert second.cached_tokens >= first.prompt_tokens - 20  # all but the new question


def test_forget_prompts_leaves_no_prompt_cached_anywhere() -> None:
    """After ``forget_prompts`` a prompt the server processed before is processed again from
    its first token: not served from a slot, nor from the prompt cache llama-server keeps in
    host memory (``--cache-ram``; a slot's prompt goes there when another prompt takes the
    slot), which erasing the slots left behind. One slot, so that ``other`` must take it."""
    with LocalServer(server_settings(slots=1, ctx_per_slot=1024, progress=False)) as server:
        p = LocalProvider(server=server, model_id="local:one-slot")
        nonce = random.random()
        ask = [
            Message(role="system", content=f"{nonce} " + "You write careful Python. " * 60),
            Message(role="user", content="Write abs2(x)."),
        ]
        other = [Message(role="system", content=f"{nonce} " + "Another topic. " * 90), *ask[1:]]
        assert p.complete(ask, max_tokens=1).prompt_tokens > 300
        p.complete(other, max_tokens=1)  # takes the one slot: ask's prompt goes to host memory
        # ask comes back from host memory (what a user's run gets); other's prompt goes there
        assert p.complete(ask, max_tokens=1).cached_tokens > 300
        p.forget_prompts()
        assert p.complete(other, max_tokens=1).cached_tokens < 50


def test_samples_of_one_prompt_are_one_request(
    provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four answers to one new prompt at once go to the real server as one request for
    ``n=4`` (llama-server's ``n_cmpl``: the prompt processed once, its state copied to the
    other slots): four sampled answers come back, each with its own usage."""
    nonce = random.random()
    system = f"{nonce} You are a careful Python programmer. " + "Keep functions short. " * 40
    messages = [Message(role="system", content=system), Message(role="user", content="Write f.")]
    bodies: list[dict[str, Any]] = []
    stream = provider._stream

    async def recorded(body: dict[str, Any], *args: Any) -> Any:
        bodies.append(body)
        return await stream(body, *args)

    monkeypatch.setattr(provider, "_stream", recorded)
    results = provider.complete_many(messages, n=4, max_tokens=16, temperature=0.8, seed=5)
    assert [b.get("n") for b in bodies] == [4] and len(results) == 4
    assert all(r.completion_tokens > 0 and r.prompt_tokens > 150 for r in results)
    assert all(r.finish_reason in ("stop", "length") for r in results)


def test_tool_call_from_the_real_model(provider: LocalProvider) -> None:
    """The debugger's own tools offered through native tool calling (``--jinja``, the model's
    chat template). What this server and model do, measured here: the 1.5B model writes its
    call as a fenced JSON block, which llama-server neither parses into ``tool_calls`` nor holds
    to a grammar, and then pads the reply with blank lines; the provider's stop string ends the
    padding and the debugger reads the written call (``salvage``). Either way the result must be
    a call of one of the tools whose arguments match its schema, and the conversation with
    the call and its result must go back to the server."""
    from selfheal.llm.base import ToolSpec
    from selfheal.roles.debugtools import TOOLS
    from selfheal.roles.investigate import salvage

    messages = [
        Message(role="system", content="You debug Python code with the tools you are given."),
        Message(
            role="user",
            content="The trusted test ex1 `assert add(2, 3) == 5` fails for this code:\n"
            "```python\ndef add(a, b):\n    return a - b\n```\nInvestigate the failing test ex1.",
        ),
    ]
    c = provider.complete(messages, tools=list(TOOLS), tool_choice="required", max_tokens=200)
    assert c.finish_reason != "length", f"the reply ran to max_tokens: {c.text!r}"
    call = c.tool_calls[0] if c.tool_calls else salvage(c.text)
    assert call is not None, f"no tool call, native or written; the reply was {c.text!r}"
    spec: ToolSpec = next(t for t in TOOLS if t.name == call.name)
    jsonschema.validate(json.loads(call.arguments or "{}"), spec.parameters)
    call = call.model_copy(update={"id": call.id or "call_1"})
    follow = provider.complete(
        [
            *messages,
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content="add(2, 3) returned -1", tool_call_id=call.id),
        ],
        tools=list(TOOLS),
        max_tokens=96,
    )
    # the server took the call and its result back: the next step is another valid call of one
    # of the tools (native or written), or an answer about the bug the result shows
    step = follow.tool_calls[0] if follow.tool_calls else salvage(follow.text)
    if step is not None:
        tool = next((t for t in TOOLS if t.name == step.name), None)
        assert tool is not None, f"not one of the tools: {step.name}"
        jsonschema.validate(json.loads(step.arguments or "{}"), tool.parameters)
    else:
        assert re.search(r"a \+ b|a - b|subtract|minus|-1", follow.text), follow.text


def test_context_too_long_is_a_clear_error(provider: LocalProvider) -> None:
    with pytest.raises(ProviderError) as info:
        provider.complete([Message(role="user", content="word " * 3000)], max_tokens=4)
    assert "does not fit" in str(info.value) and "SELFHEAL_LOCAL_CTX" in str(info.value)


def test_build_provider_local_uses_the_served_model() -> None:
    p = build_provider("local", env={**os.environ, "SELFHEAL_LOCAL_SLOTS": "2"})
    assert isinstance(p, LocalProvider) and p.server is not None
    c = p.complete(CODE, max_tokens=48)
    assert "def add" in c.text
    pid = p.server.pid
    p.server.stop()
    assert pid is not None and not psutil.pid_exists(pid)


def test_kill_9_mid_request_then_one_restart_then_a_clear_error() -> None:
    local = LocalServer(server_settings(slots=1, ctx_per_slot=1024, progress=False))
    p = LocalProvider(model=local.settings.alias, server=local)
    pids: list[int] = []
    try:
        p.complete(CODE, max_tokens=2)
        victim = local.pid
        assert victim is not None
        pids.append(victim)
        killed = threading.Event()

        def kill_once(piece: str) -> None:
            if not killed.is_set():
                killed.set()
                os.kill(victim, signal.SIGKILL)

        # tokens already reached on_token: not retried, a clear error
        with pytest.raises(ProviderUnavailable) as info:
            p.complete(CODE, max_tokens=200, on_token=kill_once)
        assert "killed by SIGKILL" in str(info.value)
        # the next call restarts the server once and succeeds
        assert "def add" in p.complete(CODE, max_tokens=48).text
        assert local.restarts == 1 and local.pid not in pids
        assert local.pid is not None
        pids.append(local.pid)
        os.kill(local.pid, signal.SIGKILL)
        with pytest.raises(ProviderUnavailable) as again:
            p.complete(CODE, max_tokens=8)
        assert "died again" in str(again.value)
    finally:
        local.stop()
    for pid in pids:  # no orphan, no server left running
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    mine = descendants_named(os.getpid(), "llama-server")
    assert all(c.pid not in pids for c in mine)
