"""A provider for transformers causal language models (``hf:ORG/NAME`` or a local folder).

Loads with ``AutoTokenizer`` / ``AutoModelForCausalLM`` on the best device (CUDA, then
Apple MPS, then CPU), in 4-bit on CUDA when ``bitsandbytes`` is installed, or from a GGUF
file (``gguf_file=``). Prompts go through the tokenizer's chat template. Streaming uses
``TextIteratorStreamer``; token counts come from the real tokenizer. Generation runs in a
worker thread for async callers, and stops when the call is cancelled or its timeout passes.
``complete_many(n)`` decodes the population as ONE batch (``generate(num_return_sequences=n)``),
with stop strings and ``max_tokens`` per sequence; callers from different roles are served one
whole generation after another, in arrival order. A final assistant message is a prefilled
reply, continued (``continue_final_message``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from selfheal.errors import MissingDependency, ModelNotFound, ProviderTimeout
from selfheal.llm.base import Completion, CompletionRequest, Message, ProviderBase, ReplyStream

__all__ = ["HFProvider", "pick_device"]

FALLBACK_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)
"""Used when a tokenizer has no chat template of its own."""


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        name = "torch" if "torch" in str(exc) else "transformers"
        raise MissingDependency(name, "hf", "the transformers provider") from exc
    return torch, transformers


def pick_device(torch: Any = None) -> str:
    """``cuda`` when a CUDA GPU is visible, else ``mps`` on Apple silicon, else ``cpu``."""
    if torch is None:
        torch, _ = _imports()
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


class HFProvider(ProviderBase):
    """A transformers model run in this process. Implements the Provider protocol."""

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        load_in_4bit: bool | None = None,
        gguf_file: str | None = None,
        timeout: float = 600.0,
        trust_remote_code: bool = False,
        batch: int | None = None,
    ) -> None:
        self._torch, self._tf = _imports()
        self.model = model
        self.device = device or pick_device(self._torch)
        self.timeout = timeout
        self._batch = batch
        extra: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        if gguf_file:
            extra["gguf_file"] = gguf_file
        try:
            self.tokenizer = self._tf.AutoTokenizer.from_pretrained(model, **extra)
            load: dict[str, Any] = dict(extra)
            quantized = self._quantization(load_in_4bit)
            if quantized is not None:
                load["quantization_config"] = quantized
                load["device_map"] = "auto"
            elif self.device != "cpu":
                load["dtype"] = self._torch.float16
            self.lm = self._tf.AutoModelForCausalLM.from_pretrained(model, **load)
        except OSError as exc:
            raise ModelNotFound(
                f"Cannot load the transformers model {model!r} ({exc}). Pass an existing "
                "local folder, or a hub id that is downloaded already (this machine may have "
                "no access to the hub).",
                provider="hf",
                model=model,
            ) from exc
        if quantized is None:
            self.lm.to(self.device)
        self.lm.eval()
        self.quantized = quantized is not None
        if getattr(self.tokenizer, "chat_template", None) is None:
            self.tokenizer.chat_template = FALLBACK_TEMPLATE
        self._queue = _FifoLock()  # one generation at a time per loaded model, in order

    def _quantization(self, load_in_4bit: bool | None) -> Any:
        if self.device != "cuda" or load_in_4bit is False:
            return None
        try:
            import bitsandbytes  # noqa: F401
        except ImportError:
            if load_in_4bit:
                raise MissingDependency("bitsandbytes", "hf", "4-bit loading") from None
            return None
        return self._tf.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_compute_dtype=self._torch.float16
        )

    @property
    def model_id(self) -> str:
        return f"hf:{self.model}"

    def __repr__(self) -> str:
        return f"HFProvider(model={self.model!r}, device={self.device!r})"

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by this model's tokenizer (no special tokens added)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def render_prompt(self, messages: Sequence[Message]) -> str:
        """The prompt text the chat template makes of ``messages``. A final ``assistant``
        message is a prefilled reply: it is left open for the model to continue
        (``continue_final_message``) instead of being closed and answered."""
        prefilled = bool(messages) and messages[-1].role == "assistant"
        rendered = self.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False,
            add_generation_prompt=not prefilled,
            continue_final_message=prefilled,
        )
        return str(rendered)

    @property
    def batch_hint(self) -> int:  # type: ignore[override]
        """Answers worth decoding at once: ``batch`` when given, else 8 on a CUDA GPU (one
        batched ``generate`` of 16 sequences took 1.06x one answer's time on an H200), 1
        elsewhere (a CPU computes each sequence anyway)."""
        if self._batch is not None:
            return self._batch
        return 8 if self.device == "cuda" else 1

    # -- generation ---------------------------------------------------------------------

    def _generate(
        self, request: CompletionRequest, n: int, cancelled: threading.Event
    ) -> list[Completion]:
        """``n`` answers to ``request`` from ONE ``generate`` call (``num_return_sequences``),
        in the calling thread; queued behind any generation already running."""
        torch, tf = self._torch, self._tf
        max_tokens = request.max_tokens
        prompt = self.render_prompt(request.messages)
        inputs = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        inputs = {k: v.to(self.lm.device) for k, v in inputs.items()}
        prompt_len = int(inputs["input_ids"].shape[1])
        reply = ReplyStream(request.on_token if n == 1 else None)
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        sampled = request.temperature > 0
        rows = n if sampled else 1  # n greedy answers are one answer n times
        stop = _BatchStop(self, request, rows, prompt_len, cancelled)
        kwargs: dict[str, Any] = {
            **inputs,
            "max_new_tokens": max_tokens,
            "stopping_criteria": tf.StoppingCriteriaList([stop.criteria()]),
            "pad_token_id": pad,
            "num_return_sequences": rows,
        }
        if sampled:
            kwargs.update(do_sample=True, temperature=request.temperature)
        else:
            kwargs.update(do_sample=False)

        with self._queue, torch.inference_mode():
            stop.started = time.monotonic()  # the timeout counts from this call's turn
            if request.seed is not None and request.temperature > 0:
                torch.manual_seed(int(request.seed))
            if reply.on_token is None:
                output = self.lm.generate(**kwargs)
            else:
                output = self._streamed(kwargs, reply)

        if cancelled.is_set():
            raise asyncio.CancelledError()
        done = [stop.completion(self, reply, output[i], i) for i in range(rows)]
        return done if sampled else done * n

    def _streamed(self, kwargs: dict[str, Any], reply: ReplyStream) -> Any:
        """``generate`` in a helper thread, its fragments passed to ``reply`` as they come."""
        torch, tf = self._torch, self._tf
        streamer = tf.TextIteratorStreamer(
            self.tokenizer, skip_prompt=True, skip_special_tokens=True
        )
        result: dict[str, Any] = {}

        def run() -> None:
            try:
                with torch.inference_mode():
                    result["output"] = self.lm.generate(**kwargs, streamer=streamer)
            except BaseException as exc:
                result["error"] = exc
                streamer.end()

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        for piece in streamer:
            reply.add(piece)
        worker.join()
        if "error" in result:
            raise result["error"]
        return result["output"]

    async def _in_worker(self, request: CompletionRequest, n: int) -> list[Completion]:
        """Generate in a worker thread that stops at the next token when the caller cancels
        (a stopped cell, a run's time budget): the whole batch stops."""
        cancelled = threading.Event()
        try:
            return await asyncio.to_thread(self._generate, request, n, cancelled)
        except asyncio.CancelledError:
            cancelled.set()  # the worker thread stops at its next token
            raise

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        """Generate locally (see :meth:`_in_worker`). ``schema`` is not enforced by decoding
        here: callers use :func:`selfheal.llm.ask.ask_structured`, which salvages and retries."""
        return (await self._in_worker(request, 1))[0]

    async def _acomplete_many(self, request: CompletionRequest, n: int) -> list[Completion]:
        """``n`` answers from one ``generate(num_return_sequences=n)``: on a GPU the batch
        costs about what one answer costs. Sampled when ``temperature > 0`` (``seed`` seeds the
        batch); stop strings and ``max_tokens`` hold per sequence; ``on_token`` is not called
        (a batch has no one stream)."""
        return await self._in_worker(request.replace(on_token=None), n)


class _FifoLock:
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


class _BatchStop:
    """Where each sequence of one ``generate`` ends, checked after every token: the
    end-of-sequence token or a stop string (on the decoded reply, so any tokenizer works) ends
    that sequence; cancellation or the deadline ends them all."""

    def __init__(
        self,
        provider: HFProvider,
        request: CompletionRequest,
        n: int,
        prompt_len: int,
        cancelled: threading.Event,
    ) -> None:
        self.torch = provider._torch
        self.base = provider._tf.StoppingCriteria
        self.tokenizer = provider.tokenizer
        self.stops = [s for s in request.stop if s]
        self.max_tokens = request.max_tokens
        self.prompt_len = prompt_len
        self.cancelled = cancelled
        self.timeout = provider.timeout
        self.started = time.monotonic()
        self.ended: list[int | None] = [None] * n
        """New tokens of each sequence when it ended (its end token included)."""
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
        for i in range(rows):
            if self.ended[i] is not None:
                continue
            if int(input_ids[i, -1]) in self.eos:
                self.ended[i] = made
            elif self.stops:
                text = self.tokenizer.decode(
                    input_ids[i, self.prompt_len :], skip_special_tokens=True
                )
                if any(s in text for s in self.stops):
                    self.ended[i] = made
        done = [e is not None for e in self.ended[:rows]]
        return self.torch.tensor(done, dtype=self.torch.bool, device=input_ids.device)

    def completion(self, provider: HFProvider, reply: ReplyStream, row: Any, i: int) -> Completion:
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
