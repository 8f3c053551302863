"""The offline default provider: a GGUF model run in-process by llama-cpp-python.

``LlamaCppProvider.from_default()`` uses Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) from
:func:`selfheal.models.ensure_model`. The model is loaded once per process and shared by
every provider on the same file (several agent roles use one model); calls on one model are
serialised by a lock, because a llama.cpp context is not thread-safe.

What the provider does with a request:

* formats the messages with the chat template stored in the GGUF (the same
  ``Jinja2ChatFormatter`` llama-cpp-python's ``create_chat_completion`` uses);
* tokenizes once, so ``prompt_tokens`` is exact;
* with ``schema``, constrains decoding with a grammar compiled from the JSON schema (the
  same ``response_format={"type": "json_object", "schema": ...}`` path of
  ``create_chat_completion``), so the reply is JSON that matches the schema;
* streams every fragment to ``on_token``; ``acomplete`` runs in a worker thread, delivers
  ``on_token`` on the event loop's thread, and stops generating at the next token when the
  awaiting task is cancelled;
* keeps llama.cpp's KV cache between calls: a prompt that shares a prefix with the previous
  one only evaluates the differing suffix (see ``benchmarks/bench_llamacpp.py``).

llama-cpp-python compiles from source; build it with ``make install`` /
``scripts/install_llama_cpp.sh`` (a plain ``pip install`` builds for the native CPU, which
crashed on AVX-512 Xeons, see ``docs/local_model.md``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from selfheal.errors import ConfigError, MissingDependency, ProviderError
from selfheal.llm.base import Completion, Message, TokenCallback
from selfheal.models import DEFAULT_MODEL, default_model_path, ensure_model

__all__ = ["DEFAULT_N_CTX", "LlamaCppProvider", "default_threads", "import_llama_cpp"]

DEFAULT_N_CTX = 8192
"""Context length: enough for every selfheal prompt plus a reply."""

_INSTALL_HINT = "the offline local model"
_INSTALL_HOW = (
    "`make install` in a selfheal checkout (or scripts/install_llama_cpp.sh), which sets the "
    "CMake flags a plain `pip install llama-cpp-python` cannot"
)


def import_llama_cpp() -> Any:
    """Import ``llama_cpp`` or raise :class:`MissingDependency` pointing at ``make install``.

    Sets ``OMP_WAIT_POLICY=PASSIVE`` (unless already set) before the native library loads:
    llama.cpp's CPU build synchronises its threads with OpenMP barriers, and with the default
    spin-waiting a 2-thread decode on a busy 2-core machine (kernels, tests, another model)
    ran 6x slower (0.44 vs 2.7 tokens/s, docs/local_model.md). Set ``OMP_WAIT_POLICY=ACTIVE``
    yourself on a dedicated machine if you measure it faster there.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingDependency(
            "llama-cpp-python", "local", purpose=_INSTALL_HINT, install=_INSTALL_HOW
        ) from exc
    return llama_cpp


