"""``selfheal doctor``: what can run here, and does the local model actually work?

:func:`doctor` collects a :class:`DoctorReport` (which providers are usable, where the local
model is, the llama-server build and its flags, whether the server starts and generates and how
fast, the Jupyter kernels, a GPU); :func:`format_report` renders it for a terminal.

The model runs in llama-server, a separate process, so a broken llama.cpp build (the SIGSEGV of
a native-CPU build on AVX-512 Xeons) is reported instead of killing the caller.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from typing import Literal

from selfheal._record import Record
from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError

__all__ = [
    "DoctorReport",
    "ModelCheck",
    "ProviderCheck",
    "ServerCheck",
    "doctor",
    "format_report",
]

ProviderName = Literal["anthropic", "ollama", "hf", "openai", "local"]

_CPU_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
)


class ProviderCheck(Record):
    """Whether one kind of provider can be used here."""

    name: ProviderName
    """The provider, as in model strings (``anthropic``, ``ollama``, ``hf``, ``openai``,
    ``local``)."""
    usable: bool
    """True when a call could work right now."""
    detail: str
    """Why (or why not), and what to do about it."""


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
    prompt_copy: bool | None = None
    """The slot router copies processed prompts between slots (``SELFHEAL_LOCAL_PROMPT_COPY``)."""
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


class DoctorReport(Record):
    """Everything ``selfheal doctor`` found."""

    python: str
    """Python version and executable."""
    platform: str
    """OS and machine."""
    cpu_count: int
    """Cores this process may use."""
    cpu_flags: tuple[str, ...]
    """SIMD features of the CPU that matter to llama.cpp (from /proc/cpuinfo)."""
    providers: tuple[ProviderCheck, ...]
    """One check per provider kind."""
    auto_choice: str
    """What the model string ``auto`` resolves to here (or why it cannot)."""
    model: ModelCheck
    """The local model."""
    server: ServerCheck
    """llama-server: the build and a probe."""
    kernels: tuple[str, ...]
    """Jupyter kernel names found."""
    gpu: str
    """The GPU found (``nvidia-smi -L``/torch), or empty."""
    sandbox: str = ""
    """The boundary the operating system enforces around candidates here, for the mode
    ``$SELFHEAL_SANDBOX`` asks (``kernel_sandbox.boundary``), or why none would start."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _cpu_flags() -> tuple[str, ...]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return tuple(f for f in _CPU_FLAGS if f in have)
    except OSError:
        pass
    return ()


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _providers() -> tuple[ProviderCheck, ...]:
    checks: list[ProviderCheck] = []
    key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    if key and _has("anthropic"):
        checks.append(
            ProviderCheck(name="anthropic", usable=True, detail="ANTHROPIC_API_KEY is set")
        )
    else:
        why = (
            "ANTHROPIC_API_KEY is not set"
            if not key
            else 'the anthropic package is missing: pip install "selfheal[anthropic]"'
        )
        checks.append(ProviderCheck(name="anthropic", usable=False, detail=why))

    try:
        from selfheal.llm.router import ollama_base_url, probe_ollama

        url = ollama_base_url()
        names = probe_ollama(url, timeout=1.0)
    except Exception as exc:  # the router is optional for the doctor
        url, names = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434"), None
        detail = f"could not probe ({type(exc).__name__}: {exc})"
        checks.append(ProviderCheck(name="ollama", usable=False, detail=detail))
    else:
        if names is None:
            checks.append(
                ProviderCheck(
                    name="ollama", usable=False, detail=f"no server at {url} (OLLAMA_HOST)"
                )
            )
        elif not names:
            checks.append(
                ProviderCheck(
                    name="ollama",
                    usable=False,
                    detail=f"server at {url} has no models: ollama pull qwen2.5-coder:7b",
                )
            )
        else:
            shown = ", ".join(names[:5])
            checks.append(ProviderCheck(name="ollama", usable=True, detail=f"{url}: {shown}"))

    hf = _has("transformers") and _has("torch")
    checks.append(
        ProviderCheck(
            name="hf",
            usable=hf,
            detail="transformers and torch installed (slow on CPU; meant for a GPU)"
            if hf
            else 'transformers/torch missing: pip install "selfheal[hf]"',
        )
    )
    return tuple(checks)


