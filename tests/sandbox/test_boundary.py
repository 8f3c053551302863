"""The boundary the operating system enforces (issue 29): candidates that call libc through
``ctypes``, where the audit hook sees nothing, through the public ``KernelPool`` API.

Every hostile test runs under Landlock (``strict``) and under the fallback (a private mount
namespace and seccomp), asserts what is on disk (the secret unread, the file not written,
the program not run) and that the pool still serves a normal run. Run with
``SELFHEAL_BOUNDARY_TEST_MODES=off`` (the audit hook alone) each hostile test fails: that is
what the boundary stops.
"""

from __future__ import annotations

import os
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from selfheal.errors import ConfigError, SandboxError
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox import boundary as boundary_mod
from tests.sandbox.conftest import FAST

MODES = os.environ.get("SELFHEAL_BOUNDARY_TEST_MODES", "strict fallback").split()

CTYPES = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)

def _refused():
    return "refused: " + os.strerror(ctypes.get_errno())

def _read_fd(fd):
    buf = ctypes.create_string_buffer(4096)
    n = libc.read(fd, buf, 4096)
    libc.close(fd)
    return buf.raw[:max(n, 0)].decode(errors="replace")

def cread(path):
    fd = libc.open(path.encode(), os.O_RDONLY)
    return _refused() if fd < 0 else _read_fd(fd)

def cread_at(rel):
    here = libc.open(b".", os.O_RDONLY | os.O_DIRECTORY)
    fd = libc.openat(here, rel.encode(), os.O_RDONLY)
    return _refused() if fd < 0 else _read_fd(fd)

def cwrite(path, text="pwned"):
    fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if fd < 0:
        return _refused()
    libc.write(fd, text.encode(), len(text))
    libc.close(fd)
    return "written"

def argv(*args):
    return (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)

def cexec(*args):
    libc.execv(args[0].encode(), argv(*args))
    return _refused()

def cfork_exec(*args):
    pid = libc.fork()
    if pid == 0:
        libc.execv(args[0].encode(), argv(*args))
        libc._exit(3)
    status = ctypes.c_int()
    libc.waitpid(pid, ctypes.byref(status), 0)
    return status.value >> 8
"""


@pytest.fixture(scope="module", params=MODES)
def bpool(request: pytest.FixtureRequest) -> Iterator[KernelPool]:
    mode = request.param
    if mode == "strict" and boundary_mod.landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel")
    with KernelPool(size=1, limits=FAST, boundary=mode) as p:
        assert p.wait_ready(60), "sandbox kernels did not start"
        yield p


@pytest.fixture
def home_dir() -> Iterator[Path]:
    """A folder in the host user's home (like ~/.ssh) holding a secret."""
    d = Path.home() / f".selfheal-boundary-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    (d / "id_secret").write_text("SECRET-" + uuid.uuid4().hex)
    yield d
    for f in d.iterdir():
        f.unlink()
    d.rmdir()


def fallback_hides_homes(pool: KernelPool) -> None:
    if pool.boundary.kind == "fallback" and not boundary_mod.mount_namespace_available():
        pytest.skip("gap: without a mount namespace the fallback cannot hide files")


def snippet(pool: KernelPool, expr: str) -> str:
    res = pool.run_snippet(expr, setup=CTYPES)
    assert res.outcome == "passed", res
    return res.value or ""


def assert_healthy(pool: KernelPool) -> None:
    assert pool.run("def f(x):\n    return x + 1\n", ["assert f(1) == 2"]).passed


# ways to read the home file ``P`` (its absolute path) from the candidate's folder
READS = {
    "libc open+read": "cread(P)",
    "openat with ..": "cread_at('../' * 12 + P.lstrip('/'))",
    "symlink from the folder": "(libc.symlink(P.encode(), b'link'), cread('link'))",
    "hard link from the folder": "(libc.link(P.encode(), b'hard'), cread('hard'))",
    "/proc/self/root": "cread('/proc/self/root' + P)",
}


@pytest.mark.parametrize("how", list(READS))
def test_a_home_secret_stays_unread(bpool: KernelPool, home_dir: Path, how: str) -> None:
    fallback_hides_homes(bpool)
    path = home_dir / "id_secret"
    secret = path.read_text()
    value = snippet(bpool, f"(lambda P: {READS[how]})({str(path)!r})")
    assert secret not in value and "refused" in value
    assert path.stat().st_nlink == 1  # no second name for it was made anywhere
    assert_healthy(bpool)


