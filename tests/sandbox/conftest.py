"""Shared fixtures: one warm pool for the whole sandbox suite (short timeouts)."""

from __future__ import annotations

import gc
import os
import subprocess
import uuid
from collections.abc import Iterator

import psutil
import pytest

from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox.kernel import live_kernels

HOST_SECRETS = {
    "SELFHEAL_CORPUS_API_KEY": "sk-corpus-" + uuid.uuid4().hex,
    "SELFHEAL_PROBE_TOKEN": "tok-" + uuid.uuid4().hex,
    "HF_SELFHEAL_PROBE": "hf_" + uuid.uuid4().hex,
}
"""Secrets the host process holds before any kernel starts; no kernel may see them."""
os.environ.update(HOST_SECRETS)

FAST = Limits(test_timeout=1.0, load_timeout=3.0, run_timeout=20.0, memory_mb=1024)
"""Limits the suite runs with: short timeouts keep the suite fast on 2 cores."""


def sandbox_processes() -> list[psutil.Process]:
    """Live (non-zombie) sandbox processes of any session on this machine: kernels started
    with ``ipykernel_launcher`` (their command line names their directory), kernels forked
    by the fork server and their children (their cwd is in a kernel directory), and fork
    servers."""
    found = []
    for p in psutil.process_iter(["cmdline", "status", "cwd"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            where = " ".join(p.info["cmdline"] or []) + " " + (p.info["cwd"] or "")
            if "selfheal-k-" in where or "selfheal-z-" in where:
                found.append(p)
        except psutil.Error:
            continue
    return found


def belongs_to(p: psutil.Process, roots: list[str]) -> bool:
    """True if ``p`` is a process of one of the kernel directories ``roots``."""
    try:
        where = " ".join(p.cmdline()) + " " + p.cwd()
    except psutil.Error:
        return False
    return any(r in where for r in roots)


@pytest.fixture(scope="session")
def pool() -> Iterator[KernelPool]:
    with KernelPool(size=2, limits=FAST) as p:
        assert p.wait_ready(60), "sandbox kernels did not start"
        yield p
    # at the end of the session: close every other pool (the default pool and other suites'
    # pools live as long as the process), then no kernel of this process may be left
    for other in [o for o in gc.get_objects() if isinstance(o, KernelPool)]:
        other.close()
    assert live_kernels() == []


@pytest.fixture
def limits() -> Limits:
    return FAST


BOUNDARY_MODES = ("strict", "fallback")
"""The boundaries the process and file tests run under."""


@pytest.fixture(scope="module", params=BOUNDARY_MODES)
def bpool(request: pytest.FixtureRequest) -> Iterator[KernelPool]:
    """A pool of one kernel under each boundary of ``BOUNDARY_MODES`` (``test_boundary.py``
    has its own, whose modes an environment variable may narrow)."""
    from selfheal.kernel_sandbox import boundary as boundary_mod

    if request.param == "strict" and boundary_mod.landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel")
    with KernelPool(size=1, limits=FAST, boundary=request.param) as p:
        assert p.wait_ready(60), "sandbox kernels did not start"
        yield p


@pytest.fixture
def host_sleep() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the host's (a ``sleep``) that a candidate must not reach."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()
