"""Sampled answers to one prompt asked at once, sent as one request (:class:`Together`): requests
started in the same turn of the loop with the same messages and options go out as one request
for ``n`` answers (docs/llm.md, "One request for a population")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from selfheal.llm.base import Completion, CompletionRequest, TokenCallback

AskMany = Callable[[CompletionRequest, list[TokenCallback | None]], Awaitable[list[Completion]]]
"""Sends one request for ``len(on_tokens)`` answers (seeds ``seed, seed + 1, ...``), each
choice's fragments to its own callback; the answers in order."""


def _same(a: CompletionRequest, b: CompletionRequest) -> bool:
    """The two requests ask the same question the same way (their seeds and token callbacks
    aside)."""
    return a.replace(seed=None, on_token=None) == b.replace(seed=None, on_token=None)


@dataclass
class _Group:
    request: CompletionRequest
    on_tokens: list[TokenCallback | None] = field(default_factory=list)
    task: asyncio.Task[list[Completion]] | None = None
    waiting: int = 0


class Together:
    """Joins concurrent sampled requests (temperature above 0, no tools) that differ only in
    their seed into one request for up to ``most()`` answers (None: no limit), sent with the
    first one's seed (llama-server seeds the others ``seed + 1, ...``). The greedy answer
    never joins (the same greedy request twice is the same answer). When every caller of a
    group has gone (cancelled), its request is cancelled."""

    def __init__(self, ask_many: AskMany, most: Callable[[], int | None]) -> None:
        self._ask_many = ask_many
        self._most = most
        self._open: list[_Group] = []
        self.stats = {"requests": 0, "answers": 0}
        """Requests sent and the answers they carried (for tests and benchmarks)."""

    @staticmethod
    def joins(request: CompletionRequest) -> bool:
        """Whether ``request`` may share a request with others."""
        return request.temperature > 0 and not request.tools

    async def ask(self, request: CompletionRequest) -> Completion:
        """``request``'s answer, asked together with the requests like it that arrive with it."""
        most = self._most() or 0
        group = next(
            (
                g
                for g in self._open
                if _same(g.request, request) and (most < 1 or len(g.on_tokens) < most)
            ),
            None,
        )
        if group is None:
            group = _Group(request)
            self._open.append(group)
            group.task = asyncio.ensure_future(self._send(group))
        index = len(group.on_tokens)
        group.on_tokens.append(request.on_token)
        group.waiting += 1
        assert group.task is not None
        try:
            answers = await asyncio.shield(group.task)
        except asyncio.CancelledError:
            group.waiting -= 1
            if group.waiting == 0:
                group.task.cancel()
            raise
        return answers[index]

    async def _send(self, group: _Group) -> list[Completion]:
        # the requests started in this turn of the event loop join before it is sent
        await asyncio.sleep(0)
        self._open.remove(group)
        self.stats["requests"] += 1
        self.stats["answers"] += len(group.on_tokens)
        return await self._ask_many(group.request, group.on_tokens)
