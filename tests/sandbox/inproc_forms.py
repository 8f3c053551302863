"""The two test forms whose verdict stays in the candidate's process (docs/sandbox.md, "Your
tests in pytest's form"): a pytest-form test run as a pytest item by the harness
(``Limits.pytest_tests="in_process"``; by default pytest runs it in a separate process,
``test_pytest_process.py``) and an assert test with a loop over the candidate's results. The attack modules
(``test_type_lies.py``, ``test_check_then_use.py``, ``test_reachable_harness.py``,
``test_profilers.py``) run every attack against both."""

from __future__ import annotations

from typing import Any

from selfheal.kernel_sandbox import AssertTest, KernelPool
from selfheal.kernel_sandbox.execution import in_process
from selfheal.usertests import read_user_tests, user_test_cases

PYTEST_FORM = "def test_double():\n    assert f(2) == 4\n"
LOOP_FORM = "for x in [1, 2]:\n    assert f(x) == x * 2\n"
FORMS = ("pytest", "loop")
WRONG = "def f(x):\n    return x\n"
"""The candidate without tricks: fails both forms."""


def in_process_tests(
    pool: KernelPool, form: str, pytest_text: str = PYTEST_FORM, loop_text: str = LOOP_FORM
) -> list[Any]:
    """The sandbox tests of ``form``: the pytest-form module collected in ``pool`` (its
    items, as the in-process runner runs them), or the loop as one ``AssertTest``."""
    if form == "pytest":
        cases = user_test_cases(read_user_tests([pytest_text], "f"), pool)
        return [in_process(c.to_sandbox()) for c in cases]
    return [AssertTest(id="loop", code=loop_text)]
