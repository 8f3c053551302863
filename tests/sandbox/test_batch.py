"""Batches of runs (``run_many``), async-first twins (``selfheal._sync``), and the value
codec the host and the kernel share (``_wire.py``), checked through both sides."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from selfheal._sync import run_sync, sync_twin
from selfheal.kernel_sandbox import (
    CallTest,
    ExecutionReport,
    KernelPool,
    ProbeCall,
    SandboxTest,
    arun_many,
    run_many,
)
from selfheal.kernel_sandbox._wire import decode_value, encode_value

VALUES: list[Any] = [
    None,
    True,
    0,
    -(10**40),
    2.5,
    -0.0,
    math.inf,
    complex(1, -2),
    "é\u2603\udcff",
    b"\x00b",
    bytearray(b"ba"),
    range(1, 9, 2),
    [1, [2.5, "x"]],
    (1, (2,), ()),
    {"a": {1, 2}, (1, 2): frozenset({3}), 4: [None]},
]


TYPES_OF = """
def types_of(v):
    # the exact type of every part of v, as names (compared across the two sides)
    t = type(v).__name__
    if isinstance(v, dict):
        return (t, sorted((repr(types_of(k)), repr(types_of(x))) for k, x in v.items()))
    if isinstance(v, (list, tuple, set, frozenset)):
        return (t, sorted(repr(types_of(x)) for x in v))
    return t
"""
_ns: dict[str, Any] = {}
exec(TYPES_OF, _ns)
_types = _ns["types_of"]


def test_codec_agrees_on_both_sides(pool: KernelPool) -> None:
    """Each value goes host encode -> kernel decode -> (the candidate returns it) -> kernel
    encode -> host decode, and must come back equal, with the same exact types; the kernel
    also reports the types it decoded."""
    code = "def ident(x):\n    return x\n" + TYPES_OF
    tests: list[SandboxTest] = []
    for i, v in enumerate(VALUES):
        tests.append(CallTest(id=f"same{i}", function="ident", args=(v,), expected=v))
        tests.append(CallTest(id=f"types{i}", function="types_of", args=(v,), expected=_types(v)))
    report = pool.run(code, tests)
    assert report.passed, [r for r in report.results if not r.passed]
    for v in VALUES:  # and the host alone
        back = decode_value(encode_value(v))
        assert back == v or (v != v and back != back)
        assert _types(back) == _types(v)


def test_run_many_keeps_order_and_runs_in_parallel(pool: KernelPool) -> None:
    items: list[tuple[str, Sequence[str | SandboxTest]]] = [
        (f"def f():\n    return {i}\n", [f"assert f() == {i}", ProbeCall(id="p", expr="f()")])
        for i in range(5)
    ]
    reports = pool.run_many(items)
    assert [r.passed for r in reports] == [True] * 5
    assert [r.results[1].value for r in reports] == [str(i) for i in range(5)]
    assert [r.passed for r in run_many(pool, items[:2])] == [True, True]


async def test_arun_many(pool: KernelPool) -> None:
    items: list[tuple[str, Sequence[str | SandboxTest]]] = [
        ("def f():\n    return 1\n", ["assert f() == 1"]),
        ("def f():\n    return 2\n", ["assert f() == 1"]),
    ]
    reports = await pool.arun_many(items)
    assert [r.passed for r in reports] == [True, False]
    assert [r.passed for r in await arun_many(pool, items)] == [True, False]


class _OneByOne:
    """An executor with only the Protocol's two methods."""

    def __init__(self) -> None:
        self.calls = 0

    async def arun(self, code: str, tests: Any, *, timeout: Any = None, limits: Any = None) -> Any:
        self.calls += 1
        return ExecutionReport.model_validate({"load": {"ok": True}})

    async def arun_snippet(
        self, code: str, *, setup: str = "", timeout: Any = None, limits: Any = None
    ) -> Any:
        raise NotImplementedError


def test_helper_falls_back_to_run() -> None:
    ex = _OneByOne()
    assert len(run_many(ex, [("x = 1", []), ("x = 2", [])])) == 2
    assert ex.calls == 2
    assert len(asyncio.run(arun_many(ex, [("x = 1", [])]))) == 1


class _Thing:
    async def adouble(self, x: int) -> int:
        """Twice ``x``."""
        await asyncio.sleep(0)
        return 2 * x

    double = sync_twin(adouble)

    async def aboom(self) -> None:
        raise ValueError("boom")

    boom = sync_twin(aboom)

    @classmethod
    async def amake(cls, x: int) -> tuple[type[_Thing], int]:
        """A thing's class and ``x``."""
        await asyncio.sleep(0)
        return cls, x

    make = classmethod(sync_twin(amake))


class _Other(_Thing):
    pass


def test_a_class_methods_twin_gets_its_class() -> None:
    assert _Other.make(3) == (_Other, 3) and _Thing().make(1) == (_Thing, 1)
    assert _Thing.make.__name__ == "make" and "class and" in (_Thing.make.__doc__ or "")


def test_sync_twin_everywhere() -> None:
    t = _Thing()
    assert t.double(21) == 42
    assert _Thing.double.__name__ == "double" and "Twice" in (_Thing.double.__doc__ or "")
    with pytest.raises(ValueError, match="boom"):
        t.boom()
    out: list[int] = []
    threads = [threading.Thread(target=lambda i=i: out.append(t.double(i))) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(out) == [0, 2, 4, 6]

    async def inside_a_loop() -> int:
        return t.double(5)  # a notebook cell: a loop runs in this thread

    assert asyncio.run(inside_a_loop()) == 10

    async def nested() -> int:
        return t.double(4)

    # a sync twin called on the process loop itself would wait for itself: a clear error
    with pytest.raises(RuntimeError, match="await its async twin"):
        run_sync(nested())
