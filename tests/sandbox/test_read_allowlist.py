"""Reading what is needed, not whole trees (issue 43, item 5). A candidate read a root
``0600`` key under ``/etc/ssl/private`` (``/etc/ssl`` was allowed whole), while
threadpoolctl (scikit-learn's ``KMeans``) failed on ``/proc/self/maps`` (neither is a
dependency or an extra of selfheal: checked by hand, docs/sandbox.md). Now Landlock
allows ``/etc/ssl/certs`` and ``openssl.cnf``, and the run's own ``/proc/self`` entries
that libraries read, never ``mem`` or ``environ``, nor another process's entries; the
fallback hides /proc whole, and its unprivileged uid keeps root's ``0600`` files shut.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from selfheal.kernel_sandbox import KernelPool

READS = r"""
import errno, os, ssl

def read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:  # (the audit hook's refusals carry no errno)
        return errno.errorcode.get(e.errno or 0, type(e).__name__)

def listing(path):
    try:
        return os.listdir(path)
    except OSError as e:  # (the audit hook's refusals carry no errno)
        return errno.errorcode.get(e.errno or 0, type(e).__name__)

def ca_certificates():
    ctx = ssl.create_default_context()
    ctx.load_verify_locations(ssl.get_default_verify_paths().cafile)
    return len(ctx.get_ca_certs())

def own_maps():
    # what threadpoolctl does to find the BLAS libraries a process has loaded
    with open("/proc/self/maps") as fh:
        return [line.split()[-1] for line in fh if "libc" in line]
"""


@pytest.fixture
def root_key() -> Iterator[Path]:
    """A host key only its owner may read, in a folder anyone may enter (the fallback hides
    the temporary folder whole; /etc/ssl/private above shows its uid at work)."""
    d = Path(tempfile.mkdtemp(prefix="selfheal-key-"))
    os.chmod(d, 0o755)
    key = d / "host.key"
    key.write_text("KEY-" + os.urandom(8).hex())
    os.chmod(key, 0o600)
    yield key
    shutil.rmtree(d)


def test_etc_ssl_private_stays_shut(bpool: KernelPool) -> None:
    if not os.path.isdir("/etc/ssl/private"):
        pytest.skip("no /etc/ssl/private here")
    report = bpool.run(READS, ["assert listing('/etc/ssl/private') == 'EACCES'"])
    assert report.passed, [r for r in report.results if r.outcome != "passed"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the host is not root: runs keep its uid")
def test_a_root_key_stays_unread(bpool: KernelPool, root_key: Path) -> None:
    code = READS + f"\nP = {str(root_key)!r}\n"
    report = bpool.run(code, ["assert read(P) in ('EACCES', 'ENOENT')"])
    assert report.passed, [r for r in report.results if r.outcome != "passed"]


def test_certificates_still_load(bpool: KernelPool) -> None:
    if not os.path.isfile(str(__import__("ssl").get_default_verify_paths().cafile)):
        pytest.skip("no CA file where OpenSSL looks for it here")
    report = bpool.run(READS, ["assert ca_certificates() > 10"])
    assert report.passed, [r for r in report.results if r.outcome != "passed"]


def test_own_proc_entries_and_no_more(bpool: KernelPool) -> None:
    never = [
        "assert type(read('/proc/self/mem')) is str",  # refused
        "assert type(read('/proc/self/environ')) is str",
        "assert type(listing('/proc/self/fd')) is str",
        "assert not os.path.exists('/proc/1')",  # its namespace's init, not its own
    ]
    if bpool.boundary.kind == "fallback":  # /proc is an empty folder there
        report = bpool.run(READS, ["assert read('/proc/self/maps') == 'ENOENT'", *never])
        assert report.passed, [r for r in report.results if r.outcome != "passed"]
        return
    tests = [
        "assert own_maps()",
        *(
            f"assert type(read('/proc/self/{name}')) is bytes"
            for name in ("status", "stat", "statm", "cgroup", "mountinfo", "limits")
        ),
        "assert type(read('/proc/cpuinfo')) is bytes and type(read('/proc/meminfo')) is bytes",
        *never,
    ]
    report = bpool.run(READS, tests)
    assert report.passed, [r for r in report.results if r.outcome != "passed"]
