"""Which ``llama-server`` to run and how: :func:`find_server_binary` finds the build
``make install`` cached (docs/local_model.md, "Install"), :func:`build_info` reads its build
record, and :func:`server_settings` gives the settings a server starts with (slots, context,
threads, extra arguments, prompt copying) from arguments and the environment."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from selfheal._record import Record
from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError, MissingDependency
from selfheal.local.weights import cache_dir, ensure_model

DEFAULT_SLOTS = 4
"""Parallel slots on a CPU: 4 answers at once cost about 2.4x one (docs/local_model.md)."""
DEFAULT_CTX_PER_SLOT = 4096
"""Context tokens per slot: the longest selfheal prompt plus its reply."""

INSTALL = f"{LOCAL_MODEL_INSTALL}, which builds llama-server (about 5-8 min, once)"


def log_dir() -> Path:
    """Where server logs go: ``$XDG_STATE_HOME/selfheal/llama-server`` (default
    ``~/.local/state/selfheal/llama-server``)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "selfheal" / "llama-server"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_server_binary() -> Path | None:
    """The ``llama-server`` to run, or None when there is none.

    Order: ``$SELFHEAL_LLAMA_SERVER`` (a path; a missing file is a :class:`ConfigError`);
    the build ``make install`` made (``<cache>/llama-server/current`` names it; else the
    newest cached build); a ``llama-server`` on ``PATH``."""
    explicit = os.environ.get("SELFHEAL_LLAMA_SERVER", "").strip()
    if explicit:
        p = Path(explicit).expanduser()
        if not _executable(p):
            raise ConfigError(
                f"SELFHEAL_LLAMA_SERVER={explicit!r} is not an executable file. Fix or unset it "
                f"(unset, the server built by {INSTALL} is used)."
            )
        return p
    root = cache_dir() / "llama-server"
    with contextlib.suppress(OSError):
        current = (root / "current").read_text().strip()
        if current:
            p = root / current / "bin" / "llama-server"
            if _executable(p):
                return p
    builds: list[tuple[float, Path]] = []
    with contextlib.suppress(OSError):
        for d in root.iterdir():
            p = d / "bin" / "llama-server"
            if _executable(p) and (d / "build.json").is_file():
                builds.append(((d / "build.json").stat().st_mtime, p))
    if builds:
        return max(builds)[1]
    found = shutil.which("llama-server")
    return Path(found) if found else None


def build_info(binary: str | os.PathLike[str]) -> dict[str, Any]:
    """``build.json`` of a cached build (version, CMake flags, build seconds), or ``{}``."""
    path = Path(binary).resolve().parent.parent / "build.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


GPU_LAYERS = 99
"""``--n-gpu-layers`` of a CUDA build: every layer of any model selfheal serves on the GPU."""


def is_cuda_build(info: dict[str, Any]) -> bool:
    """Whether a build's ``build.json`` says it was built with ``-DGGML_CUDA=ON``."""
    return "GGML_CUDA=ON" in str(info.get("cmake_args", "")).upper()


