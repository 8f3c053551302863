"""The pool is async at its core: its kernel I/O runs on selfheal's process loop whichever
loop or thread the caller runs on, and a cancelled caller's run is cancelled there: a run
still waiting for a kernel never starts, and every kernel is idle again."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.kernel import SandboxKernel
from tests.sandbox.conftest import FAST

DOUBLE = "def f(x):\n    return 2 * x\n"
SLEEPER = "import time\ndef nap():\n    time.sleep(60)\n"


def test_kernel_io_runs_on_the_process_loop(
    pool: KernelPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: set[str] = set()
    real = SandboxKernel.next_event

    def spy(self: SandboxKernel, *args: Any) -> Any:
        seen.add(threading.current_thread().name)
        return real(self, *args)

    monkeypatch.setattr(SandboxKernel, "next_event", spy)
    items = [(DOUBLE, [f"assert f({i}) == {2 * i}"]) for i in range(4)]
    # two foreign callers at once: a loop in another thread and the blocking twin here
    other: list[Any] = []
    t = threading.Thread(target=lambda: other.extend(asyncio.run(pool.arun_many(items))))
    t.start()
    mine = pool.run_many(items)
    t.join(60)
    assert len(other) == 4 and all(r.passed for r in [*other, *mine])
    assert seen == {"selfheal-loop"}, seen


async def test_cancelled_runs_that_wait_for_a_kernel_never_start() -> None:
    with KernelPool(size=2, limits=FAST) as pool:
        assert await asyncio.to_thread(pool.wait_ready, 60)
        kernels = list(pool._ready)
        served = lambda: sum(k.uses for k in kernels)  # noqa: E731
        before = served()
        runs = [asyncio.create_task(pool.arun(SLEEPER, ["nap()"], timeout=60)) for _ in range(8)]
        for _ in range(300):  # two run, six wait for a kernel
            if served() - before == 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the two sleepers are in their test
        for r in runs:
            r.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        assert all(r.cancelled() for r in runs)
        # every kernel is idle again long before the 60 s naps end
        assert await asyncio.to_thread(pool.wait_ready, 10)
        assert served() - before == 2  # the six that waited never reached a kernel
        assert (await pool.arun(DOUBLE, ["assert f(2) == 4"])).passed
