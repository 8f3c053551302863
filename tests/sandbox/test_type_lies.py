"""Type lies: a class whose *metaclass* defines ``__eq__`` and ``__hash__`` answers every
``type(v) in {int, ...}`` (the metaclass is asked, and says yes), so a harness that checks
types that way takes the candidate's object for a plain ``int`` and lets its ``__eq__``
decide. The harness checks types by identity only (``compare.plain``, ``_wire.encode_value``,
``trace.one_of``, ``guard.audit``). Without that (compare.py's ``type(v) in _PURE_SCALARS``,
_wire.py's ``t in _SCALARS``) every test here passes the wrong candidate."""

from __future__ import annotations

import pytest

from selfheal.kernel_sandbox import CallTest, KernelPool

from .conftest import FAST
from .inproc_forms import FORMS, WRONG, in_process_tests

LIAR = """
class _Liar(type):
    def __eq__(cls, other):
        return True

    def __hash__(cls):
        return hash(int)  # lands in the bucket of int in any set of types


class Lying(metaclass=_Liar):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __bool__(self):
        return True

    def __repr__(self):
        return "4"

    __hash__ = object.__hash__


def f(x):
    return Lying()
"""


@pytest.mark.parametrize("form", FORMS)
def test_a_metaclass_that_claims_every_type_is_not_a_plain_value(
    pool: KernelPool, form: str
) -> None:
    tests = in_process_tests(pool, form)
    report = pool.run(LIAR, tests, limits=FAST)
    assert [r.outcome for r in report.results] == ["failed"] * len(tests), report.results
    assert "not a plain builtin value" in report.results[0].message
    honest = pool.run(WRONG, tests, limits=FAST)
    assert [r.outcome for r in honest.results] == ["failed"] * len(tests)


def test_a_call_test_value_of_a_lying_type_is_not_encoded_as_plain(pool: KernelPool) -> None:
    """A CallTest's value is encoded only if its type is a builtin one: the lie would have it
    signed as its own ``__repr__`` ("4"), equal to ``expected`` on the host."""
    report = pool.run(LIAR, [CallTest(id="c", function="f", args=(2,), expected=4)], limits=FAST)
    assert report.results[0].outcome == "failed", report.results[0]
    assert "Lying" in report.results[0].message
