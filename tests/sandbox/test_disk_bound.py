"""A run's folder has a total size (issue 43, item 4): ``Limits.disk_mb``, a tmpfs mounted
on the run's folder in the kernel's own mount namespace, under every boundary mode.

Written as an attacker who read the source would: the file-size limit is per file, so the
candidate writes many files of a size under it. With the fix it gets ``ENOSPC`` at the
folder's size and the host's disk does not move; without it (the tmpfs not mounted) every
file lands on the host's disk.
"""

from __future__ import annotations

import ast
import errno
import shutil
import tempfile
import threading
from collections.abc import Iterator

import pytest

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox import boundary as boundary_mod
from selfheal.kernel_sandbox.execution import input_files

MiB = 1 << 20

FILL = """
import os, time

def fill(count, size_mb, hold=0.0):
    # files of size_mb MiB each (under the per-file limit) until the folder is full
    written = 0
    try:
        for i in range(count):
            with open(f"fill{i}.bin", "wb") as fh:
                fh.write(b"x" * (size_mb << 20))
            written += 1
    except OSError as e:
        time.sleep(hold)  # keep what was written while the host looks at its disk
        return (written, e.errno)
    time.sleep(hold)
    return (written, 0)
"""

LIMITS = Limits(test_timeout=20.0, load_timeout=5.0, run_timeout=40.0, disk_mb=64)

MODES = ["strict", "fallback", "off"]


@pytest.fixture(scope="module", params=MODES)
def dpool(request: pytest.FixtureRequest) -> Iterator[KernelPool]:
    if not boundary_mod.mount_namespace_available():
        pytest.skip("gap: without a mount namespace a kernel cannot mount the run's folder")
    if request.param == "strict" and boundary_mod.landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel")
    with KernelPool(size=1, limits=LIMITS, boundary=request.param) as p:
        assert p.wait_ready(60), "sandbox kernels did not start"
        yield p


def _value(report: object) -> object:
    r = report.results[0]  # type: ignore[attr-defined]
    assert r.outcome == "passed", r
    return ast.literal_eval(r.stdout.strip())  # the candidate printed two ints


def _fill(pool: KernelPool, call: str, limits: Limits = LIMITS, **kw: object) -> object:
    return _value(pool.run(FILL, [f"print({call})"], limits=limits, **kw))  # type: ignore[arg-type]


def test_many_small_files_stop_at_the_folder_size_and_the_host_disk_stays(
    dpool: KernelPool,
) -> None:
    where = tempfile.gettempdir()  # where the runs' folders are
    before = shutil.disk_usage(where).free
    lowest = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            lowest[0] = min(lowest[0], shutil.disk_usage(where).free)
            done.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        # 100 files of 8 MiB (800 MiB) with disk_mb=64, held for a second once written
        written, err = _fill(dpool, "fill(100, 8, hold=1.0)")  # type: ignore[misc]
    finally:
        done.set()
        watcher.join()
    assert err == errno.ENOSPC, "the candidate wrote past the folder's size"
    assert written == 8  # 64 MiB: eight files of 8 MiB, the ninth refused
    # the host's disk is shared with other work on this machine: it may move a little,
    # but not by the 800 MiB the candidate tried (nor its 64 MiB: they are in memory)
    assert before - lowest[0] < 200 * MiB


def test_a_run_sets_its_own_folder_size(dpool: KernelPool) -> None:
    small = LIMITS.model_copy(update={"disk_mb": 16})
    assert _fill(dpool, "fill(10, 4)", small) == (4, errno.ENOSPC)
    large = LIMITS.model_copy(update={"disk_mb": 96})
    assert _fill(dpool, "fill(20, 8)", large) == (12, errno.ENOSPC)
    assert _fill(dpool, "fill(20, 8)") == (8, errno.ENOSPC)  # the pool's size again


def test_input_files_count_against_the_folder(dpool: KernelPool) -> None:
    files = {"data.bin": b"d" * (44 * MiB)}
    # 44 MiB of input in a 64 MiB folder: two more files of 8 MiB fit, not three
    assert _fill(dpool, "fill(10, 8)", files=files) == (2, errno.ENOSPC)
    assert _fill(dpool, "fill(10, 8)") == (8, errno.ENOSPC)  # the next run starts empty


def test_input_files_over_the_folder_size_are_refused_on_the_host() -> None:
    with pytest.raises(ConfigError, match="disk_mb=64"):
        input_files({"a.bin": b"a" * (40 * MiB), "b.bin": b"b" * (30 * MiB)}, LIMITS)
    assert len(input_files({"a.bin": b"a" * (60 * MiB)}, LIMITS)) == 1
