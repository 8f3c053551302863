"""The transformers provider's batches: one generation at a time in arrival order
(:class:`FifoLock`), where each sequence of a batch ends (:class:`BatchStop`), and sampled
answers to one prompt that wait together, decoded as one batch (:class:`Waiting`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from selfheal.errors import ProviderTimeout
from selfheal.llm.base import Completion, CompletionRequest
from selfheal.llm.stream import ReplyStream

MOST = 16
"""Most sampled answers decoded together (the largest population)."""


class Cancelled(Protocol):
    """What a batch checks after each token (a ``threading.Event``, or :class:`AllCancelled`)."""

    def is_set(self) -> bool: ...


@dataclass
class Ask:
    """One caller's sampled answer, waiting its turn."""

    request: CompletionRequest
    cancelled: threading.Event
    result: Completion | None = None
    error: BaseException | None = None


class AllCancelled:
    """A joined batch stops when every caller in it has gone."""

    def __init__(self, asks: Sequence[Ask]) -> None:
        self.asks = tuple(asks)

    def is_set(self) -> bool:
        return all(a.cancelled.is_set() for a in self.asks)


def _key(request: CompletionRequest) -> Hashable:
    return (
        tuple((m.role, m.content) for m in request.messages),
        request.max_tokens,
        request.temperature,
        request.stop,
        request.stop_when,
    )


class Waiting:
    """Sampled answers to one prompt with the same options, waiting for the model: whichever
    caller's turn comes first takes them all (at most :data:`MOST`) and decodes them as one
    batch, so concurrent candidates (the pipeline asks for each on its own) cost about one
    answer on a GPU. The greedy answer (temperature 0) never joins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asks: dict[Hashable, list[Ask]] = {}

    def join(self, ask: Ask) -> None:
        with self._lock:
            self._asks.setdefault(_key(ask.request), []).append(ask)

    def take(self, ask: Ask) -> list[Ask]:
        """``ask`` and those waiting with it, ``ask`` first (callers that left are dropped);
        [] when an earlier batch took it already, or its caller left."""
        key = _key(ask.request)
        with self._lock:
            waiting = self._asks.get(key, [])
            if ask not in waiting:
                return []
            waiting.remove(ask)
            live = [a for a in waiting if not a.cancelled.is_set()]
            # a caller that left takes nothing: the others wait for their own turn
            taken = [] if ask.cancelled.is_set() else [ask, *live[: MOST - 1]]
            left = [a for a in live if a not in taken]
            if left:
                self._asks[key] = left
            else:
                self._asks.pop(key, None)
            return taken


class FifoLock:
    """A lock taken in arrival order: concurrent callers (roles) are served one whole
    generation after another, first come first served."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0

    def __enter__(self) -> None:
        with self._cond:
            ticket = self._next
            self._next += 1
            self._cond.wait_for(lambda: self._serving == ticket)

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()


class BatchStop:
    """Where each sequence of one ``generate`` ends, checked after every token: the
    end-of-sequence token, a stop string or the request's ``stop_when`` (on the decoded reply,
    so any tokenizer works) ends that sequence; cancellation or the deadline ends them all."""

    def __init__(
        self,
        provider: Any,
        request: CompletionRequest,
        n: int,
        prompt_len: int,
        cancelled: Cancelled,
    ) -> None:
        self.torch = provider._torch
        self.base = provider._tf.StoppingCriteria
        self.tokenizer = provider.tokenizer
        self.stops = [s for s in request.stop if s]
        self.stop_when = request.stop_when
        self.max_tokens = request.max_tokens
        self.prompt_len = prompt_len
        self.cancelled = cancelled
        self.timeout = provider.timeout
        self.started = time.monotonic()
        self.ended: list[int | None] = [None] * n
        """New tokens of each sequence when it ended (its end token included)."""
        self.texts = [""] * n
        """Each sequence's text so far (where stop strings and ``stop_when`` look)."""
        self.timed_out = False
        eos = provider.tokenizer.eos_token_id
        more = getattr(provider.lm.generation_config, "eos_token_id", None)
        extra = more if isinstance(more, list) else [more]
        self.eos = {int(t) for t in [eos, *extra] if t is not None}

    def criteria(self) -> Any:
        check = self.check

        class _Stop(self.base):  # type: ignore[misc,name-defined]
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return check(input_ids)

        return _Stop()

    def check(self, input_ids: Any) -> Any:
        rows = int(input_ids.shape[0])
        made = int(input_ids.shape[1]) - self.prompt_len
        if self.cancelled.is_set() or time.monotonic() > self.started + self.timeout:
            self.timed_out = not self.cancelled.is_set()
            return self.torch.ones(rows, dtype=self.torch.bool, device=input_ids.device)
        watch = bool(self.stops) or self.stop_when is not None
        for i, token in enumerate(input_ids[:, -1].tolist()):
            if self.ended[i] is not None:
                continue
            if int(token) in self.eos:
                self.ended[i] = made
            elif watch:
                # each row's text grows by its new token (decoding the whole row again after
                # every token would cost its length squared)
                piece = self.tokenizer.decode([int(token)], skip_special_tokens=True)
                self.texts[i] += piece
                if any(s in self.texts[i] for s in self.stops) or self._done(i):
                    self.ended[i] = made
        done = [e is not None for e in self.ended[:rows]]
        return self.torch.tensor(done, dtype=self.torch.bool, device=input_ids.device)

    def _done(self, i: int) -> bool:
        """Whether the request's ``stop_when`` says row ``i`` is done."""
        return self.stop_when is not None and self.stop_when(self.texts[i]) is not None

    def completion(self, provider: Any, reply: ReplyStream, row: Any, i: int) -> Completion:
        """Sequence ``i``'s answer: its tokens up to where it ended, cut at a stop string."""
        made = int(row.shape[0]) - self.prompt_len
        ended = self.ended[i]
        count = made if ended is None else ended
        new_ids = row[self.prompt_len : self.prompt_len + count].tolist()
        if self.timed_out and ended is None and count < self.max_tokens:
            raise ProviderTimeout(
                f"{provider.model_id} did not finish within {self.timeout:g} s "
                f"({count} tokens generated). Raise the timeout or lower max_tokens.",
                provider="hf",
                model=provider.model,
            )
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        cut = min((text.find(s) for s in self.stops if s in text), default=-1)
        end = self.stop_when(text) if self.stop_when is not None else None
        cut = end if end is not None and (cut < 0 or end < cut) else cut
        finish = "stop"
        if cut >= 0:
            text = text[:cut]
        elif ended is None and count >= self.max_tokens:
            finish = "length"
        return reply.completion(
            text=text,
            prompt_tokens=self.prompt_len,
            completion_tokens=count,
            model=provider.model_id,
            finish_reason=finish,
        )
