"""Forging a verdict from inside the candidate's process: what the sandbox stops, and the
forgery docs/sandbox.md admits it does not ("Not covered (in-process limits)") for the tests
that still run whole in the candidate's process (here a test with a loop). An assert-line
test's verdict is decided on the host (``split.py``): the forgeries fail there.

* Through the garbage collector: ``gc.get_objects()`` hands the candidate the harness's own
  ``send`` (the closure that signs results with the kernel's key); calling it with a passing
  result and ``done`` would make a wrong candidate pass. The audit hook refuses
  ``gc.get_objects/get_referrers/get_referents`` while candidate code runs, so the test errors
  with ``PermissionError`` instead. (Without that refusal, in guard.py, the first case here
  passes the wrong candidate: shown by deleting it.)
* The documented limit, reading the key through stack frames: ``sys._getframe`` walks up to the
  harness's frame, whose locals hold the same ``send``. The forgery works: this test says so,
  so that closing the gap (or docs/sandbox.md changing) is a deliberate change here too.
* Once a documented limit, patching the harness and restoring it within one test: the
  candidate takes the assertion helper from the test's locals and, through its
  ``__globals__``, replaces the harness's ``cmp`` by one that answers True once and puts the
  original back. Refused now: the helpers are sealed copies (``_harness/sealing.py``) whose
  globals are empty, and they read no global name, so there is no ``cmp`` to replace (with
  the sealing removed, in server.py, the forgery passes both tests).

Every run here is its own process: a forgery reaches only its own verdict (the next candidate
on the pool is checked honestly, asserted below).
"""

from __future__ import annotations

from pathlib import Path

from selfheal.kernel_sandbox import KernelPool

from .conftest import FAST

WRONG = "def f(x):\n    return x\n"
TESTS = ["for x in [1]:\n    assert f(x) == x + 1", "for x in [3]:\n    assert f(x) == x + 1"]
"""Tests that run whole in the candidate's process (a loop is not split for the host)."""
HOST_TESTS = ["assert f(1) == 2", "assert f(3) == 4"]
"""The same checks as assert lines: judged on the host."""

FORGE = """
def _forge(send):
    for i in range(2):
        send(("result", i, "passed", None, "", "", "", "", False, 0.0, None))
    send(("done",))
"""

THROUGH_GC = (
    "import gc\n"
    + FORGE
    + """
def f(x):
    for o in gc.get_objects():
        if type(o) is type(f) and o.__name__ == "send" and o.__module__ == "__sh_harness__":
            _forge(o)
    return x
"""
)

THROUGH_FRAMES = (
    "import sys\n"
    + FORGE
    + """
def f(x):
    frame = sys._getframe(1)
    while frame is not None:
        send = frame.f_locals.get("send")
        if callable(send) and getattr(send, "__module__", "") == "__sh_harness__":
            _forge(send)
            break
        frame = frame.f_back
    return x
"""
)

PATCH_AND_RESTORE = """
import sys

def f(x):
    helper = sys._getframe(1).f_locals["__sh_assert_cmp__"]
    harness = helper.__globals__
    original = harness["cmp"]

    def once(*args):
        harness["cmp"] = original  # put back before the harness looks
        return True

    harness["cmp"] = once
    return x
"""


def _honest_after(pool: KernelPool) -> None:
    """The pool's next candidate (a wrong one, no tricks) still fails."""
    report = pool.run(WRONG, TESTS, limits=FAST)
    assert [r.outcome for r in report.results] == ["failed", "failed"]


def test_the_harness_cannot_be_reached_through_the_garbage_collector(pool: KernelPool) -> None:
    report = pool.run(THROUGH_GC, TESTS, limits=FAST)
    assert not report.passed
    assert [(r.outcome, r.exc_type) for r in report.results] == [("error", "PermissionError")] * 2
    assert "gc.get_objects is blocked" in report.results[0].message
    _honest_after(pool)


def test_get_referrers_and_get_referents_are_refused_too(pool: KernelPool) -> None:
    code = (
        "import gc\n"
        "def f(x):\n"
        "    return gc.get_referrers(f)\n"
        "def g(x):\n"
        "    return gc.get_referents(g)\n"
    )
    report = pool.run(code, ["f(1)", "g(1)"], limits=FAST)
    assert [(r.outcome, r.exc_type) for r in report.results] == [("error", "PermissionError")] * 2
    assert "gc.get_referrers" in report.results[0].message
    assert "gc.get_referents" in report.results[1].message


def test_documented_limit_a_candidate_walking_stack_frames_can_forge_its_verdict(
    pool: KernelPool,
) -> None:
    report = pool.run(THROUGH_FRAMES, TESTS, limits=FAST)
    assert report.passed, "the frames forgery no longer works: update docs/sandbox.md"
    _honest_after(pool)


def test_patching_the_harness_through_a_helper_and_restoring_it_is_refused(
    pool: KernelPool,
) -> None:
    report = pool.run(PATCH_AND_RESTORE, TESTS, limits=FAST)
    assert [(r.outcome, r.exc_type) for r in report.results] == [("error", "KeyError")] * 2
    _honest_after(pool)


def test_neither_forgery_passes_a_test_judged_on_the_host(pool: KernelPool) -> None:
    for code in (THROUGH_FRAMES, PATCH_AND_RESTORE):
        report = pool.run(code, HOST_TESTS, limits=FAST)
        assert not report.passed
        assert all(r.outcome in ("failed", "error") for r in report.results), code
    _honest_after(pool)


def test_the_docs_admit_the_limit_and_the_closed_path() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "sandbox.md").read_text()
    assert "deliberately walks frames" in docs
    assert "a helper in hand leads to no harness state" in docs
