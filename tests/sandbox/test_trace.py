"""Line-level traces of a failing test (the debugger's ``trace_failure``) on real kernels:
recursion, an exception, bounds on steps and values, and candidates that go after the
tracer. Then the tracer's value rendering on the host, without a kernel."""

from __future__ import annotations

import collections
import enum
from typing import Any

import pytest

from selfheal.kernel_sandbox import (
    KernelPool,
    Limits,
    ProbeCall,
    TraceLimits,
    TracingExecutor,
    trace_text,
)
from selfheal.kernel_sandbox._harness.trace import brief, code_objects

FIB = """
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
"""

MEAN_INV = """
def mean_inv(xs):
    total = 0
    for x in xs:
        total += 1 / x
    return total / len(xs)
"""


def test_the_pool_traces(pool: KernelPool) -> None:
    assert isinstance(pool, TracingExecutor)


def test_a_recursive_function(pool: KernelPool, limits: Limits) -> None:
    r = pool.run_trace(FIB, "assert fib(3) == 3", limits=limits)
    assert (r.outcome, r.exc_type) == ("failed", "AssertionError")
    assert "left:  2" in r.message and "right: 3" in r.message
    calls = [(s.depth, dict(s.values)["n"]) for s in r.steps if s.kind == "call"]
    assert calls == [(1, "3"), (2, "2"), (3, "1"), (3, "0"), (2, "1")]
    returns = [(s.depth, s.value) for s in r.steps if s.kind == "return"]
    assert returns == [(3, "1"), (3, "0"), (2, "1"), (2, "1"), (1, "2")]
    assert r.total_steps == len(r.steps) == 20 and r.omitted == 0 and r.notes == ()
    text = trace_text(r, FIB)
    assert "→ fib(n=3)" in text and "\n  → fib(n=2)" in text and "\n    → fib(n=1)" in text
    assert "      L4: return n" in text and "← fib returns 2" in text
    assert "calls nested 3 deep" in text


def test_a_function_that_raises(pool: KernelPool, limits: Limits) -> None:
    r = pool.run_trace(MEAN_INV, "assert mean_inv([1, 2, 0]) == 1", limits=limits)
    assert (r.outcome, r.exc_type) == ("error", "ZeroDivisionError")
    last = r.steps[-1]
    assert (last.kind, last.line, last.value) == ("raise", 5, "ZeroDivisionError: division by zero")
    text = trace_text(r, MEAN_INV)
    # each line shows what running it changed, read from the frame's next step
    assert "L5: total += 1 / x   # total=1.5" in text
    assert "L4: for x in xs:   # x=0" in text
    assert text.rstrip().endswith("↑ mean_inv raises ZeroDivisionError: division by zero (line 5)")


def test_a_caught_exception_and_a_probe_expression(pool: KernelPool, limits: Limits) -> None:
    src = """
def parse(s):
    try:
        return int(s)
    except ValueError:
        return -1
"""
    r = pool.run_trace(src, ProbeCall(id="p1", expr="parse('x')"), limits=limits)
    assert r.outcome == "passed" and r.test_id == "p1"
    kinds = [s.kind for s in r.steps]
    assert kinds == ["call", "line", "line", "exception", "line", "line", "return"]
    assert "! ValueError: invalid literal for int() with base 10: 'x' at line 4" in trace_text(
        r, src
    )


def test_output_is_bounded_in_steps_and_value_sizes(pool: KernelPool, limits: Limits) -> None:
    src = """
def walk(n):
    big = list(range(10_000))
    text = "x" * 100_000
    acc = 0
    for i in range(n):
        acc += i
    return acc
"""
    small = TraceLimits(head=10, tail=20, value_chars=30, max_values=2)
    r = pool.run_trace(src, "assert walk(3000) == 0", limits=limits, trace=small)
    assert r.outcome == "failed"
    assert len(r.steps) == 30 and r.gap_at == 10
    assert r.total_steps == 6007 and r.omitted == r.total_steps - 30
    assert all(len(v) <= 30 for s in r.steps for _, v in s.values)
    # the end of the run is kept: the last iterations and the return
    assert r.steps[-1].kind == "return" and r.steps[-1].value == "4498500"
    big = next(v for s in r.steps for k, v in s.values if k == "big")
    assert big.startswith("[0, 1, 2") and big.endswith("…")
    text = trace_text(r, src, max_chars=900)
    assert len(text) <= 900 and "not recorded" in text
    assert text.rstrip().endswith("← walk returns 4498500")

    # tracing stops after max_total steps; the test still ends (here: on its own)
    stop = small.model_copy(update={"max_total": 500})
    r = pool.run_trace(src, "assert walk(3000) == 0", limits=limits, trace=stop)
    assert r.outcome == "failed" and r.total_steps == 500
    assert any("tracing stopped after 500 steps" in n for n in r.notes)


def test_a_runaway_loop_under_the_trace_times_out_with_its_steps(
    pool: KernelPool, limits: Limits
) -> None:
    src = "def spin():\n    i = 0\n    while True:\n        i += 1\n"
    endless = TraceLimits(head=5, tail=5, max_total=10**12)
    r = pool.run_trace(src, "spin()", limits=limits, trace=endless)
    assert r.outcome == "timeout" and r.notes == ()
    assert len(r.steps) == 10 and r.total_steps > 10
    assert {s.line for s in r.steps[-4:]} <= {3, 4}


