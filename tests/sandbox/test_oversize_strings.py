"""Every string that comes from the candidate is capped before it is stored (issue 43,
item 4): in the kernel before it is sent, and on the host when it is read.

Written as an attacker who read the source would: an exception class with a
30-million-character name (it reached the host's report whole, +372 MiB), a metaclass whose
``__name__`` is not a string, a message that is a ``str`` subclass with its own ``__repr__``
and ``__len__``, a returned object whose class has a huge qualified name, a returned value
too large to send, and a signed line forged with the key.
"""

from __future__ import annotations

from selfheal.kernel_sandbox import CallTest, KernelPool, Limits
from selfheal.kernel_sandbox._harness.capture import NAME_CAP, TRACEBACK_CAP, clip
from selfheal.kernel_sandbox._run import _load_from, _result_from
from selfheal.kernel_sandbox.types import AssertTest

HUGE = 30_000_000

LONG_NAME = f"""
Huge = type("E" * {HUGE}, (Exception,), {{}})

def f():
    raise Huge("boom")
"""

LYING_NAME = """
class Meta(type):
    __name__ = property(lambda cls: 12345)  # type(e).__name__ asks the metaclass

class Odd(Exception, metaclass=Meta):
    pass

def f():
    raise Odd("odd")
"""

SLY_MESSAGE = f"""
class Sly(str):
    def __repr__(self):
        return "R" * {HUGE}
    def __len__(self):
        return 1

class Loud(Exception):
    def __str__(self):
        return Sly("short")

def f():
    raise Loud()
"""

LONG_QUALNAME = f"""
Thing = type("T" * {HUGE}, (), {{}})

def f():
    return Thing()
"""

BIG_VALUE = """
def f():
    return list(range(3_000_000))  # about 40 MB as sent
"""

LIMITS = Limits(test_timeout=20.0, load_timeout=20.0, run_timeout=60.0)


def _capped(name: str | None) -> None:
    assert name is not None
    assert len(name) <= NAME_CAP and f"<cut: {HUGE} characters>" in name


def test_an_exception_class_with_a_huge_name_comes_back_capped(pool: KernelPool) -> None:
    r = pool.run(LONG_NAME, ["f()"], limits=LIMITS).results[0]
    assert r.outcome == "error"
    _capped(r.exc_type)
    assert r.exc_type is not None and r.exc_type.startswith("EEEE")
    assert len(r.traceback) <= TRACEBACK_CAP and r.traceback.endswith("boom")


def test_it_is_capped_when_raised_at_load(pool: KernelPool) -> None:
    report = pool.run(LONG_NAME + "f()\n", ["assert True"], limits=LIMITS)
    assert not report.load.ok
    _capped(report.load.exc_type)
    assert len(report.load.traceback) <= TRACEBACK_CAP
    assert len(report.results[0].message) < 1000  # "not run: the candidate did not load"


def test_a_metaclass_name_is_not_believed(pool: KernelPool) -> None:
    r = pool.run(LYING_NAME, ["f()"], limits=LIMITS).results[0]
    assert r.outcome == "error" and r.exc_type == "Odd" and r.message == "odd"


def test_a_message_of_a_str_subclass_is_read_as_plain_text(pool: KernelPool) -> None:
    r = pool.run(SLY_MESSAGE, ["f()"], limits=LIMITS).results[0]
    assert r.outcome == "error" and r.exc_type == "Loud"
    assert r.message == "short" and "RRRR" not in r.traceback


def test_a_returned_object_of_a_huge_class_name_is_described_briefly(pool: KernelPool) -> None:
    test = CallTest(id="c", function="f", expected=1)
    r = pool.run(LONG_QUALNAME, [test], limits=LIMITS).results[0]
    assert r.outcome == "failed"
    assert len(r.message) < 1000 and f"<cut: {HUGE} characters>" in r.message


def test_a_value_too_large_to_send_is_cut_in_the_kernel(pool: KernelPool) -> None:
    test = CallTest(id="c", function="f", expected=[])
    tests = [test, AssertTest(id="a", code="assert f()[2] == 2")]
    report = pool.run(BIG_VALUE, tests, limits=LIMITS)
    big, after = report.results
    # the codec stops at 1,000,000 parts: the value is "not a plain value", never 40 MB sent
    assert big.outcome == "failed" and "1000000 parts" in big.message
    assert after.outcome == "passed"  # the run goes on


def test_a_result_too_large_to_send_is_an_error_that_says_so(pool: KernelPool) -> None:
    code = "def f():\n    return 1\n"
    report = pool.run(
        code, ["x = f()\nfor _ in [1]:\n    raise ValueError('v' * 40_000_000)"], limits=LIMITS
    )
    r = report.results[0]
    assert r.outcome == "error" and len(r.message) < 20_000


def test_the_host_cuts_what_a_forged_line_carries() -> None:
    huge = "X" * 5_000_000
    msg = ("result", 0, "error", huge, huge, huge, huge, huge, False, 0.1, ("canon", huge))
    test = AssertTest(id="t", code="pass")
    r, _ = _result_from(msg, test, 1000)
    assert r.exc_type is not None and len(r.exc_type) <= NAME_CAP
    assert max(len(r.message), len(r.traceback)) <= 16000
    assert len(r.stdout) <= 1000 and len(r.stderr) <= 1000
    load = _load_from(("load", False, "error", huge, huge, 3, huge, huge, False, 0.1), 1000)
    assert load.exc_type is not None and len(load.exc_type) <= NAME_CAP
    assert len(load.message) <= 16000 and len(load.stdout) <= 1000


def test_clip_marks_what_it_cuts_and_changes_nothing_twice() -> None:
    s = "a" * 100 + "b" * 100
    once = clip(s, 80, 20)
    assert len(once) <= 80 and once.startswith("aaa") and once.endswith("b" * 20)
    assert "<cut: 200 characters>" in once
    assert clip(once, 80, 20) == once
    assert clip("short", 80) == "short"

    class Sly(str):
        def __repr__(self) -> str:
            return "R" * 1000

    plain = clip(Sly("hi"), 80)
    assert type(plain) is str and plain == "hi"
