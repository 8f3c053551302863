"""Your pytest-form tests in a separate, trusted process (``Limits.pytest_tests`` default,
``pytest_process.py``): the candidate's code is called in its own process, objects it returns
are handles, its exceptions come back by type, and the forgeries that pass a wrong candidate
under the in-process runner (``test_forgeries.py``'s frames walk, as a pytest item) do not."""

from __future__ import annotations

from typing import Any

import pytest

from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.usertests import read_user_tests, user_test_cases

from .conftest import FAST
from .test_forgeries import FORGE, PATCH_AND_RESTORE, THROUGH_FRAMES, THROUGH_GC, WRONG

PYTEST_TESTS = (
    "def test_one():\n    assert f(1) == 2\n",
    "def test_three():\n    assert f(3) == 4\n",
)


def _items(
    pool: KernelPool, text: str, entry: str = "f", limits: Limits | None = None
) -> list[Any]:
    cases = user_test_cases(read_user_tests([text], entry), pool, limits)
    return [c.to_sandbox() for c in cases]


def _mode(mode: str, **more: Any) -> Limits:
    return FAST.model_copy(update={"pytest_tests": mode, **more})


def _outcomes(report: Any) -> list[tuple[str, str | None]]:
    return [(r.outcome, r.exc_type) for r in report.results]


def test_separate_process_is_the_default() -> None:
    assert Limits().pytest_tests == "separate_process"


def test_a_frames_forgery_passes_in_process_and_not_in_a_separate_process(
    pool: KernelPool,
) -> None:
    items = _items(pool, "".join(PYTEST_TESTS))
    # the documented limit of the in-process runner: the forgery signs its own "passed"
    forged = pool.run(THROUGH_FRAMES, items, limits=_mode("in_process"))
    assert forged.passed, forged.results
    # by default pytest decides in a process the candidate cannot reach
    report = pool.run(THROUGH_FRAMES, items, limits=FAST)
    assert not report.passed
    # the lines it signs are not answers to the calls: its process is stopped
    assert [r.outcome for r in report.results] == ["crashed"] * 2, report.results
    assert "sent 'result' during a call" in report.results[0].message
    honest = pool.run(WRONG, items, limits=FAST)
    assert _outcomes(honest) == [("failed", "AssertionError")] * 2


@pytest.mark.parametrize("forgery", ["gc", "patch_and_restore"])
def test_the_other_forgeries_fail_in_a_separate_process(pool: KernelPool, forgery: str) -> None:
    code = THROUGH_GC if forgery == "gc" else PATCH_AND_RESTORE
    report = pool.run(code, _items(pool, "".join(PYTEST_TESTS)), limits=FAST)
    assert not report.passed
    assert all(r.outcome in ("failed", "error") for r in report.results), report.results


FORGE_FROM_ITS_THREAD = (
    "import sys, threading, time\n"
    + FORGE
    + """
def _hunt():
    for _ in range(200):
        for frame in list(sys._current_frames().values()):
            while frame is not None:
                send = frame.f_locals.get("send")
                if callable(send) and getattr(send, "__module__", "") == "__sh_harness__":
                    _forge(send)
                    return
                frame = frame.f_back
        time.sleep(0.005)

threading.Thread(target=_hunt, daemon=True).start()

def f(x):
    return x
"""
)


def test_a_forged_result_line_of_the_candidates_process_is_not_the_verdict(
    pool: KernelPool,
) -> None:
    report = pool.run(FORGE_FROM_ITS_THREAD, _items(pool, "".join(PYTEST_TESTS)), limits=FAST)
    assert not report.passed
    assert all(r.outcome in ("failed", "error") for r in report.results), report.results


