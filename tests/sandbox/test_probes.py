"""Probe calls on real kernels: canonical values for comparing candidates, and a candidate
that tampers with the canonicaliser cannot change an honest run or other tests' verdicts."""

from __future__ import annotations

import pytest

from selfheal.kernel_sandbox import AssertTest, KernelPool, ProbeCall

IMPL_A = """
def f(xs, k=1):
    return sorted(xs)[:k]
def mean(xs):
    return sum(xs) / len(xs)
def uniq(xs):
    out = set()
    for x in xs:
        out.add(x)
    return out
def nested():
    return {"b": [1, (2, 3)], "a": {"z": 0.1 + 0.2}}
def boom():
    raise ValueError("no")
"""
IMPL_B = """
import heapq
def f(xs, k=1):
    return heapq.nsmallest(k, xs)
def mean(xs):
    total = 0.0
    for x in reversed(xs):
        total += x
    return total / len(xs)
def uniq(xs):
    return set(reversed(list(xs)))
def nested():
    d = {}
    d["a"] = {"z": 0.3}
    d["b"] = [1, (2, 3)]
    return d
def boom():
    raise ValueError("different message, same type")
"""
PROBES = [
    ProbeCall(id="p_f", expr="f([3, 1, 2], k=2)"),
    ProbeCall(id="p_mean", expr="mean([0.1, 0.2, 0.7, 0.3])"),
    ProbeCall(id="p_sum", expr="0.1 + 0.2 if f([1]) == [1] else 0.3"),
    ProbeCall(id="p_set", expr="uniq([5, 3, 9, 1, 3])"),
    ProbeCall(id="p_nested", expr="nested()"),
    ProbeCall(id="p_raise", expr="boom()"),
]


def _values(report: object) -> dict[str, str | None]:
    return {r.test_id: r.value for r in report.results}  # type: ignore[attr-defined]


def test_two_implementations_give_the_same_values(pool: KernelPool) -> None:
    a = pool.run(IMPL_A, PROBES)
    b = pool.run(IMPL_B, PROBES)
    va, vb = _values(a), _values(b)
    assert va == vb, (va, vb)
    assert va["p_f"] == "[1, 2]"
    assert va["p_set"] == "{1, 3, 5, 9}"
    assert va["p_sum"] == "0.3"
    assert va["p_nested"] == "{'a': {'z': 0.3}, 'b': [1, (2, 3)]}"
    raised = a.result_for("p_raise")
    assert raised is not None and raised.outcome == "error"
    assert raised.exc_type == "ValueError" and raised.value == "raise ValueError"
    assert [r.outcome for r in a.results[:5]] == ["passed"] * 5


def test_probe_values_separate_behaviours(pool: KernelPool) -> None:
    wrong = IMPL_A.replace("[:k]", "[-k:]")
    va = _values(pool.run(IMPL_A, PROBES))
    vw = _values(pool.run(wrong, PROBES))
    assert va["p_f"] != vw["p_f"] and vw["p_f"] == "[2, 3]"
    assert va["p_set"] == vw["p_set"]


def test_probe_timeout_huge_values_objects_and_syntax_errors(pool: KernelPool) -> None:
    code = (
        "import time\n"
        "class Thing:\n    pass\n"
        "def slow():\n    time.sleep(30)\n"
        "def big():\n    return list(range(10**6))\n"
    )
    report = pool.run(
        code,
        [
            ProbeCall(id="slow", expr="slow()"),
            ProbeCall(id="big", expr="big()"),
            ProbeCall(id="obj", expr="Thing()"),
            ProbeCall(id="bad", expr="f("),
            ProbeCall(id="gen", expr="(x * x for x in range(4))"),
            AssertTest(id="after", code="assert big()[-1] == 10**6 - 1"),
        ],
        timeout=0.5,
    )
    slow, big, obj, bad, gen, after = report.results
    assert slow.outcome == "timeout" and slow.value is None
    assert big.outcome == "passed" and big.value is not None
    assert len(big.value) <= 2000 and "sha256" in big.value
    assert obj.value == "<candidate.Thing object>"
    assert bad.outcome == "error" and bad.exc_type == "SyntaxError"
    assert bad.value == "raise SyntaxError"
    assert gen.value == "<iterator [0, 1, 4, 9]>"
    assert after.outcome == "passed" and after.value is None


def test_probe_on_a_candidate_that_does_not_load(pool: KernelPool) -> None:
    report = pool.run("def f(:\n", [ProbeCall(id="p", expr="f()")])
    assert report.results[0].outcome == "error"
    assert report.results[0].exc_type == "CandidateNotLoaded"
    assert report.results[0].value is None


