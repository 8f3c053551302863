"""What a benchmark ran on: command, commit, model file and hash, hardware, date."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from selfheal.records import Record

__all__ = ["Hardware", "ModelInfo", "RunInfo", "collect_run_info", "describe_model", "hardware"]


class Hardware(Record):
    """The machine."""

    cpu_model: str
    """CPU model name from ``/proc/cpuinfo`` (or ``platform.processor()``)."""
    logical_cores: int
    """Logical CPUs visible to the process."""
    physical_cores: int | None = None
    """Physical cores, when known."""
    ram_gib: float
    """Total memory in GiB."""
    gpu: str
    """GPU name(s) from ``nvidia-smi``, or ``none``."""
    cpu_flags: tuple[str, ...] = ()
    """Relevant SIMD flags (avx2, avx512f, ...)."""
    os: str
    """``platform.platform()``."""
    python: str
    """Python version."""


class ModelInfo(Record):
    """Which model answered."""

    id: str
    """The model string given on the command line (``local``, ``ollama:NAME``, ...)."""
    file: str | None = None
    """Path of the local model file, when the model is a local file."""
    sha256: str | None = None
    """sha256 of that file."""
    size_bytes: int | None = None
    """Its size."""
    quantization: str | None = None
    """Quantization read from the file name (e.g. ``Q4_K_M``), when there is one."""


class RunInfo(Record):
    """Provenance of a benchmark run, written to ``results.json``."""

    command: str
    """The exact command line."""
    git_commit: str | None
    """``git rev-parse HEAD`` of the work tree."""
    git_dirty: bool | None
    """True if tracked files had uncommitted changes."""
    date: str
    """ISO-8601 UTC time the run (or this resumption) started."""
    model: ModelInfo
    """The model."""
    hardware: Hardware
    """The machine."""


def _cpu_model() -> tuple[str, tuple[str, ...]]:
    name = platform.processor() or platform.machine()
    flags: tuple[str, ...] = ()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return name, flags
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    if match:
        name = match.group(1).strip()
    fmatch = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    if fmatch:
        wanted = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
        present = set(fmatch.group(1).split())
        flags = tuple(f for f in wanted if f in present)
    return name, flags


def _gpu() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "none"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown (nvidia-smi failed)"
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return ", ".join(names) if names else "none"


def hardware() -> Hardware:
    """Describe this machine."""
    import psutil

    cpu, flags = _cpu_model()
    return Hardware(
        cpu_model=cpu,
        logical_cores=len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1),
        physical_cores=psutil.cpu_count(logical=False),
        ram_gib=round(psutil.virtual_memory().total / 2**30, 1),
        gpu=_gpu(),
        cpu_flags=flags,
        os=platform.platform(),
        python=platform.python_version(),
    )


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


_QUANT = re.compile(r"(?:^|[-_.])((?:i?q\d(?:_[a-z0-9]+)*)|f16|bf16|f32)(?=[-_.]|$)", re.IGNORECASE)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def describe_model(model: str, *, hash_file: bool = True) -> ModelInfo:
    """Model provenance: for ``local`` (or ``local:PATH``) the file, its sha256 and its
    quantization; for anything else just the id."""
    if model != "local" and not model.startswith("local:"):
        return ModelInfo(id=model)
    from selfheal.local.weights import find_model

    explicit = model.split(":", 1)[1] if ":" in model else None
    path = find_model(explicit or None)
    if path is None:
        return ModelInfo(id=model)
    match = _QUANT.search(path.stem)
    return ModelInfo(
        id=model,
        file=str(path),
        sha256=_sha256(path) if hash_file else None,
        size_bytes=path.stat().st_size,
        quantization=match.group(1).upper() if match else None,
    )


def collect_run_info(model: str, cli_args: Sequence[str], *, hash_file: bool = True) -> RunInfo:
    """Everything ``results.json`` records about where and how the run happened.
    ``cli_args`` are the arguments given to ``python -m evaluation.run_benchmark``."""
    root = Path(__file__).resolve().parent.parent
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return RunInfo(
        command="python -m evaluation.run_benchmark " + shlex.join(cli_args),
        git_commit=_git(["rev-parse", "HEAD"], root),
        git_dirty=None if status is None else bool(status),
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        model=describe_model(model, hash_file=hash_file),
        hardware=hardware(),
    )