STACK = """
class Stack:
    def __init__(self, items=()):
        self._items = list(items)
        self.pushes = 0
    def push(self, x):
        self._items.append(x)
        self.pushes += 1
        return self
    def pop(self):
        if not self._items:
            raise EmptyError("pop from an empty stack")
        return self._items.pop()
    @property
    def top(self):
        return self._items[-1]
    def __len__(self):
        return len(self._items)
    def __iter__(self):
        return iter(self._items)
    def __contains__(self, x):
        return x in self._items
    def __getitem__(self, i):
        return self._items[i]
    def __eq__(self, other):
        return isinstance(other, Stack) and self._items == other._items

class EmptyError(ValueError):
    pass

class Oops(Exception):
    pass

def make(*xs):
    return Stack(xs)

def explode():
    raise Oops("it went wrong")
"""
STACK_TESTS = """
import pytest
from shapes import Stack, EmptyError, make, explode

def test_methods_and_attributes():
    s = Stack()
    s.push(1).push(2)
    assert len(s) == 2 and s.top == 2 and s.pushes == 2
    assert 1 in s and 5 not in s
    assert list(s) == [1, 2] and s[0] == 1
    assert s.pop() == 2 and len(s) == 1
    s.pushes = 10
    assert s.pushes == 10
    assert isinstance(s, Stack) and not isinstance(3, Stack)

def test_two_handles_compare_in_the_candidate():
    assert make(1, 2) == make(1, 2)
    assert make(1, 2) != make(2, 1)

def test_a_handle_never_equals_plain_data():
    assert make(1) != [1]
    assert not (make(1) == [1])

def test_builtin_base_of_its_exception():
    with pytest.raises(ValueError, match="empty stack"):
        Stack().pop()

def test_its_own_exception_type():
    with pytest.raises(EmptyError):
        Stack().pop()

def test_uncaught():
    explode()
"""


def test_objects_the_candidate_returns_are_handles(pool: KernelPool) -> None:
    items = _items(pool, STACK_TESTS, "make")
    report = pool.run(STACK, items, limits=FAST)
    got = {r.test_id.split("::")[-1]: r for r in report.results}
    assert [got[k].outcome for k in list(got)[:-1]] == ["passed"] * 5, report.results
    uncaught = got["test_uncaught"]
    assert (uncaught.outcome, uncaught.exc_type) == ("error", "Oops"), uncaught
    assert "it went wrong" in uncaught.message
    assert "Oops" in uncaught.traceback  # the candidate's own traceback, as a note


def test_a_wrong_stack_fails(pool: KernelPool) -> None:
    wrong = STACK.replace("return self._items.pop()", "return self._items[0]")
    report = pool.run(wrong, _items(pool, STACK_TESTS, "make"), limits=FAST)
    first = report.results[0]
    assert (first.outcome, first.exc_type) == ("failed", "AssertionError"), first


ALWAYS_EQUAL = """
class Yes:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False

def f(x):
    return Yes()
"""


def test_an_always_equal_object_is_not_equal_to_the_expected_value(pool: KernelPool) -> None:
    report = pool.run(ALWAYS_EQUAL, _items(pool, "".join(PYTEST_TESTS)), limits=FAST)
    assert _outcomes(report) == [("failed", "AssertionError")] * 2, report.results


HANGS_THEN_DIES = """
import os

def f(x):
    if x == 1:
        while True:
            pass
    if x == 3:
        os._exit(3)
    return x + 1
"""


def test_a_call_over_time_and_a_crash_end_their_item_only(pool: KernelPool) -> None:
    text = "".join(PYTEST_TESTS) + "def test_five():\n    assert f(5) == 6\n"
    report = pool.run(HANGS_THEN_DIES, _items(pool, text), limits=FAST)
    assert [r.outcome for r in report.results] == ["timeout", "crashed", "passed"], report.results


def test_what_cannot_be_sent_to_the_candidate_is_said(pool: KernelPool) -> None:
    text = "def test_callback():\n    assert f(lambda: 1) == 2\n"
    report = pool.run("def f(g):\n    return g() + 1\n", _items(pool, text), limits=FAST)
    r = report.results[0]
    assert (r.outcome, r.exc_type) == ("error", "TypeError"), r
    assert "cannot be sent to the candidate's code" in r.message
    assert "pytest_tests='in_process'" in r.message


