"""The hostile corpus (cases in ``hostile_cases.py``): each case asserts the exact verdict
and that the host is unharmed.

Ends with a check that no kernel or child process is left over (psutil)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.kernel import killed_roots

from .conftest import FAST, belongs_to, sandbox_processes
from .hostile_cases import (
    CASES,
    ESCAPE,
    FLOOD_LIMITS,
    FLOOD_LOOP,
    FORK_BOMB,
    SECRET_NAME,
    THREAD,
    Case,
)


def _escaped() -> bool:
    return any(Path(str(ESCAPE) + suffix).exists() for suffix in ("", ".del", ".thread"))


def _host_fingerprint() -> tuple[str, str | None, bool]:
    return os.getcwd(), os.environ.get(SECRET_NAME), _escaped()


STOP_GRACE = 15.0
"""Seconds past a run's ``run_timeout`` within which the sandbox must have stopped it
(a kill, a fresh kernel, a busy 2-core machine)."""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile(pool: KernelPool, case: Case) -> None:
    before = _host_fingerprint()
    limits = FAST.model_copy(update=case.limits)
    t0 = time.monotonic()
    report = pool.run(case.code, case.tests, limits=limits)
    took = time.monotonic() - t0
    assert [r.outcome for r in report.results] == case.expected, report
    assert report.load.ok is case.load_ok, report.load
    assert report.load.outcome == case.load_outcome
    assert report.passed is (all(o == "passed" for o in case.expected) and case.load_ok)
    if case.exc_types is not None:
        assert [r.exc_type for r in report.results] == case.exc_types, report
    # a runaway was stopped by the run's own limits, not waited out: a generous bound, how
    # fast the sandbox stops it is benchmarks/bench_sandbox.py's business
    assert took < limits.run_timeout + STOP_GRACE
    assert _host_fingerprint() == before
    assert not _escaped()


def test_syntax_error_line(pool: KernelPool) -> None:
    report = pool.run("x = 1\n\ndef f(:\n    return 1\n", ["assert f() == 1"])
    assert report.load.exc_type == "SyntaxError"
    assert report.load.line == 3
    assert not report.passed
    assert "did not load" in report.results[0].message


def test_missing_module_line(pool: KernelPool) -> None:
    report = pool.run("x = 1\nimport no_such_module_xyz\n", ["assert x == 1"])
    assert report.load.exc_type == "ModuleNotFoundError"
    assert report.load.line == 2


def test_flood_is_capped_and_marked(pool: KernelPool) -> None:
    report = pool.run(FLOOD_LOOP, ["assert f() == 1"], limits=FAST.model_copy(update=FLOOD_LIMITS))
    r = report.results[0]
    assert r.truncated
    assert len(r.stdout) == FAST.output_limit


def test_socket_connect(pool: KernelPool) -> None:
    """A candidate cannot connect to a server listening on the host's loopback."""
    accepted: list[object] = []
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            accepted.append(conn)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    code = (
        "import socket\n"
        "def f():\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
        "    return 'connected'\n"
    )
    try:
        report = pool.run(code, ["assert f() == 'connected'"])
    finally:
        stop.set()
        th.join(2)
        srv.close()
    assert report.results[0].outcome == "error"
    assert report.results[0].exc_type == "PermissionError"
    assert accepted == []


def test_other_kernels_and_control_files_are_off_limits(pool: KernelPool) -> None:
    code = (
        "import glob, os\n"
        "def peek():\n"
        "    here = os.path.dirname(os.getcwd())\n"
        "    out = []\n"
        "    for p in glob.glob(os.path.dirname(here) + '/selfheal-k-*/conn.json') + "
        "[here + '/conn.json', here.rsplit('-r', 1)[0] + '/conn.json']:\n"
        "        try:\n"
        "            open(p).read()\n"
        "            out.append('read')\n"
        "        except PermissionError:\n"
        "            out.append('blocked')\n"
        "    return out\n"
    )
    res = pool.run_snippet("r = peek()\n(len(r) >= 2, set(r))", setup=code)
    assert res.value == "(True, {'blocked'})", res


def test_credential_files_are_off_limits(pool: KernelPool, tmp_path: Path) -> None:
    """Reading the host user's dot-directories or a ``.env`` file is blocked (before the
    file is even looked up: a missing file gives PermissionError, not FileNotFoundError),
    while the Python installation stays readable."""
    env_file = tmp_path / ".env"
    env_file.write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    probe = Path.home() / ".ssh" / "id_selfheal_probe"
    code = (
        "def peek(path):\n"
        "    try:\n"
        "        return open(path).read()\n"
        "    except PermissionError:\n"
        "        return 'blocked'\n"
        "    except FileNotFoundError:\n"
        "        return 'missing'\n"
    )
    tests = [
        f"assert peek({str(env_file)!r}) == 'blocked'",
        f"assert peek({str(probe)!r}) == 'blocked'",
        "import os\nassert peek(os.__file__) not in ('blocked', 'missing')",
    ]
    report = pool.run(code, tests)
    assert [r.outcome for r in report.results] == ["passed"] * 3, report


def test_no_leftover_processes_after_corpus(pool: KernelPool) -> None:
    """Runs last in this module: no process of any kernel the corpus used (and killed) is
    left, nor of a second pool that ran a fork bomb and a never-ending thread, once closed."""
    bomb = FAST.model_copy(update={"allow_subprocess": True, "max_processes": 8})
    with KernelPool(size=1, limits=FAST) as p:
        p.run(FORK_BOMB, ["f()"], limits=bomb)
        p.run(THREAD, ["assert f(1) == 2"])
    assert p.kernels_started >= 2
    killed = killed_roots()
    assert len(killed) >= 2  # (the corpus adds one per case when it ran first)

    def leftovers() -> list[Any]:
        return [q for q in sandbox_processes() if belongs_to(q, killed)]

    deadline = time.monotonic() + 5
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == []
