"""Which boundary the operating system enforces around candidates here (``landlock``,
``fallback``, ``off``) and the switch that asks for one (modes ``auto``, ``strict``,
``fallback``, ``off``): docs/sandbox.md, "The boundary the operating system enforces"."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Literal, get_args

from selfheal._record import Record
from selfheal.errors import ConfigError, SandboxError
from selfheal.kernel_sandbox._harness.landlock import landlock_abi
from selfheal.kernel_sandbox._harness.process import RUN_UID
from selfheal.kernel_sandbox.containment import unshare_works

BoundaryMode = Literal["auto", "strict", "fallback", "off"]
BoundaryKind = Literal["landlock", "fallback", "off"]
ENV = "SELFHEAL_SANDBOX"


class BoundaryInfo(Record):
    """The boundary candidates run inside."""

    kind: BoundaryKind
    """``landlock``, ``fallback`` or ``off`` (see the module docstring)."""
    mode: BoundaryMode
    """The mode that chose it."""
    detail: str
    """What is enforced, in words."""

    @property
    def weaker(self) -> bool:
        """True when it is weaker than Landlock."""
        return self.kind != "landlock"


def weaker_than_landlock(reported: str) -> bool:
    """True if a boundary a report names (``ExecutionReport.boundary``) is weaker than
    Landlock; an executor that names none is not judged."""
    return bool(reported) and not reported.startswith("landlock")


def mode_from_env(value: str | None = None) -> BoundaryMode:
    """The mode ``value`` names (default: ``$SELFHEAL_SANDBOX``, else ``auto``)."""
    raw = (os.environ.get(ENV, "") if value is None else value).strip().lower() or "auto"
    if raw not in get_args(BoundaryMode):
        raise ConfigError(
            f"{ENV}={raw!r} is not a sandbox mode; use one of {', '.join(get_args(BoundaryMode))}"
        )
    return raw  # type: ignore[return-value]


def mount_namespace_available() -> bool:
    """True if a process here may have mounts of its own (``unshare --mount``: root, or
    user namespaces)."""
    return unshare_works("--mount")


_LANDLOCK = (
    "Landlock ABI {abi}: reads only the Python installation and system libraries, writes "
    "only in the run's directory, starts no program{net}{scope}"
)
_FALLBACK = (
    "no Landlock in this kernel: {mounts}seccomp filter (no program starts, no ptrace, no "
    "mounts); weaker than Landlock (docs/sandbox.md)"
)


def process_rules() -> str:
    """What both boundaries add here about other processes (``_harness/process.py``), in
    words: a PID namespace of the kernel's and an unprivileged uid where the host is root."""
    if os.geteuid() != 0:
        return "; runs keep this user's uid (not root)"
    ns = "runs in their kernel's PID namespace" if unshare_works("--pid") else "no PID namespace"
    return f"; {ns}, as uid {RUN_UID} (nobody)"


def boundary_for(mode: BoundaryMode | None = None) -> BoundaryInfo:
    """The boundary ``mode`` gives here (``None``: ``$SELFHEAL_SANDBOX``). ``strict`` on a
    machine without Landlock is a ``SandboxError`` that says what to do."""
    mode = mode_from_env() if mode is None else mode_from_env(mode)
    if mode == "off":
        return BoundaryInfo(
            kind="off", mode=mode, detail="none: the audit hook alone (ctypes bypasses it)"
        )
    abi = landlock_abi() if mode != "fallback" else 0
    if abi >= 1:
        net = ", no TCP" if abi >= 4 else " (TCP left to the network namespace: ABI < 4)"
        scope = ", signals and abstract sockets scoped" if abi >= 6 else ""
        detail = _LANDLOCK.format(abi=abi, net=net, scope=scope) + process_rules()
        return BoundaryInfo(kind="landlock", mode=mode, detail=detail)
    if mode == "strict":
        raise SandboxError(
            f"{ENV}=strict needs Landlock (Linux 5.13+ with the landlock LSM enabled: see "
            "/sys/kernel/security/lsm, or boot with lsm=...,landlock), which this kernel "
            f"does not offer; set {ENV}=auto to accept the weaker fallback boundary "
            "(`selfheal doctor` says which one would be in force)"
        )
    mounts = "private mount namespace (home folders hidden, only the run's folder writable), "
    detail = _FALLBACK.format(mounts=mounts if mount_namespace_available() else "")
    if mode == "fallback":
        detail = detail.replace("no Landlock in this kernel", "fallback asked for")
    return BoundaryInfo(kind="fallback", mode=mode, detail=detail + process_rules())


def entry_cost(kind: BoundaryKind, runs: int = 50) -> tuple[float, float, float, float]:
    """Measured here (for ``benchmarks/bench_sandbox.py --boundary``), in a forked process
    that sets the boundary up as a kernel does (its mounts stay its own): median
    microseconds to build a run's ruleset and to fork the run's process (both in the kernel,
    before the run), to set the standby up (in the run's process, before it takes a
    request) and to enter the boundary after the go (what a run waits for)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, json.dumps(_entry_cost_here(kind, runs)).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    built, forked, ready, entered = json.loads(data)
    return built, forked, ready, entered


def _entry_cost_here(kind: BoundaryKind, runs: int) -> list[float]:
    from selfheal.kernel_sandbox._harness import boundary as kernel_side
    from selfheal.kernel_sandbox._harness.process import clean, namespace

    b, _ = kernel_side.prepare(kind, str(Path.home()))
    namespace(b.iso, b.libc)  # as a serving kernel: its runs in its PID namespace
    times: list[list[float]] = [[], [], [], []]
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="selfheal-bench-")
        work = root + "/work"
        os.mkdir(work)
        if b.iso.uid >= 0:
            for d in (root, work):
                os.chown(d, b.iso.uid, b.iso.uid)
        t = time.perf_counter()
        ruleset = kernel_side.for_run(b, work)
        times[0].append(time.perf_counter() - t)
        r, w = os.pipe()
        t = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            try:
                t = time.perf_counter()
                kernel_side.standby(b, ruleset)
                ready = time.perf_counter() - t
                t = time.perf_counter()
                kernel_side.enter(b, work, ruleset, False, False)
                os.write(w, f"{ready} {time.perf_counter() - t}".encode())
            finally:
                os._exit(0)
        times[1].append(time.perf_counter() - t)
        os.waitpid(pid, 0)
        clean(b.iso)
        ready, entered = (float(x) for x in os.read(r, 64).split())
        times[2].append(ready)
        times[3].append(entered)
        for fd in (r, w, ruleset):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(root)
    return [statistics.median(x) * 1e6 for x in times]
