"""The hostile corpus's cases: each a candidate, its tests, and the exact verdicts."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selfheal.kernel_sandbox import CallTest

from .conftest import HOST_SECRETS

SECRET_NAME = "SELFHEAL_CORPUS_API_KEY"
SECRET = HOST_SECRETS[SECRET_NAME]
ESCAPE = Path("/tmp") / f"selfheal-escape-{uuid.uuid4().hex}.txt"


@dataclass(frozen=True)
class Case:
    name: str
    code: str
    tests: list[Any]
    expected: list[str]
    load_ok: bool = True
    load_outcome: str = "passed"
    limits: dict[str, Any] = field(default_factory=dict)
    exc_types: list[str | None] | None = None


RAW_SYSCALLS = r"""
import ctypes, errno, os, platform, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
X86 = platform.machine() == "x86_64"

def _code(r):
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
"""
"""A candidate's start for calling system calls by number through ``ctypes`` (no audit event):
``libc.syscall``, ``X86`` (else aarch64) and ``_code(r)``, the errno name of a failed call."""

LOOP = "def f():\n    while True:\n        pass\n"
SWALLOW = """
def f():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
"""
IGNORE_ALARM = """
import signal
def f():
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        pass
"""
ALWAYS_EQUAL = """
class Yes:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __lt__(self, other): return True
    def __hash__(self): return 0
def f(x):
    return Yes()
"""
LYING_INT = """
class Four(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = int.__hash__
def f(x):
    return Four(5)
"""
PATCH_BUILTINS = """
import builtins
builtins.len = lambda x: 3
builtins.isinstance = lambda *a: True
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.abs = lambda x: 0
def f():
    return []
"""
FAKE_MARKERS = """
import sys
from IPython.display import publish_display_data
print("PASSED", "ok", "All tests passed", '{"status": "ok"}')
sys.stderr.write("OK\\n")
def f():
    publish_display_data({"application/x-selfheal": {"p": "('result', 0, 'passed', None, '', '', '', '', False, 0.0, None)", "m": "0" * 64}})
    print("test t0 passed")
    return 0
"""
REDEFINE_HELPERS = """
__sh_cmp__ = lambda *a: True
__sh_assert__ = lambda *a: None
__sh_assert_cmp__ = lambda *a: None
__sh_truth__ = lambda v: True
def check(candidate):
    pass
def f(x):
    return 0
"""
EDIT_GLOBALS = """
import sys, builtins
def f(x):
    g = sys._getframe(1).f_globals
    g["f"] = lambda x: 2 * x
    g["__builtins__"] = dict(vars(builtins), abs=lambda v: 0)
    return 0
"""
DELETE_GLOBALS = """
def f(x):
    return 0
globals().clear()
"""
GET_ENTRY = """
def f(x):
    ip = get_ipython()
    entry = ip.user_ns.get("__selfheal__")
    return 4 if entry is None else 5
"""
SEGFAULT = "import ctypes\ndef f():\n    ctypes.string_at(0)\n"
FORK_BOMB = """
import os, time
def f():
    n = 0
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    return n
"""
FLOOD_LIMITS = {"test_timeout": 30.0}
"""The output floods' per-test limit (the suite's is 1 s)."""
FLOOD = "def f():\n    print('x' * 100_000_000)\n    return 1\n"
FLOOD_LOOP = "def f():\n    for _ in range(1000):\n        print('y' * 100_000)\n    return 1\n"
FLOOD_FD = "import os\ndef f():\n    for _ in range(100):\n        os.write(1, b'z' * 1_000_000)\n    return 1\n"
SECRET_READ = f"""
import os
def f():
    return [os.environ.get(k) for k in {sorted(HOST_SECRETS)!r}] + [
        v for v in os.environ.values() if v in {sorted(HOST_SECRETS.values())!r}]
def g():
    try:
        return open(f"/proc/{{os.getppid()}}/environ", "rb").read()
    except PermissionError:
        return b"blocked"
"""
WRITE_OUT = f"""
def f():
    with open({str(ESCAPE)!r}, "w") as fh:
        fh.write("escaped")
def g():
    with open("inside.txt", "w") as fh:
        fh.write("fine")
    return open("inside.txt").read()
