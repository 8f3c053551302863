"""``selfheal doctor``: what can run here, and does the local model actually work?

:func:`doctor` collects a :class:`DoctorReport` (which providers are usable, where the local
model is, whether it loads and generates and how fast, the llama.cpp build's CPU features,
the Jupyter kernels, a GPU); :func:`format_report` renders it for a terminal.

The model check runs in a subprocess, so a broken llama.cpp build (the SIGSEGV of a
native-CPU build on AVX-512 Xeons) is reported instead of killing the caller.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from typing import Literal

from selfheal._record import Record
from selfheal.errors import ConfigError

__all__ = ["DoctorReport", "ModelCheck", "ProviderCheck", "doctor", "format_report"]

ProviderName = Literal["anthropic", "ollama", "hf", "local"]

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
    """The provider, as in model strings (``anthropic``, ``ollama``, ``hf``, ``local``)."""
    usable: bool
    """True when a call could work right now."""
    detail: str
    """Why (or why not), and what to do about it."""


class ModelCheck(Record):
    """The local model file and a real load + generate."""

    path: str | None = None
    """Where the model file is; None when not installed."""
    size: int | None = None
    """File size in bytes."""
    verified: bool | None = None
    """Size and sha256 match the default model (None: not checked or a custom file)."""
    loads: bool | None = None
    """The model loaded and generated text (None: not tried)."""
    load_seconds: float | None = None
    """Seconds to load the model."""
    tokens_per_second: float | None = None
    """Generated tokens per second (prompt included, greedy, all cores)."""
    sample: str = ""
    """The start of the generated text."""
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
    llama_cpp_version: str | None
    """Installed llama-cpp-python version, None when absent."""
    llama_cpp_system_info: str
    """``llama_print_system_info()`` of the installed build: the CPU features it uses."""
    kernels: tuple[str, ...]
    """Jupyter kernel names found."""
    gpu: str
    """The GPU found (``nvidia-smi -L``/torch), or empty."""


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


_CHECK_SCRIPT = r"""
import json, os, sys, time
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import llama_cpp
path, threads = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=threads, n_threads_batch=threads, verbose=False)
load = time.perf_counter() - t0
t1 = time.perf_counter()
out = llm.create_chat_completion(
    messages=[{"role": "user", "content": "Write a Python function add(a, b). Code only."}],
    max_tokens=24, temperature=0.0)
dt = time.perf_counter() - t1
n = out["usage"]["completion_tokens"]
print(json.dumps({"load": load, "tps": n / dt, "text": out["choices"][0]["message"]["content"]}))
"""


def _model_check(load_model: bool) -> ModelCheck:
    from selfheal.llm.weights import DEFAULT_MODEL, find_model, verify_model

    try:
        path = find_model()
    except ConfigError as exc:
        return ModelCheck(error=str(exc))
    if path is None:
        return ModelCheck(
            error="not installed: run `make install` or `python -m selfheal.llm.weights install`"
        )
    size = path.stat().st_size
    verified = verify_model(path) if size == DEFAULT_MODEL.size else None
    check = ModelCheck(path=str(path), size=size, verified=verified)
    if verified is False:
        return check.model_copy(
            update={"error": "corrupt: `python -m selfheal.llm.weights install` rebuilds it"}
        )
    if not load_model:
        return check
    if not _has("llama_cpp"):
        return check.model_copy(
            update={"error": "llama-cpp-python is not installed: run `make install`"}
        )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHECK_SCRIPT, str(path), str(_cores())],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        return check.model_copy(update={"loads": False, "error": "load + generate took over 300 s"})
    if proc.returncode != 0:
        how = (
            f"crashed (signal {-proc.returncode})"
            if proc.returncode < 0
            else f"failed (exit {proc.returncode})"
        )
        tail = proc.stderr.strip().splitlines()[-3:]
        return check.model_copy(
            update={
                "loads": False,
                "error": f"llama.cpp {how} loading/generating; rebuild with `make install` "
                f"(see docs/local_model.md). {' | '.join(tail)}",
            }
        )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return check.model_copy(
        update={
            "loads": True,
            "load_seconds": round(data["load"], 2),
            "tokens_per_second": round(data["tps"], 2),
            "sample": (data["text"] or "").strip()[:80],
        }
    )


def _llama_cpp() -> tuple[str | None, str]:
    if not _has("llama_cpp"):
        return None, ""
    try:
        import llama_cpp

        info = llama_cpp.llama_print_system_info()
        return str(llama_cpp.__version__), (
            info.decode() if isinstance(info, bytes) else str(info)
        ).strip()
    except Exception as exc:
        return None, f"import failed: {type(exc).__name__}: {exc}"


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


def doctor(*, load_model: bool = True) -> DoctorReport:
    """Check this machine. ``load_model=False`` skips the (few seconds) load + generate test."""
    model = _model_check(load_model)
    version, info = _llama_cpp()
    local_ok = (
        version is not None
        and model.path is not None
        and model.verified is not False
        and model.loads is not False
    )
    if version is None:
        local_detail = "llama-cpp-python is not installed: run `make install`"
    elif model.path is None or model.loads is False:
        local_detail = model.error
    else:
        local_detail = f"{model.path}" + (
            f" ({model.tokens_per_second} tokens/s)" if model.tokens_per_second else ""
        )
    providers = (*_providers(), ProviderCheck(name="local", usable=local_ok, detail=local_detail))
    return DoctorReport(
        python=f"{platform.python_version()} ({sys.executable})",
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        cpu_count=_cores(),
        cpu_flags=_cpu_flags(),
        providers=providers,
        auto_choice=_auto_choice(),
        model=model,
        llama_cpp_version=version,
        llama_cpp_system_info=info,
        kernels=_kernels(),
        gpu=_gpu(),
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
    lines.append(f"  llama.cpp  {report.llama_cpp_version or 'not installed'}")
    if report.llama_cpp_system_info:
        lines.append(f"  features   {report.llama_cpp_system_info}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_report(doctor()))
