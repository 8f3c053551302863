"""A provider for transformers causal language models (``hf:ORG/NAME`` or a local folder).

Loads with ``AutoTokenizer`` / ``AutoModelForCausalLM`` on the best device (CUDA, then
Apple MPS, then CPU), in 4-bit on CUDA when ``bitsandbytes`` is installed, or from a GGUF
file (``gguf_file=``). Prompts go through the tokenizer's chat template. Streaming uses
``TextIteratorStreamer``; token counts come from the real tokenizer. Generation runs in a
worker thread for async callers, and stops when the call is cancelled or its timeout passes.
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
    ) -> None:
        self._torch, self._tf = _imports()
        self.model = model
        self.device = device or pick_device(self._torch)
        self.timeout = timeout
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
        self._lock = threading.Lock()  # one generation at a time per loaded model

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
        """The prompt text the chat template makes of ``messages``."""
        rendered = self.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False,
            add_generation_prompt=True,
        )
        return str(rendered)

    # -- generation ---------------------------------------------------------------------

    def _generate(self, request: CompletionRequest, cancelled: threading.Event) -> Completion:
        torch, tf = self._torch, self._tf
        max_tokens = request.max_tokens
        prompt = self.render_prompt(request.messages)
        inputs = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        inputs = {k: v.to(self.lm.device) for k, v in inputs.items()}
        prompt_len = int(inputs["input_ids"].shape[1])
        reply = ReplyStream(request.on_token)
        deadline = reply.started + self.timeout

        tokenizer = self.tokenizer
        stops = [s for s in request.stop if s]

        class _Stop(tf.StoppingCriteria):  # type: ignore[misc,name-defined]
            """Cancellation, the deadline, and stop strings (checked on the decoded reply,
            so it works with any tokenizer)."""

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
                if cancelled.is_set() or time.monotonic() > deadline:
                    return True
                if stops:
                    reply = tokenizer.decode(input_ids[0][prompt_len:], skip_special_tokens=True)
                    return any(s in reply for s in stops)
                return False

        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        kwargs: dict[str, Any] = {
            **inputs,
            "max_new_tokens": max_tokens,
            "stopping_criteria": tf.StoppingCriteriaList([_Stop()]),
            "pad_token_id": pad,
        }
        if request.temperature > 0:
            kwargs.update(do_sample=True, temperature=request.temperature)
        else:
            kwargs.update(do_sample=False)

        with self._lock, torch.inference_mode():
            if request.on_token is None:
                output = self.lm.generate(**kwargs)
            else:
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
                output = result["output"]

        if cancelled.is_set():
            raise asyncio.CancelledError()
        new_ids = output[0][prompt_len:].tolist()
        if time.monotonic() > deadline and len(new_ids) < max_tokens:
            raise ProviderTimeout(
                f"hf:{self.model} did not finish within {self.timeout:g} s "
                f"({len(new_ids)} tokens generated). Raise the timeout or lower max_tokens.",
                provider="hf",
                model=self.model,
            )
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        finish = "stop"
        cut = min((text.find(s) for s in stops if s in text), default=-1)
        if cut >= 0:
            text = text[:cut]
        elif len(new_ids) >= max_tokens and (not new_ids or new_ids[-1] != eos):
            finish = "length"
        return reply.completion(
            text=text,
            prompt_tokens=prompt_len,
            completion_tokens=len(new_ids),
            model=self.model_id,
            finish_reason=finish,
        )

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        """Generate locally, in a worker thread that stops at the next token when the caller
        cancels. ``schema`` is not enforced by decoding here: callers use
        :func:`selfheal.llm.ask.ask_structured`, which salvages and retries."""
        cancelled = threading.Event()
        try:
            return await asyncio.to_thread(self._generate, request, cancelled)
        except asyncio.CancelledError:
            cancelled.set()  # the worker thread stops at its next token
            raise
