"""Check-then-use races: a thread the candidate started changes a value between the
harness's "is it plain?" check and the comparison. Here the candidate returns a long list of
ints that its thread, a moment later (while the check is still walking the list), shrinks
to ``[AlwaysEqual()]``: the check saw only ints, and a harness comparing the live list lets
the object decide. The harness compares copies it built itself from exact builtin types
(``compare.plain``): the list the comparison sees can no longer change. Without that
(compare.py's ``pure`` check, then ``a == b`` on the candidate's objects) the wrong
candidate passes both forms.

The attack needs its thread to win a race (it swaps 20 ms after the call, while checking
the list takes far longer); the defence does not: the copy is compared whatever the thread
does.
"""

from __future__ import annotations

import pytest

from selfheal.kernel_sandbox import KernelPool

from .conftest import FAST
from .inproc_forms import FORMS, WRONG, in_process_tests

SWAPPER = """
import threading
import time


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


def f(x):
    values = [0] * 1_500_000  # plain ints: what the check sees while it walks them

    def swap():
        time.sleep(0.02)  # the check has started (the call returned long ago)
        values[:] = [AlwaysEqual()]  # what the comparison would see

    threading.Thread(target=swap, daemon=True).start()
    return values
"""

PYTEST_TEXT = "def test_double():\n    assert f(2) == [4]\n"
LOOP_TEXT = "for x in [1, 2]:\n    assert f(x) == [x * 2]\n"


@pytest.mark.parametrize("form", FORMS)
def test_a_value_swapped_after_the_check_is_not_what_is_compared(
    pool: KernelPool, form: str
) -> None:
    tests = in_process_tests(pool, form, PYTEST_TEXT, LOOP_TEXT)
    limits = FAST.model_copy(update={"test_timeout": 5.0})
    report = pool.run(SWAPPER, tests, limits=limits)
    assert [r.outcome for r in report.results] == ["failed"] * len(tests), report.results
    honest = pool.run(WRONG, tests, limits=FAST)
    assert [r.outcome for r in honest.results] == ["failed"] * len(tests)
