"""Kernels never outlive their owner: at interpreter exit (atexit) nothing is left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

SCRIPT = """
from selfheal.kernel_sandbox import get_default_pool, KernelPool
from selfheal.kernel_sandbox.kernel import live_kernels
pool = get_default_pool()
other = KernelPool(size=1).start()    # never closed by this script
report = pool.run("import threading, time\\n"
                  "threading.Thread(target=time.sleep, args=(1e9,)).start()\\n"
                  "def f():\\n    return 1\\n", ["assert f() == 1"])
assert report.passed, report
other.wait_ready(60)
pool.wait_ready(60)
zygotes = [p._zygote.proc.pid for p in (pool, other) if p._zygote is not None]
print("PIDS", " ".join(str(k.pid) for k in live_kernels()), *zygotes, flush=True)
"""


def test_no_kernel_survives_interpreter_exit() -> None:
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=root,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PIDS"))
    pids = [int(p) for p in line.split()[1:]]
    # two warm kernels of the default pool, one of the other pool, and fork servers
    assert len(pids) >= 3

    def alive() -> list[int]:
        out = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.NoSuchProcess:
                continue
        return out

    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive() == []


KILLED_SCRIPT = """
import os, signal
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.kernel import live_kernels
pool = KernelPool(size=2).start()
assert pool.run("def f():\\n    return 1\\n", ["assert f() == 1"]).passed
pool.wait_ready(60)
zygote = [pool._zygote.proc.pid] if pool._zygote is not None else []
print("PIDS", " ".join(str(k.pid) for k in live_kernels()), *zygote, flush=True)
os.kill(os.getpid(), signal.SIGKILL)   # no atexit, no finalizers
"""


def test_no_kernel_survives_a_killed_host() -> None:
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=root,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PIDS"))
    pids = [int(p) for p in line.split()[1:]]
    assert len(pids) >= 3  # two warm kernels and the fork server

    def alive() -> list[int]:
        out = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.NoSuchProcess:
                continue
        return out

    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive() == []


def test_the_next_pool_sweeps_what_a_killed_host_left(tmp_path: Path) -> None:
    """Kernel directories of a host killed with SIGKILL stay behind (nothing of it runs to
    remove them); the first pool the next process starts removes them, and nothing else."""
    import json

    from selfheal.kernel_sandbox.leftovers import MARKER, mark_owner, sweep_leftovers

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), TMPDIR=str(tmp))
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == -9, proc.stderr
    left = sorted(p.name for p in tmp.iterdir())
    assert any(n.startswith("selfheal-k-") for n in left) and any(
        n.startswith("selfheal-z-") for n in left
    ), left
    cgroups = [
        Path(c)
        for d in tmp.glob("selfheal-k-*")
        if (d / MARKER).is_file()
        for c in json.loads((d / MARKER).read_text())["cgroups"]
    ]
    assert all(c.is_dir() for c in cgroups)  # where cgroups work: they stayed too
    # directories this sweep must keep: a live owner's, one without a marker; and something
    # that is not a sandbox cgroup, named in a forged marker
    live = tmp / "selfheal-k-live"
    live.mkdir()
    mark_owner(live)
    unmarked = tmp / "selfheal-k-unmarked"
    unmarked.mkdir()
    forged = tmp / "selfheal-k-forged"
    forged.mkdir()
    outside = tmp_path / "not-a-cgroup"
    outside.mkdir()
    (forged / MARKER).write_text(
        json.dumps({"pid": 2**22 + 7, "started": 1.0, "cgroups": [str(outside)]})
    )
    removed = sweep_leftovers(str(tmp))
    assert sorted(p.name for p in tmp.iterdir()) == [
        "selfheal-k-live",
        "selfheal-k-unmarked",
    ]
    assert str(forged) in removed and outside.is_dir()
    assert not any(c.exists() for c in cgroups)