def test_monkeypatch_on_the_code_under_test_reaches_the_candidate(pool: KernelPool) -> None:
    code = "LIMIT = 3\ndef f(x):\n    return min(x, LIMIT)\n"
    text = (
        "import solution\n"
        "def test_limit(monkeypatch):\n"
        "    monkeypatch.setattr(solution, 'LIMIT', 10)\n"
        "    assert solution.f(7) == 7\n"
        "def test_restored():\n"
        "    assert solution.f(7) == 3\n"
    )
    report = pool.run(code, _items(pool, text), limits=FAST)
    assert [r.outcome for r in report.results] == ["passed", "passed"], report.results


def test_a_candidate_that_does_not_load_errs_every_item(pool: KernelPool) -> None:
    report = pool.run("def f(x):\n    return (\n", _items(pool, "".join(PYTEST_TESTS)))
    assert not report.load.ok and report.load.exc_type == "SyntaxError"
    assert [r.exc_type for r in report.results] == ["CandidateNotLoaded"] * 2


def test_items_run_beside_other_tests_in_their_order(pool: KernelPool) -> None:
    items = _items(pool, "".join(PYTEST_TESTS))
    good = "def f(x):\n    return x + 1\n"
    report = pool.run(good, ["assert f(0) == 1", items[0], "assert f(2) == 4", items[1]])
    assert [r.test_id for r in report.results] == ["t0", items[0].id, "t2", items[1].id]
    assert [r.outcome for r in report.results] == ["passed", "passed", "failed", "passed"]


def _attacks() -> dict[str, tuple[str, str]]:
    """The attacks on the in-process verdict (``inproc_forms.py``'s modules), each with a
    pytest-form test it would have to pass."""
    from . import test_check_then_use, test_profilers, test_reachable_harness, test_type_lies

    double = "def test_double():\n    assert f(2) == 4\n"
    return {
        "type_lies": (test_type_lies.LIAR, double),
        "check_then_use": (test_check_then_use.SWAPPER, test_check_then_use.PYTEST_TEXT),
        "alarm_handler": (test_reachable_harness.THROUGH_THE_ALARM, double),
        "stdout_class": (test_reachable_harness.THROUGH_STDOUT, double),
        "profiler": (test_profilers.SPY.replace("{installer}", "setprofile"), double),
    }


@pytest.mark.parametrize("attack", sorted(_attacks()))
def test_the_in_process_attacks_do_not_pass_in_a_separate_process(
    pool: KernelPool, attack: str
) -> None:
    code, text = _attacks()[attack]
    report = pool.run(code, _items(pool, text), limits=FAST)
    assert not report.passed
    assert [r.outcome for r in report.results] != ["passed"], report.results


def test_a_failed_comparison_with_a_handle_says_what_it_is(pool: KernelPool) -> None:
    from . import test_type_lies

    items = _items(pool, "def test_double():\n    assert f(2) == 4\n")
    r = pool.run(test_type_lies.LIAR, items, limits=FAST).results[0]
    assert r.outcome == "failed"
    assert r.message.startswith("assert f(2) == 4\n"), r.message
    assert "left:  <a Lying>, in the candidate's process: not plain data" in r.message
    assert "right: 4" in r.message


def test_a_test_that_hangs_in_the_test_process_times_out_and_the_rest_run(
    pool: KernelPool,
) -> None:
    text = "def test_spin():\n    while True:\n        pass\n" + PYTEST_TESTS[0]
    report = pool.run("def f(x):\n    return x + 1\n", _items(pool, text), limits=FAST)
    assert [r.outcome for r in report.results] == ["timeout", "passed"], report.results
    assert "took over 1.0s" in report.results[0].message