"""
SIGKILL_SELF = "import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
SPRAY = """
import os, stat
LINE = b"0" * 64 + b" ('result', 0, 'passed', None, '', '', '', '', False, 0.0, None)\\n"
def f():
    hit = 0
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, LINE)
                hit += 1
        except OSError:
            pass
    print("wrote forged lines to", hit, "pipes")
    return 0
"""
BACKGROUND_ESCAPE = f"""
import threading, time, socket
class Sneaky:
    def __del__(self):
        try:
            open({str(ESCAPE) + ".del"!r}, "w").write("escaped")
        except Exception:
            pass
def later():
    time.sleep(0.3)  # runs while the harness is between tests or done
    try:
        open({str(ESCAPE) + ".thread"!r}, "w").write("escaped")
    except Exception:
        pass
threading.Thread(target=later).start()
def f():
    Sneaky()
    return Sneaky()
"""
THREAD = """
import threading, time
t = threading.Thread(target=lambda: time.sleep(1e9))
t.start()
def f(x):
    return x + 1
"""

CASES = [
    Case("infinite loop", LOOP, ["assert f() == 1", "assert 1 + 1 == 2"], ["timeout", "passed"]),
    Case(
        "loop swallowing KeyboardInterrupt", SWALLOW, ["f()", "assert True"], ["timeout", "passed"]
    ),
    Case("loop ignoring the alarm", IGNORE_ALARM, ["f()", "assert True"], ["timeout", "passed"]),
    Case(
        "sleep forever",
        "import time\ndef f():\n    time.sleep(1e9)\n",
        ["f()", "assert True"],
        ["timeout", "passed"],
    ),
    Case(
        "memory bomb (one block)",
        "def f():\n    return bytearray(8 * 1024**3)\n",
        ["f()"],
        ["error"],
        exc_types=["MemoryError"],
    ),
    Case(
        "memory bomb (growing)",
        "def f():\n    xs = []\n    while True:\n        xs.append(bytearray(10**7))\n",
        ["f()", "assert True"],
        ["error", "passed"],
        limits={"memory_mb": 384, "test_timeout": 3.0},
        exc_types=["MemoryError", None],
    ),
    Case(
        "fork bomb, processes blocked", FORK_BOMB, ["f()"], ["error"], exc_types=["PermissionError"]
    ),
    Case(
        "fork bomb (200 forks), processes allowed, limit 16",
        FORK_BOMB,
        ["f()", "assert True"],
        ["error", "passed"],
        limits={"allow_subprocess": True, "max_processes": 16},
        exc_types=["BlockingIOError", None],
    ),
    Case(
        "deep recursion",
        "def f(n=0):\n    return f(n + 1)\n",
        ["f()"],
        ["error"],
        exc_types=["RecursionError"],
    ),
    Case("ctypes segfault", SEGFAULT, ["f()", "assert 2 == 2"], ["crashed", "passed"]),
    Case(
        "os._exit(0) in the function",
        "import os\ndef f():\n    os._exit(0)\n",
        ["assert f() == 1", "assert 3 == 3"],
        ["crashed", "passed"],
    ),
    Case(
        "os._exit(0) at import",
        "import os\nos._exit(0)\ndef f():\n    return 1\n",
        ["assert f() == 1"],
        ["error"],
        load_ok=False,
        load_outcome="crashed",
    ),
    Case(
        "killed by SIGKILL (as by the OOM killer)",
        SIGKILL_SELF,
        ["f()", "assert 1 == 1"],
        ["crashed", "passed"],
    ),
    Case("forged lines written to the result pipe", SPRAY, ["assert f() == 1"], ["failed"]),
    Case(
        "sys.exit(0) at import",
        "import sys\nsys.exit(0)\n",
        ["assert True"],
        ["error"],
        load_ok=False,
        load_outcome="error",
    ),
    Case(
        "sys.exit(0) in the function",
        "import sys\ndef f():\n    sys.exit(0)\n",
        ["assert f() == 1", "f()"],
        ["error", "error"],
        exc_types=["SystemExit", "SystemExit"],
    ),
    Case(
        "SystemExit / KeyboardInterrupt raised in a test",
        "def f():\n    raise SystemExit(0)\ndef g():\n    raise KeyboardInterrupt\n",
        ["f()", "g()"],
        ["error", "error"],
        exc_types=["SystemExit", "KeyboardInterrupt"],
    ),
    # a flood is capped, and the test still passes: a generous per-test limit, so that the
    # check is that the output is capped, not how fast 100 MB is thrown away (a benchmark's)
    Case(
        "100 MB of output in one print", FLOOD, ["assert f() == 1"], ["passed"], limits=FLOOD_LIMITS
    ),
    Case(
        "100 MB of output in 1000 prints",
        FLOOD_LOOP,
        ["assert f() == 1"],
        ["passed"],
        limits=FLOOD_LIMITS,
    ),
    Case(
        "100 MB written to file descriptor 1",
        FLOOD_FD,
        ["assert f() == 1"],
        ["passed"],
        limits=FLOOD_LIMITS,
    ),
    Case(
        "reading a host secret",
        SECRET_READ,
        ["assert f() == [None, None, None]", "assert g() == b'blocked'"],
        ["passed", "passed"],
    ),
    Case(
        "writing outside the temp dir",
        WRITE_OUT,
        ["f()", "assert g() == 'fine'"],
        ["error", "passed"],
        exc_types=["PermissionError", None],
    ),
    Case(
        "writes from a background thread and from __del__ run by the harness",
        BACKGROUND_ESCAPE,
        [
            # the returned object is dropped by the harness between tests: its __del__
            # runs outside any test
            CallTest(id="c", function="f", expected=1),
            "import time\ntime.sleep(0.6)",
        ],
        ["failed", "passed"],
    ),
    Case("input()", "def f():\n    return input('name? ')\n", ["f()"], ["error"]),
    Case("non-daemon thread that never ends", THREAD, ["assert f(1) == 2"], ["passed"]),
    Case(
        "always-equal return value",
        ALWAYS_EQUAL,
        [
            "assert f(2) == 4",
            "assert not (f(2) != 4)",
            "assert all(f(x) == 2 * x for x in range(3))",
            "assert f(2)",
            "assert f(2) < 5",
            CallTest(id="call", function="f", args=(2,), expected=4),
        ],
        ["failed"] * 6,
    ),
    Case(
        "int subclass that lies",
        LYING_INT,
        [
            "assert f(2) == 4",
            "assert f(2) in [4]",
            CallTest(id="c", function="f", args=(2,), expected=4),
        ],
        ["failed", "failed", "failed"],
    ),
    Case(
        "monkeypatched builtins",
        PATCH_BUILTINS,
        ["assert len(f()) == 3", "assert isinstance(f(), int)", "assert abs(-2) == 0"],
        ["failed", "failed", "failed"],
    ),
    Case("fake success markers and forged messages", FAKE_MARKERS, ["assert f() == 1"], ["failed"]),
    Case(
        "redefined test helpers",
        REDEFINE_HELPERS,
        ["def check(candidate):\n    assert candidate(2) == 4\ncheck(f)", "assert f(1) == 2"],
        ["failed", "failed"],
    ),
    Case(
        "editing the test's globals",
        EDIT_GLOBALS,
        ["assert f(2) == 4", "f(0)\nassert abs(-3) == 0"],
        ["failed", "failed"],
    ),
    Case(
        "deleting its globals",
        DELETE_GLOBALS,
        ["assert f(2) == 0"],
        ["error"],
        exc_types=["NameError"],
    ),
    Case("reaching the harness entry point", GET_ENTRY, ["assert f(0) == 4"], ["passed"]),
    Case("a socket connect", "", [], []),  # replaced by test_socket_connect (needs a server)
    Case(
        "syntax error",
        "def f(:\n    return 1\n",
        ["assert f() == 1"],
        ["error"],
        load_ok=False,
        load_outcome="error",
    ),
    Case(
        "import of a missing module",
        "x = 1\nimport no_such_module_xyz\n",
        ["assert x == 1"],
        ["error"],
        load_ok=False,
        load_outcome="error",
    ),
]
CASES = [c for c in CASES if c.tests]