def test_a_candidate_that_does_not_load(pool: KernelPool, limits: Limits) -> None:
    r = pool.run_trace("def f(:\n", "assert f() == 1", limits=limits)
    assert not r.loaded and r.exc_type == "SyntaxError" and r.steps == ()
    assert "did not load" in r.message


TAMPER = """
import os
import signal
import sys

def switch_off(x):
    y = x + 1
    sys.settrace(None)
    return y

def own_tracer(x):
    sys.settrace(lambda *a: None)
    return x

def grab_frame(x):
    return sys._getframe().f_trace

def from_traceback(x):
    try:
        raise ValueError(x)
    except ValueError as e:
        return e.__traceback__.tb_frame

def gen_frame(x):
    g = (i for i in range(2))
    return g.gi_frame

def signal_self(x):
    signal.signal(signal.SIGUSR1, lambda s, f: None)
    os.kill(os.getpid(), signal.SIGUSR1)
    return x

def ask_gettrace(x):
    return sys.gettrace()

_stash = sys.gettrace

def ask_stashed(x):
    return _stash()

def forge(x):
    fake = compile("\\n" * 98 + "z = 1\\nz = 2\\n", "<candidate>", "exec")
    exec(fake, {})
    return x

class Loud:
    def __repr__(self):
        print("repr ran")
        raise RuntimeError("repr")

def loud(x):
    thing = Loud()
    return x
"""


@pytest.mark.parametrize(
    ("call", "outcome", "refused"),
    [
        ("switch_off(1)", "error", "sys.settrace"),
        ("own_tracer(1)", "error", "sys.settrace"),
        ("grab_frame(1)", "error", "sys._getframe"),
        ("from_traceback(1)", "error", "the tb_frame attribute"),
        ("gen_frame(1)", "error", "the gi_frame attribute"),
        ("signal_self(1)", "error", "os.kill"),
    ],
)
def test_a_candidate_cannot_switch_off_or_reach_the_tracer(
    pool: KernelPool, limits: Limits, call: str, outcome: str, refused: str
) -> None:
    r = pool.run_trace(TAMPER, f"{call}", limits=limits)
    assert r.outcome == outcome and r.exc_type == "PermissionError"
    assert f"the candidate tried {refused} (refused)" in r.notes
    # the trace goes on to the refused line and the exception it raised
    assert r.steps[0].kind == "call" and r.steps[-1].kind == "raise"
    assert "PermissionError" in r.steps[-1].value


def test_the_tracer_is_invisible_and_cannot_be_fed(pool: KernelPool, limits: Limits) -> None:
    for call in ("ask_gettrace(1)", "ask_stashed(1)"):
        r = pool.run_trace(TAMPER, f"assert {call} is None", limits=limits)
        assert r.outcome == "passed", r.message
        assert r.steps[-1].value == "None"
    # code compiled at run time under the candidate's file name is not traced
    r = pool.run_trace(TAMPER, "forge(1)", limits=limits)
    assert r.outcome == "passed" and {s.function for s in r.steps} == {"forge"}
    assert all(s.line < 99 for s in r.steps)
    # values are shown without running the candidate's __repr__
    r = pool.run_trace(TAMPER, "loud(1)", limits=limits)
    assert r.outcome == "passed" and r.stdout == ""
    assert ("thing", "<Loud>") in [v for s in r.steps for v in s.values]


def test_a_trace_gives_no_verdict_and_leaves_runs_alone(pool: KernelPool, limits: Limits) -> None:
    """After a traced run (a fresh process), a plain run is unaffected: no tracer, and a
    tracer of the candidate's own is refused there too (in every run: a tracer would see the
    harness's frames, docs/sandbox.md)."""
    pool.run_trace(TAMPER, "switch_off(1)", limits=limits)
    report = pool.run(TAMPER, ["assert ask_gettrace(1) is None", "own_tracer(1)"], limits=limits)
    assert [r.outcome for r in report.results] == ["passed", "error"]
    assert report.results[1].exc_type == "PermissionError"
    assert "sys.settrace is blocked" in report.results[1].message


# ----------------------------------------------------------------- on the host, no kernel


class Color(enum.IntEnum):
    RED = 1


class Weird:
    def __repr__(self) -> str:  # never called
        raise AssertionError("the candidate's __repr__ ran")


def test_brief_shows_plain_values_within_a_budget() -> None:
    assert brief([1, "a", (2,), {3: None}, {4.5}, frozenset(), set()]) == (
        "[1, 'a', (2,), {3: None}, {4.5}, frozenset({}), set()]"
    )
    assert brief(list(range(1000)), 20) == "[0, 1, 2, 3, 4, 5, …"
    assert len(brief("y" * 10_000, 30)) == 30
    assert brief(10**500, 40) == "<int of 1661 bits>"
    assert brief(Weird()) == "<Weird>"
    assert brief([Weird(), Color.RED]) == "[<Weird>, Color(1)]"
    assert brief(collections.Counter("aab")) == "Counter({'a': 2, 'b': 1})"
    deep: list[Any] = [1]
    for _ in range(20):
        deep = [deep]
    assert "items" in brief(deep, 200)


def test_code_objects_reach_every_nested_function() -> None:
    co = compile("def f():\n    def g():\n        return lambda: [i for i in ()]\n", "<c>", "exec")
    names = sorted(c.co_name for c in code_objects(co).values())
    assert names == ["<lambda>", "<listcomp>", "<module>", "f", "g"]