def test_ctypes_write_outside_the_folder_is_refused(bpool: KernelPool, home_dir: Path) -> None:
    fallback_hides_homes(bpool)
    target = home_dir / "written"
    value = snippet(bpool, f"cwrite({str(target)!r})")
    assert not target.exists() and "refused" in value
    assert_healthy(bpool)


# ways to start ``touch T``, and what the candidate sees when it cannot
STARTS = {
    "libc.system": ("libc.system(('touch ' + T).encode())", "32512"),  # exit status 127
    "ctypes execve": ("cexec('/usr/bin/touch', T)", "'refused: "),
    "fork then exec": ("cfork_exec('/usr/bin/touch', T)", "3"),  # the child's execv failed
}


@pytest.mark.parametrize("how", list(STARTS))
def test_no_program_starts(bpool: KernelPool, home_dir: Path, how: str) -> None:
    target = home_dir / "touched"
    expr, seen = STARTS[how]
    value = snippet(bpool, f"(lambda T: {expr})({str(target)!r})")
    assert not target.exists() and value.startswith(seen), value
    assert_healthy(bpool)


def test_writing_into_site_packages_is_refused(bpool: KernelPool) -> None:
    target = Path(sysconfig.get_paths()["purelib"]) / f"selfheal_pwned_{uuid.uuid4().hex[:8]}.py"
    try:
        value = snippet(bpool, f"cwrite({str(target)!r}, 'import os')")
        assert not target.exists() and "refused" in value
    finally:
        target.unlink(missing_ok=True)
    assert_healthy(bpool)


def test_system_secrets_stay_unread(bpool: KernelPool) -> None:
    """``/etc/shadow`` is outside the audit hook's list; Landlock refuses it, the fallback
    shows an empty file."""
    shadow = Path("/etc/shadow")
    if not shadow.is_file() or not shadow.read_text().strip():
        pytest.skip("no /etc/shadow to protect here")
    value = snippet(bpool, "cread('/etc/shadow')")
    assert value in (repr("refused: Permission denied"), repr(""))
    assert_healthy(bpool)


def test_a_refused_operation_is_an_error_that_names_it(bpool: KernelPool) -> None:
    if bpool.boundary.kind == "fallback":  # it shows /etc/shadow as an empty file instead
        report = bpool.run(
            "def f():\n    return open('/etc/shadow').read()\n", ["assert f() == ''"]
        )
        assert report.passed, report.results
        return
    report = bpool.run("def f():\n    return open('/etc/shadow').read()\n", ["f()", "assert 1"])
    first = report.results[0]
    assert first.outcome == "error" and first.exc_type == "PermissionError", first
    assert "/etc/shadow" in first.message and "the sandbox refuses this" in first.message
    assert report.results[1].outcome == "passed"


LEGIT = """
import os, tempfile
import numpy as np

def f():
    with open("data.csv", "w") as fh:
        fh.write("1,2,3")
    with open("data.csv") as fh:
        row = [int(x) for x in fh.read().split(",")]
    with tempfile.TemporaryDirectory() as d, open(os.path.join(d, "t"), "w") as fh:
        fh.write("x")
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(b"y")
    with open(os.devnull, "w") as fh:  # O_TRUNC on a device
        fh.write("z")
    return int(np.asarray(row).sum())
"""


def test_legitimate_needs_keep_working(bpool: KernelPool) -> None:
    report = bpool.run(LEGIT, ["assert f() == 6"])
    assert report.passed, report


SUBPROCESSES = """
import multiprocessing, subprocess

def square(q, x):
    q.put(x * x)

def f():
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()  # a semaphore in /dev/shm
    p = ctx.Process(target=square, args=(q, 3))
    p.start()
    value = q.get(timeout=5)
    p.join()
    return value, p.exitcode, subprocess.run(["true"]).returncode
"""


def test_subprocesses_when_the_run_allows_them(bpool: KernelPool, home_dir: Path) -> None:
    """``allow_subprocess`` still works (programs from the system, multiprocessing), and
    files stay out of reach."""
    fallback_hides_homes(bpool)
    lim = FAST.model_copy(update={"allow_subprocess": True, "test_timeout": 10.0})
    secret = str(home_dir / "id_secret")
    report = bpool.run(
        SUBPROCESSES + CTYPES,
        ["assert f() == (9, 0, 0)", f"assert cread({secret!r}).startswith('refused')"],
        limits=lim,
    )
    assert report.passed, [(r.outcome, r.exc_type, r.message, r.traceback) for r in report.results]