def default_threads() -> int:
    """The number of cores this process may use (CPU affinity aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class _LoadedModel:
    """One llama.cpp model + context, its chat formatter and the lock that guards it."""

    def __init__(self, llama: Any, formatter: Any) -> None:
        self.llama = llama
        self.formatter = formatter
        self.lock = threading.Lock()
        self.grammars: dict[str, Any] = {}


_LOADED: dict[tuple[str, int, int, int], _LoadedModel] = {}
_LOADED_LOCK = threading.Lock()


def _load(path: Path, *, n_ctx: int, n_threads: int, n_gpu_layers: int) -> _LoadedModel:
    key = (str(path.resolve()), n_ctx, n_threads, n_gpu_layers)
    with _LOADED_LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        llama_cpp = import_llama_cpp()
        from llama_cpp import llama_chat_format

        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_gpu_layers=n_gpu_layers,
                seed=0,
                verbose=False,
            )
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
            raise ConfigError(
                f"llama.cpp could not load {str(path)!r} ({exc}). Check that it is a complete "
                "GGUF file (`python -m selfheal.models verify` for the default model)."
            ) from exc
        template = (
            llama.metadata.get("tokenizer.chat_template") or llama_chat_format.CHATML_CHAT_TEMPLATE
        )
        eos_id = llama.token_eos()
        bos_id = llama.token_bos()
        formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
            stop_token_ids=[eos_id],
        )
        loaded = _LoadedModel(llama, formatter)
        _LOADED[key] = loaded
        return loaded


class _Cancelled(Exception):
    pass


class LlamaCppProvider:
    """A :class:`~selfheal.llm.base.Provider` backed by an in-process llama.cpp model.

    ``model_path`` is a GGUF file. ``n_threads`` defaults to the usable cores,
    ``n_gpu_layers`` to 0 (CPU; -1 offloads every layer with a CUDA build). The model is
    loaded on first use, or by :meth:`load`.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        name: str | None = None,
    ) -> None:
        import_llama_cpp()  # fail now, not on the first call
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ConfigError(
                f"Model file {str(self.model_path)!r} does not exist. Use "
                "LlamaCppProvider.from_default() for the default model, or pass a GGUF path."
            )
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_gpu_layers = n_gpu_layers
        if name is None:
            same = self.model_path.resolve() == default_model_path().resolve()
            name = DEFAULT_MODEL.name if same else self.model_path.stem.lower()
        self._name = name

    @classmethod
    def from_default(cls, *, progress: bool = True, **kwargs: Any) -> LlamaCppProvider:
        """The default model (assembled into the user cache on first use)."""
        import_llama_cpp()
        return cls(ensure_model(progress=progress), name=DEFAULT_MODEL.name, **kwargs)

    @classmethod
    def from_path(cls, path: str, **kwargs: Any) -> LlamaCppProvider:
        """``local:<path>``: a GGUF path, or the default model's name (or ``default``)."""
        if path in ("", "default", DEFAULT_MODEL.name):
            return cls.from_default(**kwargs)
        return cls(path, **kwargs)

    @property
    def model_id(self) -> str:
        """``local:<model name>``."""
        return f"local:{self._name}"

    def load(self) -> None:
        """Load the model now (otherwise the first call does it)."""
        self._loaded()

    def _loaded(self) -> _LoadedModel:
        return _load(
            self.model_path,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_gpu_layers=self.n_gpu_layers,
        )

    @property
    def llama(self) -> Any:
        """The underlying ``llama_cpp.Llama`` (shared; hold no reference across calls)."""
        return self._loaded().llama

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by the model's own tokenizer (no BOS, special tokens parsed)."""
        return len(self._loaded().llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    # ------------------------------------------------------------------ generation

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        """Generate a reply (blocking; calls on one model run one at a time)."""
        return self._generate(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            schema=schema,
            on_token=on_token,
            cancel=None,
        )

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        """Like :meth:`complete`, in a worker thread. ``on_token`` runs on the loop's thread;
        cancelling the awaiting task stops generation at the next token."""
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        relay: TokenCallback | None = None
        if on_token is not None:
            callback = on_token

            def relay(piece: str) -> None:
                loop.call_soon_threadsafe(callback, piece)

        try:
            return await asyncio.to_thread(
                self._generate,
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                stop=stop,
                schema=schema,
                on_token=relay,
                cancel=cancel,
            )
        except asyncio.CancelledError:
            cancel.set()
            raise

    def _grammar(self, loaded: _LoadedModel, schema: dict[str, Any]) -> Any:
        from llama_cpp import llama_grammar

        key = json.dumps(schema, sort_keys=True)
        grammar = loaded.grammars.get(key)
        if grammar is None:
            try:
                grammar = llama_grammar.LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:
                raise ConfigError(
                    f"This JSON schema cannot be turned into a llama.cpp grammar ({exc}). "
                    "Simplify it (plain objects, arrays, strings, numbers, enums work), or "
                    "call without `schema` and validate the reply yourself."
                ) from exc
            loaded.grammars[key] = grammar
        return grammar

    def _generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        schema: dict[str, Any] | None,
        on_token: TokenCallback | None,
        cancel: threading.Event | None,
    ) -> Completion:
        from llama_cpp import StoppingCriteriaList

        loaded = self._loaded()
        llama = loaded.llama
        started = time.perf_counter()
        formatted = loaded.formatter(
            messages=[{"role": m.role, "content": m.content} for m in messages]
        )
        prompt = llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        room = self.n_ctx - len(prompt)
        if room < 16:
            raise ConfigError(
                f"The prompt is {len(prompt):,} tokens; the context holds {self.n_ctx:,}. "
                "Shorten the prompt or create the provider with a larger n_ctx."
            )
        budget = min(max_tokens, room)
        stops = [s for s in (stop or []) if s]
        fstop = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]
        stops += [s for s in fstop if s and s not in stops]
        grammar = self._grammar(loaded, schema) if schema is not None else None

        # llama-cpp-python calls the stopping criteria once per sampled token and once more
        # after the loop ends: the calls minus one are the tokens generated.
        calls = 0
        chat_stop = formatted.stopping_criteria

        def criteria(input_ids: Any, logits: Any) -> bool:
            nonlocal calls
            calls += 1
            if cancel is not None and cancel.is_set():
                raise _Cancelled
            return bool(chat_stop(input_ids, logits)) if chat_stop is not None else False

        pieces: list[str] = []
        finish = ""
        first: float | None = None
        with loaded.lock:
            try:
                stream = llama.create_completion(
                    prompt=prompt,
                    max_tokens=budget,
                    temperature=temperature,
                    stop=stops,
                    grammar=grammar,
                    repeat_penalty=1.0,
                    stream=True,
                    stopping_criteria=StoppingCriteriaList([criteria]),
                )
                for chunk in stream:
                    choice = chunk["choices"][0]
                    piece = choice["text"]
                    if piece:
                        if first is None:
                            first = time.perf_counter() - started
                        pieces.append(piece)
                        if on_token is not None:
                            on_token(piece)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                calls -= 1
            except _Cancelled:
                finish = "cancelled"
            except (RuntimeError, ValueError) as exc:
                raise ProviderError(
                    f"llama.cpp failed while generating ({exc}). If this repeats, rebuild "
                    "llama-cpp-python with `make install` and run `selfheal doctor`.",
                    provider="local",
                    model=self._name,
                ) from exc
        return Completion(
            text="".join(pieces),
            prompt_tokens=len(prompt),
            completion_tokens=max(calls, 0),
            latency=time.perf_counter() - started,
            model=self.model_id,
            finish_reason=finish or "stop",
            time_to_first_token=first,
        )
