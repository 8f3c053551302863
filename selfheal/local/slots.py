"""Prompt-cache routing for a supervised llama-server: which slot a request goes to, and copying
an already processed prompt into that slot first (``/slots`` save and restore), so concurrent
requests that share a prompt process it once (docs/local_model.md, "Slot routing").

A slot's content is tracked as the text of the messages last sent to it; a common prefix in
characters stands in for one in tokens."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

COPY_GAIN = 200
"""Characters (about 50 tokens, half a second of prompt processing here) a restore must reach
beyond what the chosen slot already holds to be worth it."""

PREFILL_CHARS = 400
"""A prompt with at least this many characters no slot or saved file holds is processed once
by a prefill request and saved, so that concurrent requests with it restore it."""

MAX_FILES = 8
"""Saved prompts kept (a ring of file names; the server overwrites the oldest)."""


def prompt_key(body: dict[str, Any]) -> str:
    """The text a request's prompt is made of, in order: tools (rendered into the system
    prompt by chat templates) and then every message. Two requests share a KV prefix about as
    far as their keys share a prefix."""
    parts = []
    if body.get("tools"):
        parts.append("tools\x01" + json.dumps(body["tools"], sort_keys=True))
    for m in body.get("messages", ()):
        content = m.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, sort_keys=True)
        extra = {k: v for k, v in m.items() if k not in ("role", "content")}
        parts.append(
            f"{m.get('role', '')}\x01{content}"
            + (("\x01" + json.dumps(extra, sort_keys=True)) if extra else "")
        )
    return "\x00".join(parts)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class SlotAPI(Protocol):
    """What the router asks of the server (the provider implements it over HTTP; tests fake it
    and receive every call)."""

    async def save(self, slot: int, filename: str) -> None:
        """Write ``slot``'s KV cache to ``filename`` in the server's slot directory."""

    async def restore(self, slot: int, filename: str) -> None:
        """Load ``filename`` into ``slot``."""

    async def prefill(self, slot: int) -> int:
        """Process the request's prompt on ``slot`` (one generated token); the prompt tokens
        that were already cached there."""


@dataclass
class _Slot:
    id: int
    key: str = ""
    busy: bool = False
    used: float = 0.0


@dataclass
class _File:
    name: str
    key: str


@dataclass
class Lease:
    """A slot taken for one request: send the request with ``id_slot=slot`` (None: let the
    server choose, every slot is busy), then :meth:`SlotRouter.release` it."""

    slot: int | None
    key: str
    prefilled: bool = False
    """The prompt was processed by this request's own prefill (its cached tokens are those the
    prefill found, not those the request finds after it)."""
    cached_before: int = 0
    """With ``prefilled``: the prompt tokens the prefill found cached."""
    actions: list[str] = field(default_factory=list)
    """What the router did for this request: ``restore``, ``prefill``, ``wait``."""


class SlotRouter:
    """Slot choice and prompt copying for one start of one server (see the module docs).
    Thread-safe; waits work across event loops."""

    def __init__(self, slots: int, *, copying: bool = True) -> None:
        self.slots = [_Slot(i) for i in range(max(1, slots))]
        self.copying = copying and slots > 1
        self._files: list[_File] = []
        self._next_file = 0
        self._pending: dict[str, concurrent.futures.Future[None]] = {}
        self._lock = threading.Lock()
        self.stats: dict[str, int] = {"requests": 0, "restores": 0, "prefills": 0, "waits": 0}
        self._salt = f"{os.getpid()}-{id(self):x}"

    def _best_file(self, key: str) -> tuple[_File | None, int]:
        best, reach = None, 0
        for f in self._files:
            n = common_prefix(key, f.key)
            if n > reach:
                best, reach = f, n
        return best, reach

    def _plan(self, key: str) -> tuple[str, Any, _Slot | None]:
        """Under the lock: ``("send", None, slot)``, ``("restore", file, slot)``,
        ``("prefill", future, slot)`` or ``("wait", future, None)``."""
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return "send", None, None
        target = max(idle, key=lambda s: (common_prefix(key, s.key), -s.used))
        holds = common_prefix(key, target.key)
        if not self.copying:
            return "send", None, target
        f, reach = self._best_file(key)
        for pending_key, running in self._pending.items():
            if common_prefix(key, pending_key) >= max(holds, reach) + COPY_GAIN:
                return "wait", running, None
        if f is not None and reach >= holds + COPY_GAIN:
            return "restore", f, target
        if len(key) - max(holds, reach) >= PREFILL_CHARS and len(idle) > 1:
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._pending[key] = future
            return "prefill", future, target
        return "send", None, target

    async def acquire(self, key: str, api: SlotAPI) -> Lease:
        """Take a slot for a request whose prompt is ``key``, copying or prefilling its prompt
        there first when that pays (see the module docs)."""
        lease = Lease(slot=None, key=key)
        while True:
            with self._lock:
                action, what, target = self._plan(key)
                if target is not None:
                    target.busy = True
                self.stats["waits" if action == "wait" else "requests"] += 1
            if action == "wait":
                lease.actions.append("wait")
                await asyncio.wrap_future(what)
                continue
            lease.slot = target.id if target is not None else None
            if target is not None and action == "restore":
                await self._copy(lease, target, what, api)
            elif target is not None and action == "prefill":
                await self._prefill(lease, target, what, api)
            return lease

    async def _copy(self, lease: Lease, target: _Slot, f: _File, api: SlotAPI) -> None:
        ok = await self._safely(lambda: api.restore(target.id, f.name), "restore")
        with self._lock:
            target.key = f.key if ok else ""
        if ok:
            lease.actions.append("restore")
            self.stats["restores"] += 1

    async def _prefill(
        self, lease: Lease, target: _Slot, future: concurrent.futures.Future[None], api: SlotAPI
    ) -> None:
        try:
            cached: list[int] = []

            async def run() -> None:
                cached.append(await api.prefill(target.id))

            ok = await self._safely(run, "prefill")
            with self._lock:
                target.key = lease.key if ok else ""
            if ok:
                lease.actions.append("prefill")
                lease.prefilled, lease.cached_before = True, cached[0]
                self.stats["prefills"] += 1
                name = self._file_name()
                if await self._safely(lambda: api.save(target.id, name), "save"):
                    with self._lock:
                        self._files = [f for f in self._files if f.name != name]
                        self._files.append(_File(name, lease.key))
        finally:
            with self._lock:
                self._pending.pop(lease.key, None)
            future.set_result(None)

    def _file_name(self) -> str:
        with self._lock:
            name = f"selfheal-{self._salt}-{self._next_file % MAX_FILES}.bin"
            self._next_file += 1
        return name

    async def _safely(self, step: Callable[[], Awaitable[Any]], what: str) -> bool:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the router only chooses where work goes
            log.warning(
                "llama-server slot %s failed (%s); prompt copying is off for this server", what, exc
            )
            self.copying = False
            return False
        return True

    def release(self, lease: Lease, *, ok: bool) -> None:
        """The request is over; its slot now holds its prompt (``ok``) or is unknown."""
        if lease.slot is None:
            return
        with self._lock:
            slot = self.slots[lease.slot]
            slot.busy = False
            slot.key = lease.key if ok else ""
            slot.used = time.monotonic()

    def forget(self) -> None:
        """The server's slots were erased: nothing is held or saved any more."""
        with self._lock:
            for slot in self.slots:
                slot.key = ""
            self._files = []

    def snapshot(self) -> Sequence[tuple[int, bool, int]]:
        """``(slot, busy, characters held)`` for each slot (for tests and ``doctor``)."""
        with self._lock:
            return [(s.id, s.busy, len(s.key)) for s in self.slots]
