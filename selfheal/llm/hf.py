"""A provider for transformers causal language models (``hf:ORG/NAME`` or a local folder): the
best device, the tokenizer's chat template, generation in a worker thread that stops when the
call is cancelled, and ``complete_many(n)`` as one batch (:mod:`selfheal.llm.hf_batch`;
docs/llm.md, docs/gpu.md)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from selfheal.errors import MissingDependency, ModelNotFound
from selfheal.llm.base import Completion, CompletionRequest, Message, ProviderBase
from selfheal.llm.hf_batch import AllCancelled, Ask, BatchStop, Cancelled, FifoLock, Waiting
from selfheal.llm.stream import ReplyStream

FALLBACK_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)
"""Used when a tokenizer has no chat template of its own."""
WARM_TOKENS = 16
"""New tokens of each warm-up answer (:meth:`HFProvider.warm_up`)."""


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

    backend = "hf"

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
        warm: bool | None = None,
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
        self._queue = FifoLock()  # one generation at a time per loaded model, in order
        self._waiting = Waiting()  # sampled answers to one prompt, decoded together
        self.warmed: dict[int, float] = {}
        """Batch sizes warmed up (:meth:`warm_up`), with the seconds each took."""
        self._warming: list[threading.Thread] = []
        if warm or (warm is None and self.device == "cuda"):
            self.warm_up((1, self.batch_hint))

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
        """Answers worth decoding at once: ``batch`` when given, else 8 on a CUDA GPU, 1
        elsewhere (docs/gpu.md)."""
        if self._batch is not None:
            return self._batch
        return 8 if self.device == "cuda" else 1

    @property
    def batch_free(self) -> bool:  # type: ignore[override]
        """On a CUDA GPU a batch costs about one answer (16 answers 0.99x one on an H100,
        docs/gpu.md); not on a CPU."""
        return self.device == "cuda"

    def warm_up(self, sizes: Sequence[int], tokens: int = WARM_TOKENS) -> None:
        """Decode a short answer once at each batch size of ``sizes`` not warmed yet, in a background
        thread, each size its own turn in the queue (docs/gpu.md, "Each batch size warmed once")."""
        todo = [n for n in dict.fromkeys(sizes) if n >= 1 and n not in self.warmed]
        if not todo:
            return
        self.warmed.update({n: 0.0 for n in todo})  # claimed: asked once
        prompt = self.render_prompt([Message(role="user", content="Write def add(a, b).")])

        def run() -> None:
            torch = self._torch
            ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
            ids = {k: v.to(self.lm.device) for k, v in ids.items()}
            pad = self.tokenizer.pad_token_id
            pad = self.tokenizer.eos_token_id if pad is None else pad
            for n in todo:
                with self._queue, torch.inference_mode():
                    start = time.monotonic()
                    try:
                        self.lm.generate(
                            **ids,
                            max_new_tokens=tokens,
                            min_new_tokens=tokens,
                            num_return_sequences=n,
                            do_sample=n > 1,
                            pad_token_id=pad,
                        )
                    except Exception:  # a warm-up is an optimisation: a real call will say
                        self.warmed.pop(n, None)
                        continue
                    self.warmed[n] = time.monotonic() - start

        thread = threading.Thread(target=run, name="selfheal-hf-warm-up", daemon=True)
        self._warming.append(thread)
        thread.start()

    def wait_warm(self) -> dict[int, float]:
        """Wait for the warm-ups asked so far; returns :attr:`warmed`."""
        for thread in list(self._warming):
            thread.join()
        return dict(self.warmed)

    def _generate(
        self, request: CompletionRequest, n: int, cancelled: threading.Event
    ) -> list[Completion]:
        """``n`` answers to ``request`` from ONE ``generate`` call, in the calling thread,
        queued behind any generation already running. A single sampled answer joins the others
        with its prompt and options that wait at the same time (:class:`Waiting`)."""
        if n > 1 or request.temperature <= 0:
            with self._queue:
                return self._decode(request, n, cancelled)
        ask = Ask(request, cancelled)
        self._waiting.join(ask)
        with self._queue:
            group = self._waiting.take(ask)
            if group:  # this one's turn came first: it decodes the group as one batch
                alone = request if len(group) == 1 else request.replace(on_token=None)
                try:
                    for member, done in zip(
                        group, self._decode(alone, len(group), AllCancelled(group)), strict=True
                    ):
                        member.result = done
                except BaseException as exc:
                    for member in group:
                        member.error = exc
        if cancelled.is_set():
            raise asyncio.CancelledError()
        if ask.error is not None:
            raise ask.error
        assert ask.result is not None
        return [ask.result]

    def _decode(self, request: CompletionRequest, n: int, cancelled: Cancelled) -> list[Completion]:
        """``n`` answers from ONE ``generate`` call (``num_return_sequences``), the caller
        holding the queue."""
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
        stop = BatchStop(self, request, rows, prompt_len, cancelled)
        kwargs: dict[str, Any] = {
            **inputs,
            "max_new_tokens": max_tokens,
            "stopping_criteria": tf.StoppingCriteriaList([stop.criteria()]),
            "pad_token_id": pad,
            "num_return_sequences": rows,
            "do_sample": sampled,
        }
        if sampled:
            kwargs["temperature"] = request.temperature

        with torch.inference_mode():
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
        """``n`` answers from one ``generate(num_return_sequences=n)`` (docs/gpu.md); stop
        strings and ``max_tokens`` hold per sequence; ``on_token`` is not called."""
        return await self._in_worker(request.replace(on_token=None), n)