def _auto_choice() -> str:
    try:
        from selfheal.llm.router import resolve_model_string

        return resolve_model_string("auto")
    except ConfigError as exc:
        return f"none: {exc}"
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {exc})"


def _model_file() -> ModelCheck:
    from selfheal.local.weights import DEFAULT_MODEL, find_model, verify_model

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


def _build_kind(cuda: bool) -> str:
    """Which llama-server build is in use, as ``doctor`` says it."""
    if cuda:
        return "CUDA: every layer on the GPU (--n-gpu-layers 99)"
    return "CPU (SELFHEAL_LLAMA_CUDA=1 make install builds for an NVIDIA GPU)"


def _server_build() -> ServerCheck:
    from selfheal.local.settings import build_info, find_server_binary, is_cuda_build

    shared = os.environ.get("SELFHEAL_LOCAL_URL", "").strip()
    try:
        binary = find_server_binary()
    except ConfigError as exc:
        return ServerCheck(shared_url=shared, error=str(exc))
    if binary is None:
        return ServerCheck(
            shared_url=shared,
            error=f"llama-server is not built: run {LOCAL_MODEL_INSTALL}",
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


def _probe_server(model: ModelCheck, server: ServerCheck) -> tuple[ModelCheck, ServerCheck]:
    """Start a server (or use ``$SELFHEAL_LOCAL_URL``'s), generate a little, stop it."""
    from selfheal.errors import SelfHealError
    from selfheal.local.probe import probe
    from selfheal.local.server import LocalServer
    from selfheal.local.settings import server_settings

    if server.shared_url:
        result = probe(server.shared_url, os.environ.get("SELFHEAL_LOCAL_KEY") or "sk-no-key")
        return _with_probe(model, server, result, None)
    if server.binary is None or server.error or model.path is None or model.error:
        return model, server
    try:
        settings = server_settings(model.path, binary=server.binary, progress=False)
    except SelfHealError as exc:
        return model, server.model_copy(update={"error": str(exc)})
    server = server.model_copy(
        update={
            "slots": settings.slots,
            "prompt_copy": settings.prompt_copy,
            "drafts": settings.drafts,
            "ctx_per_slot": settings.ctx_per_slot,
            "threads": settings.threads,
        }
    )
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
    model: ModelCheck, server: ServerCheck, result: object, load_seconds: float | None
) -> tuple[ModelCheck, ServerCheck]:
    from selfheal.local.probe import ProbeResult

    assert isinstance(result, ProbeResult)
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


def _kernels() -> tuple[str, ...]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        return tuple(sorted(KernelSpecManager().find_kernel_specs()))
    except Exception:
        return ()


def _gpu() -> str:
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    # torch is slow to import; only ask it when a GPU driver node exists (NVIDIA or ROCm)
    if _has("torch") and (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd")):
        try:
            import torch

            if torch.cuda.is_available():
                return str(torch.cuda.get_device_name(0))
        except Exception:
            pass
    return ""


def _sandbox() -> str:
    from selfheal.errors import SelfHealError
    from selfheal.kernel_sandbox.boundary import ENV, boundary_for

    try:
        info = boundary_for()
    except SelfHealError as e:
        return f"NONE: {e}"
    weaker = ", WEAKER than Landlock" if info.weaker else ""
    return f"{info.kind}{weaker} ({ENV}={info.mode}): {info.detail}"


def _openai_check() -> ProviderCheck:
    url = os.environ.get("OPENAI_BASE_URL", "").strip()
    key = bool(os.environ.get("OPENAI_API_KEY"))
    if url:
        detail = f"OPENAI_BASE_URL={url}" + (
            "" if key else " (no OPENAI_API_KEY: a dummy key is sent)"
        )
        return ProviderCheck(name="openai", usable=True, detail=detail)
    if key:
        return ProviderCheck(
            name="openai", usable=True, detail="OPENAI_API_KEY is set (OpenAI's API)"
        )
    return ProviderCheck(
        name="openai",
        usable=False,
        detail="set OPENAI_BASE_URL (any OpenAI-compatible server) and use openai:MODEL",
    )


def doctor(*, load_model: bool = True) -> DoctorReport:
    """Check this machine. ``load_model=False`` skips starting llama-server and the short
    generation (a few seconds)."""
    model = _model_file()
    server = _server_build()
    if load_model:
        model, server = _probe_server(model, server)
    if server.shared_url:
        local_ok = server.healthy is not False and not server.error
        local_detail = f"shared server at SELFHEAL_LOCAL_URL={server.shared_url}"
    else:
        local_ok = (
            server.binary is not None
            and not server.error
            and model.path is not None
            and model.verified is not False
            and model.loads is not False
        )
        if server.binary is None or server.error:
            local_detail = server.error
        elif model.path is None or model.loads is False or model.error:
            local_detail = model.error or server.error
        else:
            local_detail = f"{model.path} on llama-server" + (
                f" ({model.tokens_per_second} tokens/s)" if model.tokens_per_second else ""
            )
    providers = (
        *_providers(),
        _openai_check(),
        ProviderCheck(name="local", usable=local_ok, detail=local_detail),
    )
    return DoctorReport(
        python=f"{platform.python_version()} ({sys.executable})",
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        cpu_count=_cores(),
        cpu_flags=_cpu_flags(),
        providers=providers,
        auto_choice=_auto_choice(),
        model=model,
        server=server,
        kernels=_kernels(),
        gpu=_gpu(),
        sandbox=_sandbox(),
    )


def format_report(report: DoctorReport) -> str:
    """The report as terminal text."""
    ok = {True: "ok ", False: "-- ", None: "?  "}
    lines = [
        "selfheal doctor",
        f"  python     {report.python}",
        f"  platform   {report.platform}, {report.cpu_count} cores",
        f"  cpu flags  {' '.join(report.cpu_flags) or '(unknown)'}",
        f"  gpu        {report.gpu or 'none'}",
        f"  kernels    {', '.join(report.kernels) or 'none found (pip install ipykernel)'}",
        f"  sandbox    {report.sandbox}",
        "providers",
    ]
    for p in report.providers:
        lines.append(f"  {ok[p.usable]}{p.name:<10} {p.detail}")
    lines.append(f"  auto ->    {report.auto_choice}")
    m = report.model
    lines.append("local model")
    lines.append(f"  path       {m.path or 'not installed'}")
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
    srv = report.server
    lines.append("llama-server")
    if srv.shared_url:
        lines.append(f"  shared     {srv.shared_url} (SELFHEAL_LOCAL_URL)")
    lines.append(f"  binary     {srv.binary or 'not built'}")
    if srv.version:
        lines.append(f"  version    {srv.version}")
    if srv.cuda is not None:
        lines.append(f"  build      {_build_kind(srv.cuda)}")
    if srv.cmake_args:
        took = f" (built in {srv.build_seconds} s)" if srv.build_seconds else ""
        lines.append(f"  flags      {srv.cmake_args}{took}")
    if srv.slots is not None:
        lines.append(
            f"  slots      {srv.slots} x {srv.ctx_per_slot} tokens, {srv.threads} threads "
            "(SELFHEAL_LOCAL_SLOTS, SELFHEAL_LOCAL_CTX, SELFHEAL_LOCAL_THREADS)"
        )
    if srv.prompt_copy is not None:
        copy = (
            "on: a prompt shared by concurrent requests is processed once"
            if srv.prompt_copy
            else "off"
        )
        lines.append(f"  prompts    slot router {copy} (SELFHEAL_LOCAL_PROMPT_COPY)")
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
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_report(doctor()))
