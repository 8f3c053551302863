"""Starting a sandbox kernel's process (forked by the fork server, or ``python -m
ipykernel_launcher``) with its containment, and tearing it down."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient

from selfheal.errors import SandboxError
from selfheal.kernel_sandbox.containment import (
    CgroupSet,
    kill_tree,
    make_preexec,
    nproc_budget,
    rlimit_pairs,
    unshare_prefix,
)
from selfheal.kernel_sandbox.leftovers import remove_kernel_dirs
from selfheal.kernel_sandbox.types import Limits
from selfheal.kernel_sandbox.zygote import ForkedProcess, Zygote

KernelProcess = subprocess.Popen[bytes] | ForkedProcess


def connection(root: Path) -> dict[str, Any]:
    """IPC (Unix socket) connection info for a kernel living in ``root``."""
    return {
        "shell_port": 1,
        "iopub_port": 2,
        "stdin_port": 3,
        "control_port": 4,
        "hb_port": 5,
        "ip": str(root / "k"),
        "key": os.urandom(16).hex(),
        "transport": "ipc",
        "signature_scheme": "hmac-sha256",
        "kernel_name": "python3",
    }


async def launch(
    root: Path,
    work: Path,
    env: dict[str, str],
    conn: dict[str, Any],
    cgroups: CgroupSet,
    limits: Limits,
    *,
    network_namespace: bool,
    python: str | None,
    zygote: Zygote | None,
    mount_namespace: bool = False,
) -> KernelProcess:
    """Start the kernel process: session leader, in its cgroups, network namespace, mount
    namespace, rlimits, allow-listed environment, cwd ``work``, stdin/stdout/stderr on
    /dev/null."""
    conn_file = root / "conn.json"
    conn_file.write_text(json.dumps(conn))
    argv = [
        "-f",
        str(conn_file),
        "--IPKernelApp.capture_fd_output=False",
        "--HistoryManager.enabled=False",
        "--quiet",
    ]
    try:
        if zygote is not None:
            spec = {
                "cgroup_procs": [str(d / "cgroup.procs") for d in cgroups.dirs.values()],
                "netns": network_namespace,
                "mountns": mount_namespace,
                "rlimits": rlimit_pairs(limits, nproc_budget(limits)),
                "cwd": str(work),
                "env": env,
                "argv": argv,
            }
            return ForkedProcess(await zygote.spawn(spec), zygote)
        # forked here, on the process loop's thread: the kernel dies with that thread
        cmd = [python or sys.executable, "-m", "ipykernel_launcher", *argv]
        if network_namespace or mount_namespace:
            cmd = unshare_prefix(network_namespace, mount_namespace) + cmd
        return subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=make_preexec(limits),
            close_fds=True,
        )
    except (OSError, SandboxError) as e:
        raise SandboxError(
            f"could not start a sandbox kernel ({e}); check that ipykernel is installed "
            f"for {python or sys.executable!r}"
        ) from e


def cleanup(
    proc: KernelProcess, cgroups: CgroupSet, kc: AsyncKernelClient, root: str, rfd: int
) -> None:
    """Kill the kernel's whole tree and remove its files (and its runs' directories)."""
    with contextlib.suppress(OSError):
        os.close(rfd)
    with contextlib.suppress(Exception):
        kc.stop_channels()
    with contextlib.suppress(Exception):
        kill_tree(proc.pid, proc.pid, cgroups)
    with contextlib.suppress(Exception):
        proc.kill()
    with contextlib.suppress(Exception):
        proc.wait(timeout=2)
    with contextlib.suppress(Exception):
        cgroups.remove()
    remove_kernel_dirs(root)
