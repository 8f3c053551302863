"""What ``selfheal doctor`` asks of the local engine: the model file, the llama-server build,
and a live server's one short generation with the speed it measured, as records and as the
report's lines."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx

from selfheal._record import Record
from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError, SelfHealError
from selfheal.local.server import LocalServer
from selfheal.local.settings import build_info, find_server_binary, is_cuda_build, server_settings
from selfheal.local.weights import DEFAULT_MODEL, find_model, verify_model


class ProbeResult(Record):
    """One short generation through a server (``selfheal doctor``)."""

    ok: bool
    """It answered."""
    seconds: float = 0.0
    """Wall time of the request."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Generated tokens."""
    generated_per_second: float | None = None
    """Decode speed the server measured (``timings.predicted_per_second``)."""
    prompt_per_second: float | None = None
    """Prompt speed the server measured (``timings.prompt_per_second``)."""
    sample: str = ""
    """The start of the reply."""
    error: str = ""
    """What went wrong."""


def probe(
    base_url: str, api_key: str, *, model: str = "local", max_tokens: int = 32
) -> ProbeResult:
    """Ask the server for a short function and report its speed (one plain HTTP request)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Write a Python function add(a, b). Code only."}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "cache_prompt": False,
    }
    started = time.monotonic()
    try:
        r = httpx.post(
            base_url.rstrip("/") + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=300,
        )
        r.raise_for_status()
        data = r.json()
    except (httpx.HTTPError, ValueError) as exc:
        return ProbeResult(ok=False, error=f"{type(exc).__name__}: {exc}")
    usage = data.get("usage") or {}
    timings = data.get("timings") or {}
    text = ((data.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
    return ProbeResult(
        ok=True,
        seconds=round(time.monotonic() - started, 2),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        generated_per_second=_round(timings.get("predicted_per_second")),
        prompt_per_second=_round(timings.get("prompt_per_second")),
        sample=text.strip()[:80],
    )


def _round(value: object) -> float | None:
    return round(float(value), 2) if isinstance(value, (int, float)) else None


class ModelCheck(Record):
    """The local model file, and a real load + generate on llama-server."""

    path: str | None = None
    """Where the model file is; None when not installed."""
    size: int | None = None
    """File size in bytes."""
    verified: bool | None = None
    """Size and sha256 match the default model (None: not checked or a custom file)."""
    loads: bool | None = None
    """The server loaded the model and generated text (None: not tried)."""
    load_seconds: float | None = None
    """Seconds from starting llama-server to a healthy server (the model loaded)."""
    tokens_per_second: float | None = None
    """Generated tokens per second of one greedy request (the server's own timing)."""
    sample: str = ""
    """The start of the generated text."""
    error: str = ""
    """What went wrong, when something did."""


class ServerCheck(Record):
    """The llama-server build and, when tried, a running server."""

    binary: str | None = None
    """The ``llama-server`` selfheal runs; None when not built."""
    version: str = ""
    """``llama-server --version``."""
    cmake_args: str = ""
    """The CMake flags of the cached build (its ``build.json``)."""
    cuda: bool | None = None
    """A CUDA build (``-DGGML_CUDA=ON``: the server runs every layer on the GPU), a CPU build
    (False), or unknown (None: no build record)."""
    build_seconds: int | None = None
    """How long that build took."""
    shared_url: str = ""
    """``$SELFHEAL_LOCAL_URL``: a server selfheal uses instead of starting one."""
    slots: int | None = None
    """Parallel slots (``-np``)."""
    one_request: bool | None = None
    """Several answers to one prompt asked as one request (``SELFHEAL_LOCAL_ONE_REQUEST``)."""
    drafts: str | None = None
    """Speculative decoding from n-grams (``--spec-type``; ``SELFHEAL_LOCAL_DRAFTS``)."""
    ctx_per_slot: int | None = None
    """Context tokens per slot."""
    threads: int | None = None
    """CPU threads."""
    port: int | None = None
    """The port the probe server listened on."""
    healthy: bool | None = None
    """``/health`` answered 200 (None: not tried)."""
    prompt_tokens_per_second: float | None = None
    """Prompt processing speed of the probe."""
    log: str = ""
    """The server's log file."""
    error: str = ""
    """What went wrong, when something did."""


def model_file() -> ModelCheck:
    """The model file: where it is, its size, its verification."""
    try:
        path = find_model()
    except ConfigError as exc:
        return ModelCheck(error=str(exc))
    if path is None:
        return ModelCheck(error=f"not installed: run {LOCAL_MODEL_INSTALL}")
    size = path.stat().st_size
    verified = verify_model(path) if size == DEFAULT_MODEL.size else None
    check = ModelCheck(path=str(path), size=size, verified=verified)
    if verified is False:
        return check.model_copy(
            update={"error": "corrupt: `python -m selfheal.local.weights install` rebuilds it"}
        )
    return check


_CHECKOUT = Path(__file__).resolve().parents[2]
"""The repository's root when selfheal runs from a clone (a pip install has no Makefile there)."""


def install_command(root: Path | None = None) -> str:
    """What installs the local model here: ``make install`` in a clone of the repository (its
    Makefile is at ``root``), else ``selfheal install`` (a pip install)."""
    root = _CHECKOUT if root is None else root
    clone = (root / "Makefile").is_file() and (root / "selfheal" / "__init__.py").is_file()
    return "make install" if clone else "selfheal install"


def build_kind(cuda: bool, root: Path | None = None) -> str:
    """Which llama-server build is in use, as ``doctor`` says it."""
    if cuda:
        return "CUDA: every layer on the GPU (--n-gpu-layers 99)"
    return f"CPU (SELFHEAL_LLAMA_CUDA=1 {install_command(root)} builds for an NVIDIA GPU)"


def server_build() -> ServerCheck:
    """The llama-server build: its binary, version, flags, and the shared server's URL."""
    shared = os.environ.get("SELFHEAL_LOCAL_URL", "").strip()
    try:
        binary = find_server_binary()
    except ConfigError as exc:
        return ServerCheck(shared_url=shared, error=str(exc))
    if binary is None:
        return ServerCheck(
            shared_url=shared, error=f"llama-server is not built: run {LOCAL_MODEL_INSTALL}"
        )
    info = build_info(binary)
    version = ""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
        lines = (out.stdout + out.stderr).strip().splitlines()
        version = next((line for line in lines if line.startswith("version")), "")
        if out.returncode != 0:
            how = f"signal {-out.returncode}" if out.returncode < 0 else f"exit {out.returncode}"
            return ServerCheck(
                binary=str(binary),
                shared_url=shared,
                cmake_args=str(info.get("cmake_args", "")),
                error=f"`llama-server --version` failed ({how}); rebuild with {LOCAL_MODEL_INSTALL}",
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ServerCheck(binary=str(binary), shared_url=shared, error=f"cannot run it: {exc}")
    seconds = info.get("build_seconds")
    return ServerCheck(
        binary=str(binary),
        version=version,
        cmake_args=str(info.get("cmake_args", "")),
        cuda=is_cuda_build(info) if info else None,
        build_seconds=int(seconds) if isinstance(seconds, (int, float)) else None,
        shared_url=shared,
    )


def probe_server(model: ModelCheck, server: ServerCheck) -> tuple[ModelCheck, ServerCheck]:
    """Start a server (or use ``$SELFHEAL_LOCAL_URL``'s), generate a little, stop it."""
    if server.shared_url:
        result = probe(server.shared_url, os.environ.get("SELFHEAL_LOCAL_KEY") or "sk-no-key")
        return _with_probe(model, server, result, None)
    if server.binary is None or server.error or model.path is None or model.error:
        return model, server
    try:
        settings = server_settings(model.path, binary=server.binary, progress=False)
    except SelfHealError as exc:
        return model, server.model_copy(update={"error": str(exc)})
    shown = {"slots", "one_request", "drafts", "ctx_per_slot", "threads"}
    server = server.model_copy(update=settings.model_dump(include=shown))
    local = LocalServer(settings, startup_timeout=300)
    try:
        local.start()
    except SelfHealError as exc:
        return (
            model.model_copy(update={"loads": False, "error": "llama-server did not start"}),
            server.model_copy(
                update={"healthy": False, "log": str(local.log_path), "error": str(exc)}
            ),
        )
    try:
        endpoint = local.ensure()
        healthy = local.health()
        result = probe(endpoint.base_url, endpoint.api_key, model=settings.alias)
        server = server.model_copy(
            update={"port": local.port, "healthy": healthy, "log": str(local.log_path)}
        )
        return _with_probe(model, server, result, local.start_seconds)
    finally:
        local.stop()


def _with_probe(
    model: ModelCheck, server: ServerCheck, result: ProbeResult, load_seconds: float | None
) -> tuple[ModelCheck, ServerCheck]:
    if not result.ok:
        return (
            model.model_copy(update={"loads": False}),
            server.model_copy(update={"healthy": False, "error": f"probe failed: {result.error}"}),
        )
    return (
        model.model_copy(
            update={
                "loads": True,
                "load_seconds": round(load_seconds, 2) if load_seconds is not None else None,
                "tokens_per_second": result.generated_per_second,
                "sample": result.sample,
            }
        ),
        server.model_copy(
            update={
                "healthy": True if server.healthy is None else server.healthy,
                "prompt_tokens_per_second": result.prompt_per_second,
            }
        ),
    )


def local_verdict(model: ModelCheck, server: ServerCheck) -> tuple[bool, str]:
    """Whether the ``local`` provider is usable here, and why (or why not)."""
    if server.shared_url:
        usable = server.healthy is not False and not server.error
        return usable, f"shared server at SELFHEAL_LOCAL_URL={server.shared_url}"
    usable = (
        server.binary is not None
        and not server.error
        and model.path is not None
        and model.verified is not False
        and model.loads is not False
    )
    if server.binary is None or server.error:
        return usable, server.error
    if model.path is None or model.loads is False or model.error:
        return usable, model.error or server.error
    speed = f" ({model.tokens_per_second} tokens/s)" if model.tokens_per_second else ""
    return usable, f"{model.path} on llama-server{speed}"


def local_lines(m: ModelCheck, srv: ServerCheck) -> list[str]:
    """The report's sections on the local model and llama-server, as terminal lines."""
    lines = ["local model", f"  path       {m.path or 'not installed'}"]
    if m.size is not None:
        verified = {
            True: "sha256 verified",
            False: "CORRUPT",
            None: "not the default model, not checked",
        }[m.verified]
        lines.append(f"  size       {m.size:,} bytes, {verified}")
    if m.loads is not None:
        if m.loads:
            lines.append(
                f"  generate   ok: load {m.load_seconds}s, {m.tokens_per_second} tokens/s, {m.sample[:50]!r}"
            )
        else:
            lines.append("  generate   FAILED")
    if m.error:
        lines.append(f"  problem    {m.error}")
    lines.append("llama-server")
    if srv.shared_url:
        lines.append(f"  shared     {srv.shared_url} (SELFHEAL_LOCAL_URL)")
    lines.append(f"  binary     {srv.binary or 'not built'}")
    if srv.version:
        lines.append(f"  version    {srv.version}")
    if srv.cuda is not None:
        lines.append(f"  build      {build_kind(srv.cuda)}")
    if srv.cmake_args:
        took = f" (built in {srv.build_seconds} s)" if srv.build_seconds else ""
        lines.append(f"  flags      {srv.cmake_args}{took}")
    if srv.slots is not None:
        lines.append(
            f"  slots      {srv.slots} x {srv.ctx_per_slot} tokens, {srv.threads} threads "
            "(SELFHEAL_LOCAL_SLOTS, SELFHEAL_LOCAL_CTX, SELFHEAL_LOCAL_THREADS)"
        )
    if srv.one_request is not None:
        how = "one request for n" if srv.one_request else "one request an answer"
        lines.append(f"  samples    {how} (SELFHEAL_LOCAL_ONE_REQUEST)")
    if srv.drafts is not None:
        lines.append(f"  drafts     {srv.drafts} speculative decoding (SELFHEAL_LOCAL_DRAFTS)")
    if srv.healthy is not None:
        state = "ok" if srv.healthy else "FAILED"
        where = f" on port {srv.port}" if srv.port else ""
        speed = (
            f", prompt {srv.prompt_tokens_per_second} tokens/s"
            if srv.prompt_tokens_per_second
            else ""
        )
        lines.append(f"  health     {state}{where}{speed}")
    if srv.log:
        lines.append(f"  log        {srv.log}")
    if srv.error:
        lines.append(f"  problem    {srv.error}")
    return lines
