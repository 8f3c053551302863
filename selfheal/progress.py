"""Progress while the model writes: the node in flight, its seconds and tokens so far, and an
estimate of what is left from what the same node wrote with the same model before (in this
process, and in earlier ones: ``history_path()``). Fed by a run's events (``on_event``) and its
streamed fragments (``on_token``: one fragment is about one token on every streaming
backend); read by the terminal's live line and the notebook's header (``InFlight.text``)."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from selfheal.config import default_runs_dir
from selfheal.state import Event

_DONE: dict[tuple[str, str], deque[tuple[int, float]]] = defaultdict(lambda: deque(maxlen=20))
"""Per (model, node), the (completion tokens, seconds) of its last runs: those that ended in
this process, and before it those kept in ``history_path()`` by earlier processes."""
_LAST = {"model": ""}
"""The model of the node that ended last (the model a run uses before its first reply)."""
_LOADED = threading.Event()
_LOCK = threading.Lock()
"""Held while the speeds are read, added to or written (meters of parallel runs share them)."""


def history_path() -> Path:
    """Where the measured speeds persist: ``speeds.json`` beside the runs folder."""
    return default_runs_dir().parent / "speeds.json"


def _load() -> None:
    """Read the speeds earlier processes measured (once; a missing or damaged file is none)."""
    if _LOADED.is_set():
        return
    _LOADED.set()
    try:
        saved = json.loads(history_path().read_text(encoding="utf-8"))
        for key, runs in saved["runs"].items():
            model, node = key.rsplit("|", 1)
            _DONE[(model, node)].extend((int(t), float(s)) for t, s in runs)
        _LAST["model"] = str(saved.get("last", ""))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return


def _save() -> None:
    """Keep the measured speeds for the next process (best effort: a read-only home keeps
    them for this process only)."""
    runs = {f"{m}|{n}": list(done) for (m, n), done in _DONE.items() if done}
    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"last": _LAST["model"], "runs": runs}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return


def record_done(model: str, node: str, tokens: int, seconds: float) -> None:
    """A node that ended: ``tokens`` completion tokens in ``seconds``."""
    with _LOCK:
        _load()
        _DONE[(model, node)].append((tokens, seconds))
        _LAST["model"] = model
        _save()


def measured(node: str, model: str = "") -> tuple[float, float] | None:
    """The median completion tokens and seconds of ``node``'s finished runs with ``model``
    (default: the model that ran last), in this process or kept from earlier ones, or None
    before one ended."""
    with _LOCK:
        _load()
        done = list(_DONE.get((model or _LAST["model"], node), ()))
    if not done:
        return None
    return statistics.median(t for t, _ in done), statistics.median(s for _, s in done)


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """The node running now, as far as its model calls have gone."""

    node: str
    """The node's name (``generate``, ``repair``, ...)."""
    seconds: float
    """Seconds since the node started."""
    tokens: int
    """Fragments streamed so far in this node (about one token each)."""
    rate: float | None
    """Tokens per second so far, once tokens flow."""
    left: float | None
    """Estimated seconds until the node ends: the tokens the same node wrote when it ran
    before in this process, at the speed seen so far (or, before the first token, its time
    then); None before such a node ended."""

    def text(self) -> str:
        """``generate 12s · 240 tok (20 tok/s) · about 8s left``."""
        parts = [f"{self.node} {self.seconds:.0f}s"]
        if self.tokens:
            rate = f" ({self.rate:.0f} tok/s)" if self.rate else ""
            parts.append(f"{self.tokens} tok{rate}")
        elif self.seconds >= 2:
            parts.append("waiting for the first token")
        if self.left is not None:
            parts.append(f"about {self.left:.0f}s left" if self.left >= 1 else "finishing")
        return " · ".join(parts)


class TokenMeter:
    """Counts what the node in flight has streamed. Thread-safe: events and fragments may
    come from the engine's thread while a display reads ``now()`` from another."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._node: str | None = None
        self._started = 0.0
        self._first: float | None = None
        self._tokens = 0
        self._model = ""

    def on_event(self, e: Event) -> None:
        """A run's event: a node starts, or ends (its tokens and time are kept)."""
        with self._lock:
            if e.model:
                self._model = e.model  # a model call's event names the model in use
            if e.kind == "start":
                self._node, self._started = e.node, self.clock()
                self._first, self._tokens = None, 0
            elif e.kind in ("end", "error") and e.node == self._node:
                self._node = None
                if e.kind == "end" and e.completion_tokens > 0 and e.duration > 0:
                    record_done(self._model, e.node, e.completion_tokens, e.duration)

    def on_token(self, role: str, text: str) -> None:
        """A streamed fragment of the node in flight."""
        with self._lock:
            if self._node is None:
                return
            if self._first is None:
                self._first = self.clock()
            self._tokens += 1

    def now(self) -> InFlight | None:
        """The node in flight, or None between nodes."""
        with self._lock:
            if self._node is None:
                return None
            now = self.clock()
            rate = None
            if self._first is not None and now - self._first > 0.5 and self._tokens > 1:
                rate = self._tokens / (now - self._first)
            return InFlight(
                node=self._node,
                seconds=now - self._started,
                tokens=self._tokens,
                rate=rate,
                left=self._left(rate),
            )

    def _left(self, rate: float | None) -> float | None:
        before = measured(self._node or "", self._model)
        if before is None:
            return None
        tokens, seconds = before
        if rate:
            return max(0.0, (tokens - self._tokens) / rate)
        return max(0.0, seconds - (self.clock() - self._started))


def progress_only(sink: Callable[[str, str], None]) -> Callable[[str, str], None]:
    """``sink`` marked as one that only counts (it shows no text): a call that streamed into
    it may still be retried (``llm.base.ReplyStream.streamed``)."""

    def counted(role: str, text: str) -> None:
        sink(role, text)

    counted.progress_only = True  # type: ignore[attr-defined]
    return counted


class TerminalLine:
    """The node in flight on a terminal: on a TTY a live line redrawn twice a second (cleared
    before each finished node's line); otherwise a plain line every ``every`` seconds."""

    def __init__(self, stream: TextIO, meter: TokenMeter, *, every: float = 15.0) -> None:
        self.stream = stream
        self.meter = meter
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.every = every
        self._lock = threading.Lock()
        self._shown = False
        self._last = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start drawing (a daemon thread; ``stop`` ends it)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="selfheal-progress", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.clear()

    def print(self, line: str) -> None:
        """Print a finished line, clearing the live line first."""
        with self._lock:
            self._clear()
            print(line, file=self.stream, flush=True)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing is drawn meanwhile (a question on the terminal waits for its answer)."""
        with self._lock:
            self._clear()
            yield

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False

    def tick(self) -> None:
        """Draw the node in flight once (the loop calls it)."""
        flight = self.meter.now()
        with self._lock:
            if flight is None:
                self._clear()
                return
            text = f"  … {flight.text()}"
            if self.tty:
                self.stream.write("\r\x1b[2K" + text[: _width(self.stream)])
                self.stream.flush()
                self._shown = True
            elif flight.seconds - self._last >= self.every or flight.seconds < self._last:
                self._last = flight.seconds
                if flight.seconds >= self.every:
                    print(text, file=self.stream, flush=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.5 if self.tty else 1.0):
            try:
                self.tick()
            except (OSError, ValueError):  # the stream was closed under us
                return


def _width(stream: TextIO) -> int:
    try:
        return max(20, os.get_terminal_size(stream.fileno()).columns - 1)
    except (OSError, ValueError, AttributeError):
        return 119
