"""The public API: reports, test forms, snippets, async twins, concurrency, isolation."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import (
    AssertTest,
    CallTest,
    ExecutionReport,
    Executor,
    KernelPool,
    Limits,
    get_default_pool,
)
from selfheal.kernel_sandbox.execution import run_candidate
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.zygote import Zygote

from .conftest import FAST, HOST_SECRETS

DOUBLE = "def f(x):\n    return 2 * x\n"


def test_pool_is_an_executor(pool: KernelPool) -> None:
    assert isinstance(pool, Executor)


def test_passing_and_failing_tests_in_order(pool: KernelPool) -> None:
    report = pool.run(DOUBLE, ["assert f(2) == 4", "assert f(3) == 7", "assert f(0) == 0"])
    assert isinstance(report, ExecutionReport)
    assert [r.test_id for r in report.results] == ["t0", "t1", "t2"]
    assert [r.outcome for r in report.results] == ["passed", "failed", "passed"]
    assert report.passed is False
    failed = report.results[1]
    assert failed.exc_type == "AssertionError"
    assert "left:  6" in failed.message and "right: 7" in failed.message
    assert '"<test t1>"' in failed.traceback
    assert "harness" not in failed.traceback  # trimmed to the candidate's and test's frames


def test_all_passing_report(pool: KernelPool) -> None:
    report = pool.run(DOUBLE, ["assert f(2) == 4", AssertTest(id="mine", code="assert f(1) == 2")])
    assert report.passed
    assert report.load.ok and report.load.outcome == "passed"
    assert report.result_for("mine") is not None
    assert report.kernel_restarts == 0
    assert all(r.duration >= 0 for r in report.results)


def test_humaneval_check_form(pool: KernelPool) -> None:
    check = (
        "METADATA = {}\n\n"
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    assert candidate(5) == 10\n"
        "    assert abs(candidate(0.5) - 1.0) < 1e-6\n"
        "    assert candidate(-1) in [-2]\n"
        "    assert not candidate(0)\n"
        "check(f)\n"
    )
    assert pool.run(DOUBLE, [check]).passed
    wrong = "def f(x):\n    return x + 1\n"
    r = pool.run(wrong, [check]).results[0]
    assert r.outcome == "failed"
    assert "candidate(5) == 10" in r.message
    assert "in check" in r.traceback


def test_call_tests_compared_on_host(pool: KernelPool) -> None:
    code = "def f(x, scale=1):\n    return {'v': [x * scale, float('inf')], 's': {1, 2}}\n"
    good = {"v": [6, float("inf")], "s": {1, 2}}
    tests = [
        CallTest(id="ok", function="f", args=(3,), kwargs={"scale": 2}, expected=good),
        CallTest(id="bad", function="f", args=(3,), expected=good),
        CallTest(id="missing", function="g", args=(), expected=None),
    ]
    report = pool.run(code, tests)
    assert [r.outcome for r in report.results] == ["passed", "failed", "error"]
    assert "expected" in report.results[1].message
    assert report.results[2].exc_type == "NameError"


def test_stdout_captured_per_test(pool: KernelPool) -> None:
    code = "import sys\nprint('loading')\ndef f(x):\n    print('in f', x)\n    print('warn', file=sys.stderr)\n    return x\n"
    report = pool.run(code, ["assert f(1) == 1", "assert f(2) == 2"])
    assert report.load.stdout == "loading\n"
    assert report.results[0].stdout == "in f 1\n"
    assert report.results[1].stdout == "in f 2\n"
    assert report.results[0].stderr == "warn\n"
    assert not report.results[0].truncated


def test_test_with_syntax_error_is_an_error(pool: KernelPool) -> None:
    report = pool.run(DOUBLE, ["assert f(2) ==", "assert f(1) == 2"])
    assert [r.outcome for r in report.results] == ["error", "passed"]
    assert report.results[0].exc_type == "SyntaxError"


def test_fresh_state_between_runs(pool: KernelPool) -> None:
    first = pool.run(
        "import builtins\nbuiltins.LEAK = 1\nSHARED = 41\ndef f():\n    return SHARED\n",
        ["assert f() == 41"],
    )
    assert first.passed
    second = pool.run(
        "def f():\n    import builtins\n    return hasattr(builtins, 'LEAK')\n",
        ["assert f() is False", "assert 'SHARED' not in globals()"],
    )
    assert second.passed, second


def test_timeout_then_next_tests_run(pool: KernelPool) -> None:
    code = "import time\ndef slow():\n    time.sleep(30)\ndef f(x):\n    return x\n"
    t0 = time.monotonic()
    report = pool.run(code, ["slow()", "assert f(1) == 1", "assert f(2) == 2"], timeout=0.5)
    assert [r.outcome for r in report.results] == ["timeout", "passed", "passed"]
    assert report.results[0].exc_type == "TimeoutError"
    # the sleep was stopped, not waited out (a generous bound: the sleep alone takes 30 s;
    # how fast a timeout is enforced is benchmarks/bench_sandbox.py's business)
    assert time.monotonic() - t0 < 20


def test_crash_then_next_tests_run_on_a_new_kernel(pool: KernelPool) -> None:
    code = "import os\ndef boom():\n    os._exit(3)\ndef f(x):\n    return x\n"
    report = pool.run(code, ["assert f(1) == 1", "boom()", "assert f(2) == 2"])
    assert [r.outcome for r in report.results] == ["passed", "crashed", "passed"]
    assert report.kernel_restarts == 1
    assert "exit status 3" in report.results[1].message


def test_run_budget_exhausted(pool: KernelPool) -> None:
    # each test alone may spin for 10 s; the run's 1.5 s budget stops all of them
    lim = FAST.model_copy(update={"run_timeout": 1.5, "test_timeout": 10.0})
    code = "def spin():\n    while True:\n        pass\n"
    report = pool.run(code, ["spin()", "spin()", "spin()", "assert True"], limits=lim)
    assert report.budget_exhausted
    assert [r.outcome for r in report.results] == ["timeout"] * 4
    assert report.duration < 15  # generous: without the budget it takes 30 s


def test_load_timeout(pool: KernelPool) -> None:
    lim = FAST.model_copy(update={"load_timeout": 0.5})
    report = pool.run("while True:\n    pass\n", ["assert True"], limits=lim)
    assert not report.load.ok
    assert report.load.outcome == "timeout"
    assert report.results[0].outcome == "error"


def test_run_snippet_value_and_errors(pool: KernelPool) -> None:
    res = pool.run_snippet("y = f(3)\ny + 1", setup=DOUBLE)
    assert res.outcome == "passed" and res.value == "7"
    res = pool.run_snippet("print('hi')\nf('a')", setup=DOUBLE)
    assert res.value == "'aa'" and res.stdout == "hi\n"
    res = pool.run_snippet("f(None)", setup=DOUBLE)
    assert res.outcome == "error" and res.exc_type == "TypeError"
    res = pool.run_snippet("1", setup="import nope_nope\n")
    assert res.outcome == "error" and "did not load" in res.message
    res = pool.run_snippet("x = 1", setup=DOUBLE)
    assert res.outcome == "passed" and res.value is None
    res = pool.run_snippet("while True: pass", setup=DOUBLE, timeout=0.5)
    assert res.outcome == "timeout"


async def test_async_twins(pool: KernelPool) -> None:
    reports = await asyncio.gather(
        pool.arun(DOUBLE, ["assert f(1) == 2"]),
        pool.arun(DOUBLE, ["assert f(1) == 3"]),
    )
    assert [r.passed for r in reports] == [True, False]
    snip = await pool.arun_snippet("f(21)", setup=DOUBLE)
    assert snip.value == "42"


def test_concurrent_runs_from_threads(pool: KernelPool) -> None:
    out: dict[int, bool] = {}

    def work(i: int) -> None:
        code = f"def f():\n    return {i}\n"
        out[i] = pool.run(code, [f"assert f() == {i}", "assert 'f' in globals()"]).passed

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {0: True, 1: True, 2: True, 3: True}


def test_plain_strings_and_bad_tests() -> None:
    with pytest.raises(ConfigError):
        KernelPool(size=0)
    with KernelPool(size=1, limits=FAST) as p:
        with pytest.raises(ConfigError, match="unique"):
            p.run(DOUBLE, [AssertTest(id="a", code="1"), AssertTest(id="a", code="2")])
        with pytest.raises(ConfigError, match="plain builtin data"):
            p.run(DOUBLE, [CallTest(id="c", function="f", args=(object(),), expected=1)])


def test_kernel_cwd_env_and_cleanup(pool: KernelPool) -> None:
    code = (
        "import os\ndef info():\n    return os.getcwd(), sorted(os.environ), os.environ['HOME']\n"
    )
    res = pool.run_snippet("info()", setup=code)
    cwd, keys, home = eval(res.value or "")  # a repr of plain data we produced ourselves
    assert cwd.startswith("/tmp/selfheal-k-") and cwd.endswith("/work")
    assert home.startswith("/tmp/selfheal-k-")
    assert not any(k.endswith(("_API_KEY", "_TOKEN")) or k.startswith("HF_") for k in keys)
    allowed = {"LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "PATH", "HOME", "TMPDIR"}
    # nothing reaches the kernel from the host's environment beyond the allow-list
    # (ipykernel itself adds a few display variables such as CLICOLOR)
    from_host = {k for k in keys if k in os.environ and os.environ[k] != "1"} - allowed
    assert from_host == set(), from_host
    assert not set(HOST_SECRETS) & set(keys)
    deadline = time.monotonic() + 5
    root = Path(cwd).parent
    while root.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not root.exists()


class _OneKernel:
    """A KernelSource giving out kernels with network allowed by the harness but started
    in a network namespace: checks the namespace alone stops connections."""

    def __init__(self, zygote: Zygote | None) -> None:
        self.zygote = zygote

    async def acquire(self, limits: Limits, deadline: float) -> SandboxKernel:
        return await SandboxKernel.start(limits, network_namespace=True, zygote=self.zygote)

    async def release(self, kernel: SandboxKernel) -> None:
        await kernel.akill()


@pytest.mark.parametrize("forked", [False, True], ids=["launcher", "fork-server"])
def test_network_namespace_is_a_hard_boundary(pool: KernelPool, forked: bool) -> None:
    if not pool.network_namespace:
        pytest.skip("this host cannot create network namespaces")
    code = (
        "import socket\n"
        "def f():\n"
        "    try:\n"
        "        socket.create_connection(('1.1.1.1', 53), timeout=1)\n"
        "    except OSError as e:\n"
        "        return type(e).__name__\n"
        "    return 'connected'\n"
        "def interfaces():\n"
        "    lines = open('/proc/net/dev').read().splitlines()[2:]\n"
        "    return sorted(line.split(':')[0].strip() for line in lines)\n"
    )
    lim = FAST.model_copy(update={"allow_network": True})
    zygote = Zygote() if forked else None
    try:
        tests = ["assert f() != 'connected'", "assert interfaces() == ['lo']"]
        report = asyncio.run(run_candidate(_OneKernel(zygote), code, tests, lim))
    finally:
        if zygote is not None:
            zygote.close()
    assert report.passed, report


def test_default_pool_is_shared() -> None:
    a = get_default_pool()
    b = get_default_pool()
    assert a is b
    assert a.run(DOUBLE, ["assert f(4) == 8"]).passed
    a.close()
    c = get_default_pool()
    assert c is not a
    c.close()


async def test_sync_run_inside_a_running_event_loop(pool: KernelPool) -> None:
    """A notebook cell calls ``run`` from inside the kernel's running event loop."""
    asyncio.get_running_loop()
    assert pool.run(DOUBLE, ["assert f(1) == 2"]).passed


def test_empty_test_list_reports_the_load(pool: KernelPool) -> None:
    report = pool.run("print('hi')\nx = 1\n", [])
    assert report.load.ok and report.load.stdout == "hi\n"
    assert report.results == () and report.passed
    report = pool.run("x = (\n", [])
    assert not report.load.ok and report.load.exc_type == "SyntaxError"
    assert not report.passed
