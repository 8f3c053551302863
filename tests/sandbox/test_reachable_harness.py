"""Reachable harness state: objects a candidate can get in plain Python, without walking
frames, that used to lead into the harness:

* the alarm handler (``signal.getsignal(SIGALRM)``) was a closure over the guard: setting
  its ``started`` to False switched the audit hook off, after which ``gc.get_objects()``
  hands over the harness's signing ``send``;
* ``type(sys.stdout).write.__globals__`` was the harness's namespace: a candidate replaced
  ``cmp`` there with one that answers True once and puts the original back, so the check of
  the namespace after the test found nothing.

The handler and the helpers are sealed copies now (no closure, globals of their own, no
global name read) and ``sys.stdout``'s class is a detached copy (``_harness/sealing.py``).
With that removed (server.py's ``_seal_reachable``; guard.py's handler) every forgery here
passes the wrong candidate.
"""

from __future__ import annotations

import pytest

from selfheal.kernel_sandbox import KernelPool

from .conftest import FAST
from .inproc_forms import FORMS, WRONG, in_process_tests

FORGE = """
import gc
import signal
import sys

_done = []


def _forge(send, n):
    for i in range(n):
        send(("result", i, "passed", None, "", "", "", "", False, 0.0, None))
    send(("done",))
"""

THROUGH_THE_ALARM = (
    FORGE
    + """
def f(x):
    handler = signal.getsignal(signal.SIGALRM)
    guard = handler.__closure__[0].cell_contents
    guard.started = False  # the audit hook's switch
    if not _done:
        _done.append(1)
        for o in gc.get_objects():
            if type(o) is type(f) and o.__name__ == "send" and o.__module__ == "__sh_harness__":
                _forge(o, 1)
    return x
"""
)

THROUGH_STDOUT = """
import sys


def f(x):
    harness = type(sys.stdout).write.__globals__
    original = harness["cmp"]

    def once(*args):
        harness["cmp"] = original  # put back before the harness looks
        return True

    harness["cmp"] = once
    return x
"""

SURVEY = """
import signal
import sys


def harness_reachable():
    found = []
    for sig in signal.valid_signals():
        handler = signal.getsignal(sig)
        if getattr(handler, "__closure__", None):
            found.append(f"a closure handles {sig}")
        if getattr(handler, "__globals__", {}).get("__name__") == "__sh_harness__":
            found.append(f"the harness's globals through the handler of {sig}")
    for name in ("stdout", "stderr"):
        for attr in vars(type(getattr(sys, name))).values():
            if getattr(attr, "__globals__", {}).get("__name__") == "__sh_harness__":
                found.append(f"the harness's globals through sys.{name}")
    for name in ("settrace", "setprofile"):
        fn = getattr(sys, name)
        if getattr(fn, "__closure__", None) or "__sh_harness__" in str(
            getattr(fn, "__globals__", {}).get("__name__")
        ):
            found.append(f"harness state through sys.{name}")
    return sorted(set(found))
"""


@pytest.mark.parametrize("form", FORMS)
def test_the_alarm_handler_leads_to_no_guard(pool: KernelPool, form: str) -> None:
    tests = in_process_tests(pool, form)
    report = pool.run(THROUGH_THE_ALARM, tests, limits=FAST)
    assert [r.outcome for r in report.results] == ["error"] * len(tests), report.results
    assert report.results[0].exc_type == "TypeError"  # no closure to read
    honest = pool.run(WRONG, tests, limits=FAST)
    assert [r.outcome for r in honest.results] == ["failed"] * len(tests)


@pytest.mark.parametrize("form", FORMS)
def test_sys_stdout_leads_to_no_harness_namespace(pool: KernelPool, form: str) -> None:
    tests = in_process_tests(pool, form)
    report = pool.run(THROUGH_STDOUT, tests, limits=FAST)
    assert [r.outcome for r in report.results] == ["error"] * len(tests), report.results
    assert report.results[0].exc_type == "KeyError"  # no cmp in the detached class's globals


def test_no_signal_handler_or_stream_holds_harness_state(pool: KernelPool) -> None:
    report = pool.run(SURVEY, ["assert harness_reachable() == []"], limits=FAST)
    assert report.passed, report.results[0].message
