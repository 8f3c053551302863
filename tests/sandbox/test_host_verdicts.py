"""Verdicts decided on the host (``split.py``, ``values.py``, ``hosteval.py``): a wrong
candidate written by an attacker who read the harness's source cannot pass an assert-line
test, a CallTest or an example, whatever it does inside its own process, since the expected
value never enters it and the comparison is the host's. The lying type and the profiler's forged
"passed" made a wrong candidate pass before this change (the test ran whole in the
candidate's process and the harness's word was the verdict).
"""

from __future__ import annotations

import pytest

from selfheal.kernel_sandbox import CallTest, KernelPool

from .conftest import FAST

LYING_TYPE = """
class _Meta(type):
    def __eq__(cls, other):
        return True
    def __hash__(cls):
        return hash(int)

class Liar(metaclass=_Meta):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __repr__(self):
        return "4"
    def __bool__(self):
        return True

def f(x):
    return Liar()
"""

HANDLER_STATE = """
import signal

def f(x):
    handler = signal.getsignal(signal.SIGALRM)
    for cell in getattr(handler, "__closure__", None) or ():
        guard = cell.cell_contents
        if hasattr(guard, "clean_builtins"):
            guard.started = False  # the audit hook's switch
    return x
"""

PROFILER = """
import sys

def _profile(frame, event, arg):
    send = frame.f_locals.get("send")
    if callable(send) and getattr(send, "__module__", "") == "__sh_harness__":
        sys.setprofile(None)
        for i in range(3):  # "passed", as the harness says it for a test it ran in-process
            send(("result", i, "passed", None, "", "", "", "", False, 0.0, None))
        send(("done",))

sys.setprofile(_profile)

def f(x):
    return x
"""


@pytest.mark.parametrize("attack", [LYING_TYPE, HANDLER_STATE, PROFILER])
def test_a_wrong_candidate_cannot_pass_assert_lines(pool: KernelPool, attack: str) -> None:
    tests = ["assert f(3) == 4", "assert [f(3)] == [[4]] or f(3) == 4", "assert f(3) == 4"]
    report = pool.run(attack, tests, limits=FAST)  # (the profiler is also refused at load)
    assert not report.passed
    assert all(r.outcome in ("failed", "error") for r in report.results), report.results


def test_the_lying_type_fails_a_call_test_and_never_shows_as_the_value(pool: KernelPool) -> None:
    report = pool.run(LYING_TYPE, [CallTest(id="c", function="f", args=(3,), expected=4)])
    r = report.results[0]
    assert r.outcome == "failed"
    assert "a Liar, not a plain value" in r.message  # its type by identity, not its repr


def test_the_expected_value_never_reaches_the_candidate(pool: KernelPool) -> None:
    spy = (
        "import sys\n"
        "def f(x):\n"
        "    frame = sys._getframe(1)\n"
        "    seen = []\n"
        "    while frame is not None:\n"
        "        seen.append(repr(frame.f_code.co_consts) + repr(frame.f_locals))\n"
        "        frame = frame.f_back\n"
        "    raise ValueError(''.join(seen))\n"
    )
    report = pool.run(spy, ["assert f(3) == 123456789"], limits=FAST)
    r = report.results[0]
    assert r.outcome == "error" and r.exc_type == "ValueError"
    assert "f(3)" in r.message or "__sh_v__" in r.message  # it did see its own call
    assert "123456789" not in r.message


def test_library_values_compare_as_data_on_the_host(pool: KernelPool) -> None:
    pytest.importorskip("numpy")
    code = (
        "import numpy as np\n"
        "def half(x):\n    return np.float64(x) / 2\n"
        "def arr(n):\n    return np.arange(n)\n"
    )
    tests = [
        "assert half(1) == 0.5",
        "assert arr(3) == np.array([0, 1, 2])",
        "assert arr(3) == [0, 1, 2]",
        "assert half(3) > 1",
        "assert arr(3) == np.array([0, 1, 3])",
        "assert (arr(3) >= 0).all()",
    ]
    outcomes = [r.outcome for r in pool.run(code, tests, limits=FAST).results]
    assert outcomes == ["passed", "passed", "passed", "passed", "failed", "passed"]


def test_pandas_frames_compare_with_pandas_semantics(pool: KernelPool) -> None:
    pytest.importorskip("pandas")
    code = (
        "import pandas as pd\n"
        "def totals(rows):\n"
        "    df = pd.DataFrame(rows)\n"
        "    return df.groupby('k', as_index=False)['v'].sum()\n"
    )
    rows = "[{'k': 'a', 'v': 1}, {'k': 'b', 'v': 2}, {'k': 'a', 'v': 3}]"
    tests = [
        f"assert totals({rows}) == pd.DataFrame({{'k': ['a', 'b'], 'v': [4, 2]}})",
        f"assert totals({rows}) == pd.DataFrame({{'k': ['a', 'b'], 'v': [4, 3]}})",
        f"pd.testing.assert_frame_equal(totals({rows}), pd.DataFrame({{'k': ['a', 'b'], 'v': [4, 2]}}))",
    ]
    outcomes = [r.outcome for r in pool.run(code, tests, limits=FAST).results]
    assert outcomes == ["passed", "failed", "passed"]


def test_a_raise_in_a_branch_the_host_never_reads_does_not_count(pool: KernelPool) -> None:
    code = "def f(x):\n    return []\n"
    report = pool.run(code, ["assert f(1) == [] or f(1)[0] == 2"], limits=FAST)
    assert report.results[0].outcome == "passed"


def test_dates_and_decimals_cross_as_data(pool: KernelPool) -> None:
    code = (
        "import datetime\nfrom decimal import Decimal\n"
        "def parse(s):\n    d, m, y = map(int, s.split('/'))\n    return datetime.date(y, m, d)\n"
        "def price(s):\n    return Decimal(s) * 2\n"
    )
    tests = [
        "import datetime\nassert parse('05/03/2024') == datetime.date(2024, 3, 5)",
        "from decimal import Decimal\nassert price('0.55') == Decimal('1.10')",
        "import datetime\nassert parse('05/03/2024') == datetime.date(2024, 5, 3)",
    ]
    outcomes = [r.outcome for r in pool.run(code, tests, limits=FAST).results]
    assert outcomes == ["passed", "passed", "failed"]


def test_a_builtin_name_the_candidate_defines_is_the_candidates(pool: KernelPool) -> None:
    """As in Python: a spec's ``round`` of its own is called, not the host's builtin; a module
    imported under its usual name is no shadow (the host still judges ``math.isclose``)."""
    code = (
        "import math\n"
        "from decimal import Decimal, ROUND_HALF_UP\n"
        "def round(x):\n"
        "    return int(Decimal(str(x)).quantize(Decimal('1'), rounding=ROUND_HALF_UP))\n"
    )
    tests = ["assert round(2.5) == 3", "assert math.isclose(round(0.5), 1.0)"]
    outcomes = [r.outcome for r in pool.run(code, tests, limits=FAST).results]
    assert outcomes == ["passed", "passed"]  # the builtin would give 2 and 0
