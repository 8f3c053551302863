"""Profilers and tracers: one installed while the candidate loads is called on every call
the harness makes afterwards, with the harness's frames; from the frame of the harness's
``send`` it takes the harness object (with the kernel's key) and the run's number, and
signs a "passed" of its own before the real verdict. ``sys.settrace``, ``sys.setprofile``
and their ``threading`` twins refuse in every run now (``trace.hide_tracer``), the audit hook
refuses a profiler set from C (``cProfile``) and a candidate's own audit hook, and the
guard is checked after every test (``guard.guard_broken``). With that removed (a traced run
only, as before: session.py's ``hide_tracer``; guard.py's ``_HOOKS``) the forging profiler
and tracer pass the wrong candidate in both forms.
"""

from __future__ import annotations

import pytest

from selfheal.kernel_sandbox import KernelPool

from .conftest import FAST
from .inproc_forms import FORMS, WRONG, in_process_tests

SPY = """
import sys

_seen = {}


def _spy(frame, event, arg):
    if event != "call":
        return None
    name = frame.f_code.co_name
    if name == "send" and "h" in frame.f_locals and not _seen:
        _seen["h"], _seen["seq"] = frame.f_locals["h"], frame.f_locals["seq"]
    elif name == "_one" and "h" in _seen and "done" not in _seen:
        _seen["done"] = True
        h, seq = _seen["h"], _seen["seq"]
        h.send(("result", seq, 0, "passed", None, "", "", "", "", False, 0.0, None))
        h.send(("done", seq))
    return None


sys.{installer}(_spy)


def f(x):
    return x
"""


@pytest.mark.parametrize("installer", ["setprofile", "settrace"])
@pytest.mark.parametrize("form", FORMS)
def test_a_profiler_or_tracer_installed_at_load_is_refused(
    pool: KernelPool, form: str, installer: str
) -> None:
    tests = in_process_tests(pool, form)
    report = pool.run(SPY.replace("{installer}", installer), tests, limits=FAST)
    assert not report.passed
    assert not report.load.ok and report.load.exc_type == "PermissionError", report.load
    assert f"sys.{installer} is blocked" in report.load.message
    honest = pool.run(WRONG, tests, limits=FAST)
    assert [r.outcome for r in honest.results] == ["failed"] * len(tests)


@pytest.mark.parametrize(
    ("code", "refused"),
    [
        ("import cProfile\ncProfile.Profile().enable()\n", "sys.setprofile is blocked"),
        ("import threading\nthreading.setprofile(print)\n", "threading.setprofile is blocked"),
        ("import threading\nthreading.settrace(print)\n", "threading.settrace is blocked"),
    ],
)
def test_profilers_from_c_threads_and_audit_hooks_are_refused(
    pool: KernelPool, code: str, refused: str
) -> None:
    report = pool.run(code + "def f(x):\n    return x * 2\n", ["assert f(2) == 4"], limits=FAST)
    assert not report.load.ok and report.load.exc_type == "PermissionError", report.load
    assert refused in report.load.message


def test_an_audit_hook_of_the_candidate_is_never_added(pool: KernelPool) -> None:
    """It would see the harness's events (a traceback's frames among them); CPython drops a
    hook that an existing hook refuses, silently."""
    code = (
        "import sys\n_events = []\nsys.addaudithook(lambda event, args: _events.append(event))\n"
        "def f(x):\n    open('/dev/null').close()\n    return len(_events)\n"
    )
    report = pool.run(code, ["assert f(2) == 0"], limits=FAST)
    assert report.passed, report.results[0].message


def test_a_hook_left_for_new_threads_fails_the_test(pool: KernelPool) -> None:
    """The guard is checked after every test: a profiler waiting for the next thread (set
    without ``threading.setprofile``) fails the test that left it."""
    code = "import threading\ndef f(x):\n    threading._profile_hook = print\n    return x * 2\n"
    report = pool.run(code, ["assert f(2) == 4"], limits=FAST)
    assert report.results[0].outcome == "failed"
    assert "tracer or profiler for new threads" in report.results[0].message