def test_strict_without_landlock_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boundary_mod, "landlock_abi", lambda: 0)
    with pytest.raises(SandboxError, match="SELFHEAL_SANDBOX=auto"):
        KernelPool(size=1, boundary="strict")
    monkeypatch.setenv("SELFHEAL_SANDBOX", "strict")
    with pytest.raises(SandboxError, match="needs Landlock"):
        KernelPool(size=1)
    monkeypatch.setenv("SELFHEAL_SANDBOX", "auto")
    info = boundary_mod.boundary_for()
    assert info.kind == "fallback" and info.weaker and "no Landlock" in info.detail


def test_an_unknown_mode_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFHEAL_SANDBOX", "loose")
    with pytest.raises(ConfigError, match="auto, strict, fallback, off"):
        boundary_mod.boundary_for()


def test_unix_sockets_on_the_host_are_out_of_reach(bpool: KernelPool, tmp_path: Path) -> None:
    """Landlock does not bind connecting to a socket file (a Docker socket, an agent's):
    the seccomp filter refuses creating Unix sockets."""
    import socket

    path = str(tmp_path / "agent.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(0.5)
    try:
        code = (
            "import ctypes, socket, struct\n"
            "def dial(path):\n"
            "    fd = libc.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0)\n"
            "    if fd < 0:\n"
            "        return _refused()\n"
            "    addr = struct.pack('H108s', socket.AF_UNIX, path.encode())\n"
            "    return 'connected' if libc.connect(fd, addr, len(addr)) == 0 else _refused()\n"
        )
        res = bpool.run_snippet(f"dial({path!r})", setup=CTYPES + code)
        assert res.outcome == "passed" and "refused" in (res.value or ""), res
        with pytest.raises(TimeoutError):
            srv.accept()
    finally:
        srv.close()
    assert_healthy(bpool)


def test_a_host_file_reaches_the_candidate_through_its_folder(
    bpool: KernelPool, home_dir: Path
) -> None:
    """The legitimate way to read a user's file: ``files=`` copies it into the run's folder
    (its original path stays out of reach)."""
    fallback_hides_homes(bpool)
    data = home_dir / "data.csv"
    data.write_text("1,2,3")
    code = "def total(name):\n    with open(name) as fh:\n        return sum(map(int, fh.read().split(',')))\n"
    report = bpool.run(
        code,
        ["assert total('data.csv') == 6", "assert total('raw.bin') == 9", f"total({str(data)!r})"],
        files={"data.csv": data, "raw.bin": b"4,5"},
    )
    assert [r.outcome for r in report.results] == ["passed", "passed", "error"], report
    assert report.results[2].exc_type == "PermissionError"
    with pytest.raises(ConfigError, match="plain file name"):
        bpool.run(code, ["assert 1"], files={"../x": b""})
    with pytest.raises(ConfigError, match="cannot read"):
        bpool.run(code, ["assert 1"], files={"x": home_dir / "missing"})


@pytest.mark.parametrize("mode", [m for m in MODES if m != "fallback"])
def test_tcp_is_refused_without_a_network_namespace(mode: str) -> None:
    """Landlock (ABI 4+) refuses TCP connects by itself: a kernel outside any network
    namespace still cannot reach a server on the host's loopback (the fallback leaves TCP
    to the namespace)."""
    import socket

    if mode == "strict" and boundary_mod.landlock_abi() < 4:
        pytest.skip("Landlock below ABI 4 does not handle TCP")
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    dial = (
        "import socket, struct\n"
        "def dial(port):\n"
        "    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)\n"
        "    ip = bytes([127, 0, 0, 1])\n"
        "    addr = struct.pack('=H', socket.AF_INET) + struct.pack('!H4s8x', port, ip)\n"
        "    return 'connected' if libc.connect(fd, addr, len(addr)) == 0 else _refused()\n"
    )
    try:
        with KernelPool(size=1, limits=FAST, boundary=mode, network_namespace=False) as pool:
            res = pool.run_snippet(f"dial({port})", setup=CTYPES + dial)
            assert res.outcome == "passed" and "refused" in (res.value or ""), res
            with pytest.raises(TimeoutError):
                srv.accept()
            assert_healthy(pool)
    finally:
        srv.close()
