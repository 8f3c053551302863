"""``selfheal doctor``: what can run here, and does the local model actually work? :func:`doctor`
collects a :class:`DoctorReport`; :func:`format_report` renders it for a terminal. The model
runs in llama-server, a separate process, so a broken llama.cpp build (the SIGSEGV of a
native-CPU build on AVX-512 Xeons) is reported instead of killing the caller."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from typing import Literal

from selfheal._record import Record
from selfheal.errors import ConfigError, SelfHealError
from selfheal.local.probe import (
    ModelCheck,
    ServerCheck,
    local_lines,
    local_verdict,
    model_file,
    probe_server,
    server_build,
)
from selfheal.local.settings import default_threads

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


def _cpu_flags() -> tuple[str, ...]:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith(("flags", "Features")):
                have = set(line.split(":", 1)[1].split())
                return tuple(f for f in _CPU_FLAGS if f in have)
    return ()


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _providers() -> tuple[ProviderCheck, ...]:
    key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    if key and _has("anthropic"):
        anthropic = ProviderCheck(name="anthropic", usable=True, detail="ANTHROPIC_API_KEY is set")
    else:
        why = (
            "ANTHROPIC_API_KEY is not set"
            if not key
            else 'the anthropic package is missing: pip install "selfheal[anthropic]"'
        )
        anthropic = ProviderCheck(name="anthropic", usable=False, detail=why)
    hf = _has("transformers") and _has("torch")
    return (
        anthropic,
        _ollama_check(),
        ProviderCheck(
            name="hf",
            usable=hf,
            detail="transformers and torch installed (slow on CPU; meant for a GPU)"
            if hf
            else 'transformers/torch missing: pip install "selfheal[hf]"',
        ),
    )


def _ollama_check() -> ProviderCheck:
    try:
        from selfheal.llm.router import ollama_base_url, probe_ollama

        url = ollama_base_url()
        names = probe_ollama(url, timeout=1.0)
    except Exception as exc:  # the router is optional for the doctor
        detail = f"could not probe ({type(exc).__name__}: {exc})"
    else:
        if names:
            return ProviderCheck(
                name="ollama", usable=True, detail=f"{url}: {', '.join(names[:5])}"
            )
        detail = (
            f"no server at {url} (OLLAMA_HOST)"
            if names is None
            else f"server at {url} has no models: ollama pull qwen2.5-coder:7b"
        )
    return ProviderCheck(name="ollama", usable=False, detail=detail)


def _auto_choice() -> str:
    try:
        from selfheal.llm.router import resolve_model_string

        return resolve_model_string("auto")
    except ConfigError as exc:
        return f"none: {exc}"
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {exc})"


def _kernels() -> tuple[str, ...]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        return tuple(sorted(KernelSpecManager().find_kernel_specs()))
    except Exception:
        return ()


def _gpu() -> str:
    if shutil.which("nvidia-smi"):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
    # torch is slow to import; only ask it when a GPU driver node exists (NVIDIA or ROCm)
    if _has("torch") and (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd")):
        with contextlib.suppress(Exception):
            import torch

            if torch.cuda.is_available():
                return str(torch.cuda.get_device_name(0))
    return ""


def _sandbox() -> str:
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
    model = model_file()
    server = server_build()
    if load_model:
        model, server = probe_server(model, server)
    local_ok, local_detail = local_verdict(model, server)
    providers = (
        *_providers(),
        _openai_check(),
        ProviderCheck(name="local", usable=local_ok, detail=local_detail),
    )
    return DoctorReport(
        python=f"{platform.python_version()} ({sys.executable})",
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        cpu_count=default_threads(),
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
    lines += local_lines(report.model, report.server)
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_report(doctor()))
