"""OS-level containment of a sandbox kernel (docs/sandbox.md, "Containment"): environment
allow-list, rlimits, cgroups, network namespace, and killing a kernel's whole process tree."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import psutil

from selfheal._procs import die_with_parent
from selfheal.kernel_sandbox.types import Limits

_ENV_KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_MiB = 1024 * 1024


def kernel_env(home: Path, tmp: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel's whole environment: an allow-list (only locale variables come from the
    host), never the host's secrets."""
    src = os.environ if base is None else base
    env = {k: src[k] for k in _ENV_KEEP if k in src}
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "IPYTHONDIR": str(home / ".ipython"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONUNBUFFERED": "1",
            "MPLBACKEND": "Agg",
            "MALLOC_ARENA_MAX": "2",
            "JUPYTER_PLATFORM_DIRS": "1",
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
            "JUPYTER_DATA_DIR": str(home / ".jupyter-data"),
            "JUPYTER_RUNTIME_DIR": str(home / ".jupyter-runtime"),
        }
    )
    return env


def nproc_budget(limits: Limits) -> int | None:
    """The RLIMIT_NPROC value for a kernel, or None where it would not help.

    The limit counts every process *and thread* of the user, and never binds root; so for
    root it is skipped (cgroup ``pids.max`` or the process-tree watch apply instead), and
    otherwise it is the user's current task count plus ``max_processes`` plus room for
    the kernel's own threads."""
    if os.geteuid() == 0:
        return None
    uid = os.getuid()
    tasks = 0
    for p in psutil.process_iter(["uids", "num_threads"]):
        with contextlib.suppress(psutil.Error, TypeError):
            if p.info["uids"].real == uid:
                tasks += int(p.info["num_threads"] or 1)
    return tasks + limits.max_processes + 64


def process_limits(limits: Limits) -> tuple[int, ...]:
    """The limits a kernel process carries itself (rlimits, cgroup); the others (timeouts,
    output, network and subprocess switches) travel with each request."""
    return (
        limits.memory_mb,
        limits.cpu_seconds,
        limits.max_processes,
        limits.max_file_size_mb,
        limits.max_open_files,
    )


def rlimit_pairs(limits: Limits, nproc: int | None = None) -> list[tuple[int, int]]:
    """(resource, value) pairs for a kernel: address space, CPU, file size, open files,
    core dumps off, and RLIMIT_NPROC when ``nproc`` is given (see ``nproc_budget``)."""
    pairs = [
        (resource.RLIMIT_AS, limits.memory_mb * _MiB),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.max_file_size_mb * _MiB),
        (resource.RLIMIT_NOFILE, limits.max_open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if nproc is not None:
        pairs.append((resource.RLIMIT_NPROC, nproc))
    return pairs


def apply_rlimits(limits: Limits, pid: int = 0, nproc: int | None = None) -> None:
    """Set the kernel rlimits (``rlimit_pairs``) of the calling process (``pid=0``, in
    ``preexec_fn``), else of the running kernel ``pid`` (``prlimit``)."""
    for res, value in rlimit_pairs(limits, nproc):
        with contextlib.suppress(ValueError, OSError):
            if pid:
                resource.prlimit(pid, res, (value, value))
            else:
                resource.setrlimit(res, (value, value))


def make_preexec(limits: Limits) -> Callable[[], None]:
    """The function run in the child between fork and exec."""
    nproc = nproc_budget(limits)

    def preexec() -> None:
        die_with_parent()
        apply_rlimits(limits, nproc=nproc)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return preexec


def netns_available() -> bool:
    """True if ``unshare --net`` works here (root, or user namespaces allowed)."""
    return unshare_works("--net")


@functools.lru_cache(maxsize=4)
def unshare_works(flag: str) -> bool:
    """True if ``unshare <flag>`` (``--net``, ``--mount``) works here."""
    exe = shutil.which("unshare")
    if exe is None:
        return False
    try:
        r = subprocess.run(
            [exe, flag, "--", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def unshare_prefix(net: bool, mount: bool) -> list[str]:
    """Command prefix that starts a process in a fresh network namespace (no route out)
    and/or a mount namespace of its own (private: no mount made there reaches the host)."""
    exe = shutil.which("unshare")
    if exe is None or not (net or mount):  # pragma: no cover - guarded by the checks above
        return []
    flags = ["--net"] if net else []
    if mount:
        flags += ["--mount", "--propagation", "private"]
    return [exe, *flags, "--"]


def _own_cgroup_paths() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == "":
            out["unified"] = path
        for c in ctrls.split(","):
            if c:
                out[c] = path
    return out


class CgroupSet:
    """Per-kernel cgroups for ``pids`` and ``memory`` (v2, or v1 controllers).

    Created only where ``/sys/fs/cgroup`` is writable; every method is a no-op otherwise,
    and the pool falls back to rlimits plus watching and killing the process tree."""

    def __init__(self, dirs: dict[str, Path], version: int) -> None:
        self.dirs = dirs
        self.version = version

    @classmethod
    def create(cls, limits: Limits, root: Path = Path("/sys/fs/cgroup")) -> CgroupSet:
        name = f"selfheal-{uuid.uuid4().hex[:12]}"
        own = _own_cgroup_paths()
        dirs: dict[str, Path] = {}
        mem = (limits.memory_mb + 256) * _MiB
        if (root / "cgroup.controllers").exists():  # cgroup v2 mounted at root
            try:
                ctrls = root / own.get("unified", "/").lstrip("/") / "cgroup.controllers"
                available = ctrls.read_text().split()
                if "pids" in available or "memory" in available:
                    d = root / own.get("unified", "/").lstrip("/") / name
                    d.mkdir()
                    if "pids" in available:
                        (d / "pids.max").write_text(str(limits.max_processes))
                    if "memory" in available:
                        (d / "memory.max").write_text(str(mem))
                        with contextlib.suppress(OSError):
                            (d / "memory.swap.max").write_text("0")
                    dirs["unified"] = d
            except OSError:
                pass
            return cls(dirs, 2)
        for ctrl, fname, value in (
            ("pids", "pids.max", str(limits.max_processes)),
            ("memory", "memory.limit_in_bytes", str(mem)),
        ):
            base = root / ctrl / own.get(ctrl, "/").lstrip("/")
            try:
                d = base / name
                d.mkdir()
                (d / fname).write_text(value)
                dirs[ctrl] = d
            except OSError:
                with contextlib.suppress(OSError):
                    (base / name).rmdir()
        return cls(dirs, 1)

    @property
    def limits_processes(self) -> bool:
        return "pids" in self.dirs or "unified" in self.dirs

    def add(self, pid: int) -> None:
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                (d / "cgroup.procs").write_text(str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return found

    def kill_all(self) -> None:
        for d in self.dirs.values():
            kill_file = d / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for p in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.dirs = {}


def kill_tree(pid: int, pgid: int | None, cgroups: CgroupSet | None = None) -> None:
    """SIGKILL a kernel, its process group, every descendant, and its cgroups' members."""
    victims: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        victims = [proc, *proc.children(recursive=True)]
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for v in victims:
        with contextlib.suppress(psutil.Error):
            v.kill()
    if cgroups is not None:
        cgroups.kill_all()
    # dead is enough: a killed grandchild stays a zombie until init reaps it, which can take
    # a second or more (our own children are reaped by the caller)
    deadline = time.monotonic() + 2
    while victims and time.monotonic() < deadline:
        victims = [v for v in victims if _running(v)]
        if victims:
            time.sleep(0.005)


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
