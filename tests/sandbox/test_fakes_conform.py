"""The executor fake conforms: ``InProcessExecutor`` (tests/notebook/nb_fakes.py), which the
view and magic tests run the mock's scripted candidates on, gives the report the real sandbox
gives for the same candidate and tests: the same test ids (``t0``...), the comparison rewrite
(a candidate object is not equal to a plain value), timeouts, failed vs error, load errors,
CallTests and probes."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox.types import (
    CallTest,
    ExecutionReport,
    Executor,
    ProbeCall,
    SandboxTest,
)

from .conftest import FAST


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_conform_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NB_FAKES = _load(Path(__file__).resolve().parents[1] / "notebook" / "nb_fakes.py")

RUNAWAY = "def f(x):\n    while True:\n        x += 1\n"
FOOLS_EQ = (
    "class Anything:\n"
    "    def __eq__(self, other):\n"
    "        return True\n"
    "    __hash__ = None\n"
    "def f(x):\n"
    "    return Anything()\n"
)
GOOD = "def f(x, scale=1):\n    return (x + 1) * scale\n"

CASES: dict[str, tuple[str, list[str | SandboxTest]]] = {
    "numbered-from-t0": (GOOD, ["assert f(1) == 2", "assert f(2) == 4", "assert f(3) == 4"]),
    "comparison-rewrite": (FOOLS_EQ, ["assert f(1) == 2", "assert not (f(1) != 2)"]),
    "failed-vs-error": (GOOD, ["assert f(0) == 1", "assert 1 / 0", "assert f('a') == 1"]),
    "runaway-is-stopped": (RUNAWAY, ["assert f(1) == 2", "assert 1 == 1"]),
    "load-error": ("def f(x) return x\n", ["assert f(1) == 1"]),
    "load-runaway": ("while True:\n    pass\n", ["assert True"]),
    "call-tests": (
        GOOD,
        [
            CallTest(id="ok", function="f", args=(3,), kwargs={"scale": 2}, expected=8),
            CallTest(id="bad", function="f", args=(3,), expected=5),
            CallTest(id="missing", function="g", expected=None),
        ],
    ),
    "probes": (GOOD, [ProbeCall(id="p0", expr="f(2)"), ProbeCall(id="p1", expr="f(None)")]),
    "call-opaque": (FOOLS_EQ, [CallTest(id="c", function="f", args=(1,), expected=2)]),
}


def _facts(report: ExecutionReport) -> dict[str, Any]:
    """What the two executors must agree on (not timings, tracebacks or output)."""
    return {
        "load": (report.load.ok, report.load.outcome, report.load.exc_type),
        "results": [(r.test_id, r.outcome, r.exc_type, r.value) for r in report.results],
    }


@pytest.mark.parametrize("case", list(CASES))
def test_the_fake_reports_what_the_sandbox_reports(pool: KernelPool, case: str) -> None:
    code, tests = CASES[case]
    real = pool.run(code, tests, limits=FAST)
    fake = NB_FAKES.InProcessExecutor().run(code, tests, limits=FAST)
    assert _facts(fake) == _facts(real)
    if case == "numbered-from-t0":
        assert [r.test_id for r in real.results] == ["t0", "t1", "t2"]
    if case == "comparison-rewrite":
        assert [r.outcome for r in real.results] == ["failed", "failed"]
    if case == "runaway-is-stopped":
        assert [r.outcome for r in real.results] == ["timeout", "passed"]


def test_the_fake_refuses_what_the_sandbox_refuses(pool: KernelPool) -> None:
    fake = NB_FAKES.InProcessExecutor()
    for executor in (pool, fake):
        with pytest.raises(ConfigError, match="unique"):
            executor.run(GOOD, [CallTest(id="x", function="f"), CallTest(id="x", function="f")])
        with pytest.raises(ConfigError, match="positive"):
            executor.run(GOOD, ["assert True"], timeout=0)


def test_the_fake_takes_the_per_call_timeout(pool: KernelPool) -> None:
    limits = FAST.model_copy(update={"test_timeout": 30.0})
    fake = NB_FAKES.InProcessExecutor(limits)
    report = fake.run(RUNAWAY, ["assert f(1) == 2"], timeout=0.5)
    assert report.results[0].outcome == "timeout"
    assert "0.5s" in report.results[0].message


TESTS = Path(__file__).resolve().parents[1]
EXECUTOR_FAKES = {
    "InProcessExecutor": ("notebook/nb_fakes.py", "InProcessExecutor"),
    "_OneByOne": ("sandbox/test_batch.py", "_OneByOne"),
    "_RefusingExecutor": ("evaluation/test_scoring.py", "_RefusingExecutor"),
}
"""Every class of the suite that stands in for an ``Executor``."""


@pytest.mark.parametrize("fake", list(EXECUTOR_FAKES))
@pytest.mark.parametrize("name", ["arun", "arun_snippet"])
def test_every_executor_fake_has_the_protocol_signature(fake: str, name: str) -> None:
    path, cls = EXECUTOR_FAKES[fake]
    fake_cls = getattr(_load(TESTS / path), cls)
    assert isinstance(fake_cls(), Executor)
    assert inspect.iscoroutinefunction(getattr(fake_cls, name))  # the protocol is async
    protocol = inspect.signature(getattr(Executor, name))
    mine = inspect.signature(getattr(fake_cls, name))
    assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == [
        (p.name, p.kind, p.default) for p in protocol.parameters.values()
    ]


def test_the_fake_snippet_stops_a_runaway_and_reports_errors() -> None:
    fake = NB_FAKES.InProcessExecutor(Limits(test_timeout=0.5, load_timeout=1.0))
    assert asyncio.run(fake.arun_snippet("f(1)", setup=RUNAWAY)).outcome == "timeout"
    broken = asyncio.run(fake.arun_snippet("f(1)", setup="def f(x):\n    return 1 / 0\n"))
    assert (broken.outcome, broken.exc_type) == ("error", "ZeroDivisionError")