def default_threads() -> int:
    """The number of cores this process may use (CPU affinity aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


Drafts = Literal["none", "ngram-simple", "ngram-mod", "ngram-cache"]
"""llama-server's speculative decoding without a draft model (``--spec-type``): tokens are
drafted from n-grams already in the context and checked in one batch."""


class ServerSettings(Record):
    """How to run one llama-server."""

    binary: str
    """The ``llama-server`` executable."""
    model_path: str
    """The GGUF file served."""
    alias: str
    """The model name the server answers to (``model`` in requests)."""
    slots: int = DEFAULT_SLOTS
    """Parallel slots (``-np``): requests decoded together."""
    ctx_per_slot: int = DEFAULT_CTX_PER_SLOT
    """Context tokens of each slot; the server gets ``-c slots * ctx_per_slot``."""
    threads: int = 1
    """CPU threads (``-t`` and ``-tb``)."""
    gpu_layers: int | None = None
    """``-ngl``: layers offloaded to a GPU (set for a CUDA build), None for none."""
    extra_args: tuple[str, ...] = ()
    """More llama-server arguments (``$SELFHEAL_LLAMA_SERVER_ARGS``)."""
    drafts: Drafts = "ngram-simple"
    """Speculative decoding from n-grams of the context (``--spec-type``; ``none``: off;
    ``$SELFHEAL_LOCAL_DRAFTS``): the same answers, faster (docs/local_model.md)."""
    one_request: bool = True
    """Several answers to one prompt go out as one request for ``n`` (the server processes
    the prompt once; ``OpenAICompatible.one_request``); ``$SELFHEAL_LOCAL_ONE_REQUEST=0``:
    one request an answer."""

    def argv(self, port: int) -> list[str]:
        """The command line (the API key is passed in the environment). No
        ``--slot-save-path``: without one llama-server refuses every ``/slots`` action."""
        options = {
            "--model": self.model_path,
            "--alias": self.alias,
            "--host": "127.0.0.1",
            "--port": port,
            "--parallel": self.slots,
            "--ctx-size": self.slots * self.ctx_per_slot,
            "--threads": self.threads,
            "--threads-batch": self.threads,
            "--n-gpu-layers": self.gpu_layers,
            "--spec-type": self.drafts if self.drafts != "none" else None,
        }
        args = [self.binary]
        for flag, value in options.items():
            if value is not None:
                args += [flag, str(value)]
        # --jinja: the model's own chat template, which native tool calls need (the default of
        # the pinned build; explicit so an older build does it too)
        return [*args, "--no-webui", "--jinja", *self.extra_args]


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number.") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}.")
    return value


def server_settings(
    model_path: str | os.PathLike[str] | None = None,
    *,
    slots: int | None = None,
    ctx_per_slot: int | None = None,
    threads: int | None = None,
    binary: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    progress: bool = True,
) -> ServerSettings:
    """Settings for serving ``model_path`` (default: the installed model, assembled if its
    parts are installed). Arguments win over the environment: ``SELFHEAL_LOCAL_SLOTS``,
    ``SELFHEAL_LOCAL_CTX`` (per slot), ``SELFHEAL_LOCAL_THREADS``,
    ``SELFHEAL_LLAMA_SERVER_ARGS``, ``SELFHEAL_LOCAL_ONE_REQUEST`` (``0``: off),
    ``SELFHEAL_LOCAL_DRAFTS`` (``none`` or an n-gram ``--spec-type``). Raises
    :class:`MissingDependency` when there is no server binary, :class:`ConfigError` for a bad
    value."""
    env = os.environ if env is None else env
    drafts = env.get("SELFHEAL_LOCAL_DRAFTS", "ngram-simple").strip().lower() or "ngram-simple"
    if drafts not in get_args(Drafts):
        raise ConfigError(
            f"SELFHEAL_LOCAL_DRAFTS={drafts!r}: must be one of "
            f"{', '.join(get_args(Drafts))} (none turns speculative decoding off)."
        )
    if binary is None:
        found = find_server_binary()
        if found is None:
            raise MissingDependency("llama-server", "local", "the local model", install=INSTALL)
        binary = found
    path = Path(model_path).expanduser() if model_path else ensure_model(progress=progress)
    if not path.is_file():
        raise ConfigError(f"Model file {str(path)!r} does not exist; pass a GGUF file.")
    cuda = is_cuda_build(build_info(binary))
    return ServerSettings(
        binary=str(binary),
        model_path=str(path.resolve()),
        alias=path.stem,
        slots=slots or env_int(env, "SELFHEAL_LOCAL_SLOTS", 8 if cuda else DEFAULT_SLOTS),
        ctx_per_slot=ctx_per_slot or env_int(env, "SELFHEAL_LOCAL_CTX", DEFAULT_CTX_PER_SLOT, 256),
        threads=threads or env_int(env, "SELFHEAL_LOCAL_THREADS", default_threads()),
        gpu_layers=GPU_LAYERS if cuda else None,
        extra_args=tuple(shlex.split(env.get("SELFHEAL_LLAMA_SERVER_ARGS", ""))),
        one_request=env.get("SELFHEAL_LOCAL_ONE_REQUEST", "1").strip().lower()
        not in ("0", "off", "false", "no"),
        drafts=drafts,  # type: ignore[arg-type]  # checked above
    )