HONEST = """
def f(x):
    return 2 * x
def g():
    return 0.1 + 0.2
def s():
    return {3, 1, 2}
def nested():
    return {"b": [1.5, {"y", "x"}], "a": (None, True)}
class Thing:
    pass
def boom():
    raise KeyError(1)
"""
TAMPER = """
import builtins, hashlib, math, re, sys
builtins.repr = lambda x: "FORGED"
builtins.sorted = lambda xs, **k: ["FORGED"]
builtins.round = lambda *a: 0
builtins.len = lambda x: 0
builtins.isinstance = lambda *a: True
builtins.issubclass = lambda *a: True
builtins.format = lambda *a: "7"
try:
    float.__repr__ = lambda self: "FORGED"
except TypeError:
    pass
re.compile = lambda *a, **k: None
re.sub = lambda *a, **k: "FORGED"
math.isfinite = lambda x: False
hashlib.sha256 = None
class Spy:
    def __repr__(self):
        # walk up into the canonicaliser's frames and replace its functions and builtins
        frame = sys._getframe(1)
        while frame is not None:
            g = frame.f_globals
            if "canonical" in g and "MAX_NODES" in g:
                for k in list(g):
                    if k.startswith("_") and callable(g[k]):
                        g[k] = lambda *a, **k: "FORGED"
                g["canonical"] = lambda *a, **k: "FORGED"
                b = g["__builtins__"]
                b["repr"] = lambda x: "FORGED"
                b["sorted"] = lambda *a, **k: []
            frame = frame.f_back
        return "Spy()"
def spy():
    return Spy()
"""
COMPARED = [
    ProbeCall(id="int", expr="f(21)"),
    ProbeCall(id="float", expr="g()"),
    ProbeCall(id="set", expr="s()"),
    ProbeCall(id="nested", expr="nested()"),
    ProbeCall(id="long", expr="'y' * 5000"),
    ProbeCall(id="obj", expr="Thing()"),
    ProbeCall(id="raise", expr="boom()"),
]
VERDICTS = [
    AssertTest(id="pass", code="assert f(2) == 4\nassert len([1, 2]) == 2"),
    AssertTest(id="fail", code="assert f(2) == 5"),
    AssertTest(id="fail_len", code="assert len(s()) == 0"),
]


def test_tampering_cannot_change_values_or_verdicts(pool: KernelPool) -> None:
    honest = pool.run(HONEST, [*COMPARED, *VERDICTS])
    hostile = pool.run(HONEST + TAMPER, [ProbeCall(id="spy", expr="spy()"), *COMPARED, *VERDICTS])
    assert hostile.load.ok, hostile.load
    want = _values(honest)
    got = _values(hostile)
    got.pop("spy")
    assert got == want
    assert want["float"] == "0.3" and want["set"] == "{1, 2, 3}"
    assert want["raise"] == "raise KeyError"
    assert "FORGED" not in str(got)
    for report in (honest, hostile):
        outcomes = {r.test_id: r.outcome for r in report.results}
        assert (outcomes["pass"], outcomes["fail"], outcomes["fail_len"]) == (
            "passed",
            "failed",
            "failed",
        )
    # and an honest candidate run afterwards is untouched
    assert _values(pool.run(HONEST, [*COMPARED, *VERDICTS])) == want


def test_numpy_values_in_the_kernel(pool: KernelPool) -> None:
    pytest.importorskip("numpy")
    code = (
        "import numpy as np\n"
        "def f():\n    return np.arange(3) * 0.1\n"
        "def g():\n    return np.float64(0.1) + np.float64(0.2)\n"
    )
    plain = "def f():\n    return [0.0, 0.1, 0.2]\ndef g():\n    return 0.3\n"
    probes = [ProbeCall(id="f", expr="f()"), ProbeCall(id="g", expr="g()")]
    assert _values(pool.run(code, probes)) == _values(pool.run(plain, probes))
    assert _values(pool.run(code, probes)) == {"f": "[0, 0.1, 0.2]", "g": "0.3"}


def test_a_probe_built_from_constructors_needs_no_import_in_the_candidate(pool: KernelPool) -> None:
    # the candidate never imports `date` or `Decimal`; the probe's own setup does, in the
    # probe's namespace (a test's call `f(date(2024, 3, 5))` becomes an input to compare on)
    from selfheal.probes import calls_in_test, probe_call

    code = "def weekday(d, price):\n    return (d.isoweekday(), str(price * 2))\n"
    test = "assert weekday(date(2024, 3, 5), Decimal('1.10')) == (2, '2.20')"
    calls = calls_in_test(test, "weekday")
    assert calls == ["weekday(date(2024, 3, 5), Decimal('1.10'))"]
    report = pool.run(code, [probe_call("p1", calls[0])])
    (result,) = report.results
    assert (result.outcome, result.value) == ("passed", "(2, '2.20')")
    # the candidate's own namespace is untouched: a later test still sees no `date`
    report = pool.run(code, [probe_call("p1", calls[0]), AssertTest(id="t", code="date")])
    assert report.results[1].outcome == "error"
