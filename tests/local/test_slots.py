"""The slot router (selfheal/local/slots.py): which llama-server slot a request goes to, one
prefill for a prompt that concurrent requests share, restores instead of processing it again,
and sending anyway when the server refuses a copy. First against a recording SlotAPI, then
through the local provider and the real ``openai`` SDK against a fake llama-server on 127.0.0.1
that keeps each slot's prompt and answers ``/slots`` actions in the wire format."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from llm_fakes import FakeServer, Request, Response

from selfheal.llm import Message, RetryPolicy
from selfheal.local.provider import LocalProvider
from selfheal.local.slots import PREFILL_CHARS, SlotRouter, common_prefix, prompt_key

LONG = "You write Python. " + "Spec line. " * 60  # well over PREFILL_CHARS
assert len(LONG) > PREFILL_CHARS


def key(text: str) -> str:
    return prompt_key({"messages": [{"role": "user", "content": text}]})


class Recording:
    """A SlotAPI that records every call; ``fail`` names an action that raises."""

    def __init__(self, fail: str = "", gate: asyncio.Event | None = None) -> None:
        self.calls: list[tuple[str, int, str]] = []
        self.fail = fail
        self.gate = gate

    async def save(self, slot: int, filename: str) -> None:
        self._do("save", slot, filename)

    async def restore(self, slot: int, filename: str) -> None:
        self._do("restore", slot, filename)

    async def prefill(self, slot: int) -> int:
        if self.gate is not None:
            await self.gate.wait()
        self._do("prefill", slot, "")
        return 7

    def _do(self, action: str, slot: int, filename: str) -> None:
        self.calls.append((action, slot, filename))
        if action == self.fail:
            raise RuntimeError(f"{action} refused")


def test_common_prefix_and_keys() -> None:
    assert common_prefix("abcdef", "abcxyz") == 3
    assert common_prefix("abc", "abc") == 3 and common_prefix("", "abc") == 0
    a = prompt_key(
        {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "x"}]}
    )
    b = prompt_key(
        {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "y"}]}
    )
    assert common_prefix(a, b) == len(a) - 1  # the messages up to the last character
    tools = prompt_key({"tools": [{"name": "t"}], "messages": [{"role": "system", "content": "S"}]})
    assert common_prefix(tools, a) == 0  # tools change the rendered prompt from its start


def test_a_long_new_prompt_is_prefilled_saved_and_pinned() -> None:
    router, api = SlotRouter(4), Recording()
    lease = asyncio.run(router.acquire(key(LONG), api))
    assert lease.slot is not None and lease.prefilled and lease.cached_before == 7
    assert [c[:2] for c in api.calls] == [("prefill", lease.slot), ("save", lease.slot)]
    router.release(lease, ok=True)
    # the same prompt again goes to the slot that holds it, with nothing to copy
    again = asyncio.run(router.acquire(key(LONG), api))
    assert again.slot == lease.slot and again.actions == [] and len(api.calls) == 2


def test_a_short_prompt_is_only_pinned() -> None:
    router, api = SlotRouter(4), Recording()
    lease = asyncio.run(router.acquire(key("Write add(a, b)."), api))
    assert lease.slot is not None and api.calls == [] and not lease.prefilled


def test_concurrent_requests_with_one_prompt_process_it_once() -> None:
    async def main() -> tuple[list[Any], Recording]:
        gate = asyncio.Event()
        api = Recording(gate=gate)
        router = SlotRouter(4)
        tasks = [asyncio.create_task(router.acquire(key(LONG), api)) for _ in range(4)]
        await asyncio.sleep(0.05)  # all four have asked; the prefill is still running
        gate.set()
        return list(await asyncio.gather(*tasks)), api

    leases, api = asyncio.run(main())
    actions = [c[0] for c in api.calls]
    assert actions.count("prefill") == 1 and actions.count("save") == 1
    assert actions.count("restore") == 3
    assert sorted(lease.slot for lease in leases) == [0, 1, 2, 3]  # each on its own slot
    restored = {c[1] for c in api.calls if c[0] == "restore"}
    prefilled = next(c[1] for c in api.calls if c[0] == "prefill")
    assert prefilled not in restored and len(restored) == 3
    saved = next(c[2] for c in api.calls if c[0] == "save")
    assert all(c[2] == saved for c in api.calls if c[0] == "restore")
    assert sum("wait" in lease.actions for lease in leases) == 3


def test_a_shared_prefix_is_restored_into_a_free_slot() -> None:
    router, api = SlotRouter(2), Recording()
    first = asyncio.run(router.acquire(key(LONG + " generator"), api))
    # the slot that holds the prefix is busy: the other gets the saved prefix; its own tail
    # it processes itself
    other = asyncio.run(router.acquire(key(LONG + " repair " + "more " * 100), api))
    assert other.slot != first.slot
    assert [c[0] for c in api.calls] == ["prefill", "save", "restore"]
    assert other.actions == ["restore"] and api.calls[-1][1] == other.slot
    # a prompt that shares nothing with the saved one is not restored
    router.release(other, ok=True)
    third = asyncio.run(router.acquire(key("Unrelated. " * 10), api))
    assert third.slot == other.slot and len(api.calls) == 3


def test_every_slot_busy_leaves_the_choice_to_the_server() -> None:
    router, api = SlotRouter(2), Recording()
    leases = [asyncio.run(router.acquire(key(f"q{i}"), api)) for i in range(3)]
    assert [lease.slot for lease in leases][:2] in ([0, 1], [1, 0]) and leases[2].slot is None
    router.release(leases[2], ok=True)  # an unpinned lease changes nothing
    router.release(leases[0], ok=True)
    assert asyncio.run(router.acquire(key("q9"), api)).slot == leases[0].slot


@pytest.mark.parametrize("fail", ["prefill", "save", "restore"])
def test_a_refused_copy_turns_copying_off_and_the_request_still_goes(
    fail: str, caplog: pytest.LogCaptureFixture
) -> None:
    router, api = SlotRouter(3), Recording(fail=fail)
    first = asyncio.run(router.acquire(key(LONG), api))
    second = asyncio.run(router.acquire(key(LONG), api))
    assert first.slot is not None and second.slot is not None and first.slot != second.slot
    assert not router.copying and "copying is off" in caplog.text
    calls = len(api.calls)
    router.release(first, ok=True)
    router.release(second, ok=True)
    asyncio.run(router.acquire(key(LONG + "x" * 1000), api))
    assert len(api.calls) == calls  # nothing more is copied or prefilled


# ----------------------------------------------------------- through the provider, on HTTP


class FakeLlama:
    """A fake llama-server with slots: each slot keeps the prompt (the messages' text) of its
    last request; ``cache_n`` is the common prefix with it, in characters; ``/slots`` save
    and restore move prompts through named files."""

    def __init__(self, slots: int) -> None:
        self.slots = [""] * slots
        self.files: dict[str, str] = {}
        self.lock = threading.Lock()

    def __call__(self, r: Request) -> Response:
        if r.headers.get("authorization") != "Bearer k-test":
            return Response.json({"error": {"message": "Invalid API Key", "code": 401}}, 401)
        if r.path.startswith("/slots/"):
            slot = int(r.path.split("/")[2].split("?")[0])
            if "action=erase" in r.path:
                with self.lock:
                    self.slots[slot] = ""
                return Response.json({"id_slot": slot, "n_erased": 1})
            name = r.json()["filename"]
            with self.lock:
                if "action=save" in r.path:
                    self.files[name] = self.slots[slot]
                else:
                    self.slots[slot] = self.files[name]
            return Response.json({"id_slot": slot, "filename": name})
        body = r.json()
        text = json.dumps(body["messages"])
        slot = body.get("id_slot", -1)
        with self.lock:
            if slot < 0:
                slot = 0
            cached = common_prefix(text, self.slots[slot])
            self.slots[slot] = text
        usage = {
            "prompt_tokens": len(text),
            "completion_tokens": 1,
            "total_tokens": len(text) + 1,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        if not body.get("stream"):
            return Response.json(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "x"},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": usage,
                }
            )
        events = [
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [],
                "usage": usage,
            },
        ]
        chunks = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
        return Response(body=chunks, headers={"content-type": "text/event-stream"})


def routed(
    http_server: Callable[..., FakeServer], slots: int
) -> tuple[FakeLlama, FakeServer, SlotRouter, LocalProvider]:
    """A fake llama-server with ``slots`` slots and a provider routing for it."""
    llama = FakeLlama(slots)
    server = http_server(llama)
    router = SlotRouter(slots)
    p = LocalProvider(
        model="m",
        base_url=server.url + "/v1",
        api_key="k-test",
        policy=RetryPolicy(timeout=10.0, attempts=1),
        router=router,
    )
    return llama, server, router, p


def test_provider_prefills_once_and_restores_for_concurrent_samples(
    http_server: Callable[..., FakeServer],
) -> None:
    _llama, server, router, p = routed(http_server, 4)
    messages = [Message(role="system", content=LONG), Message(role="user", content="Write f.")]

    async def samples() -> list[Any]:
        return list(
            await asyncio.gather(
                *[p.acomplete(messages, max_tokens=8, temperature=0.8) for _ in range(3)]
            )
        )

    done = asyncio.run(samples())
    paths = server.paths()
    assert sum("action=save" in q for q in paths) == 1
    assert sum("action=restore" in q for q in paths) == 2
    chats = [r.json() for r in server.requests if r.path == "/v1/chat/completions"]
    prefills = [b for b in chats if not b.get("stream")]
    streamed = [b for b in chats if b.get("stream")]
    assert len(prefills) == 1 and prefills[0]["max_tokens"] == 1
    assert "response_format" not in prefills[0]
    assert sorted(b["id_slot"] for b in streamed) == [0, 1, 2]  # one slot each
    assert all(b["cache_prompt"] is True for b in streamed)
    # the request that prefilled reports what its prefill found cached (nothing), the
    # others what they found after the restore (all of the prompt's text)
    cached = sorted(c.cached_tokens for c in done)
    assert cached[0] == 0 and cached[1] == cached[2] == done[0].prompt_tokens
    assert router.stats["prefills"] == 1 and router.stats["restores"] == 2
    assert all(s[1] is False for s in router.snapshot())  # every slot released


def test_forget_prompts_erases_every_slot_and_the_next_request_starts_cold(
    http_server: Callable[..., FakeServer],
) -> None:
    llama, server, router, p = routed(http_server, 2)
    messages = [Message(role="system", content=LONG), Message(role="user", content="Write f.")]
    p.complete(messages, max_tokens=4)
    assert p.complete(messages, max_tokens=4).cached_tokens > 0  # served from its slot
    p.forget_prompts()
    assert llama.slots == ["", ""]
    assert sorted(q for q in server.paths() if "erase" in q) == [
        "/slots/0?action=erase",
        "/slots/1?action=erase",
    ]
    assert p.complete(messages, max_tokens=4).cached_tokens == 0  # prefilled again, cold
    assert router.stats["prefills"] == 2
    LocalProvider(model="m", base_url=server.url + "/v1").forget_prompts()  # no router: no-op
    assert sum("erase" in q for q in server.paths()) == 2