DATA_CODE = """
import datetime
import numpy as np

def column_total(df):
    return float(df["x"].sum())

def doubled(a):
    return a * 2

def next_day(d):
    return d + datetime.timedelta(days=1)

def label(s):
    return s.name
"""
DATA_TESTS = """
import datetime
import numpy as np
import pandas as pd

def test_a_frame():
    assert column_total(pd.DataFrame({"x": [1.5, 2.5], "y": ["a", "b"]})) == 4.0

def test_an_array():
    np.testing.assert_array_equal(doubled(np.arange(3)), np.array([0, 2, 4]))

def test_a_date():
    assert next_day(datetime.date(2024, 2, 28)) == datetime.date(2024, 2, 29)

def test_a_series():
    assert label(pd.Series([1, 2], name="n")) == "n"
"""


def test_numpy_pandas_and_dates_are_sent_as_data(pool: KernelPool) -> None:
    pytest.importorskip("pandas")
    slow = _mode("separate_process", test_timeout=30.0, load_timeout=30.0, run_timeout=120.0)
    items = _items(pool, DATA_TESTS, "column_total", slow)  # (pandas imports in collection)
    report = pool.run(DATA_CODE, items, limits=slow)
    assert [r.outcome for r in report.results] == ["passed"] * 4, report.results


def test_a_test_server_that_died_is_replaced(pool: KernelPool) -> None:
    from selfheal.kernel_sandbox import pytest_process

    items = _items(pool, "".join(PYTEST_TESTS))
    good = "def f(x):\n    return x + 1\n"
    assert pool.run(good, items, limits=FAST).passed
    srv = pytest_process.server()
    srv.proc.kill()  # (as when the thread that started it ends: it dies with that thread)
    report = pool.run(good, items, limits=FAST)
    assert [r.outcome for r in report.results] == ["passed", "passed"], report.results
    assert pytest_process.server() is not srv


def test_what_the_candidate_prints_reaches_capsys_and_the_report(pool: KernelPool) -> None:
    code = "def f(x):\n    print('inside f', x)\n    return x + 1\n"
    text = (
        "def test_captured(capsys):\n"
        "    assert f(1) == 2\n"
        "    assert capsys.readouterr().out == 'inside f 1\\n'\n"
        "def test_shown():\n"
        "    assert f(2) == 3\n"
    )
    report = pool.run(code, _items(pool, text), limits=FAST)
    assert [r.outcome for r in report.results] == ["passed", "passed"], report.results
    assert "inside f 2" in report.results[1].stdout


SCALARS_CODE = """
def describe(*xs):
    return [(type(x).__name__, repr(x)) for x in xs]

class Money:
    def __init__(self, cents):
        self.cents = cents
    def __sub__(self, other):
        return Money(self.cents - other)
    def __rsub__(self, other):
        return Money(other - self.cents)

def money(cents):
    return Money(cents)
"""
SCALARS_TESTS = """
def test_scalars():
    sent = (0.1, float("-inf"), 1.5 - 2j, bytearray(b"ab"), range(1, 7, 2), [b"x", (None,)])
    assert describe(*sent) == [
        ("float", "0.1"),
        ("float", "-inf"),
        ("complex", "(1.5-2j)"),
        ("bytearray", "bytearray(b'ab')"),
        ("range", "range(1, 7, 2)"),
        ("list", "[b'x', (None,)]"),
    ]

def test_reflected_operators_keep_their_order():
    assert (money(10) - 3).cents == 7
    assert (10 - money(3)).cents == 7
"""


def test_scalars_and_reflected_operators_reach_the_candidate_exactly(pool: KernelPool) -> None:
    """Floats (``0.1``, ``-inf``), complex numbers, bytearrays and ranges arrive as the same
    values; ``10 - handle`` runs the candidate's ``__rsub__`` with 10, not ``__sub__``."""
    items = _items(pool, SCALARS_TESTS, "describe")
    report = pool.run(SCALARS_CODE, items, limits=FAST)
    assert _outcomes(report) == [("passed", None)] * 2, report.results
