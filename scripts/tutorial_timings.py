"""The real model's timings that tutorials 01 and 04 quote: one ``heal`` of the quickstart's
spec, and the ``%selfheal`` of tutorial 04 in a real IPython shell, each timed, with the local
model (``python scripts/tutorial_timings.py``; it starts llama-server; memory off, runs in a
temporary folder)."""

from __future__ import annotations

import os
import tempfile
import time

os.environ["SELFHEAL_RUNS_DIR"] = tempfile.mkdtemp()

import selfheal  # after the runs folder is set
from selfheal.demo import DEMO_SPEC

MAGIC = (
    "%selfheal raise ValueError on an empty list; for an even count average the two middle "
    "values: median([4, 1, 3, 2]) -> 2.5"
)


def quickstart() -> None:
    t = time.monotonic()
    r = selfheal.heal(DEMO_SPEC, provider="local", config=selfheal.HealConfig(memory=False))
    print(f"01 quickstart: {time.monotonic() - t:.1f} s, {r.status}, {r.iterations} round(s)")
    print(r.timeline_text())


def magic() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from selfheal.magics import defaults

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "selfheal")

    def cell(source: str) -> None:
        sh.run_cell(source, store_history=True)  # %selfheal reads the cells from history

    cell("%selfheal_config model=local memory=off")
    cell("def median(values):\n    ordered = sorted(values)\n    return ordered[len(ordered) // 2]")
    cell("median([])")
    t = time.monotonic()
    cell(MAGIC)
    r = defaults(sh).last
    print(f"04 %selfheal: {time.monotonic() - t:.1f} s, {r.status}, {r.iterations} round(s)")
    print(r.timeline_text())


if __name__ == "__main__":
    quickstart()
    magic()
