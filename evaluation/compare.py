"""Two runs of the same modes side by side: how far one run's lead is from the noise between runs.

    PYTHONPATH=. python -m evaluation.compare evaluation/results/humaneval164-r3 evaluation/results/humaneval164-r4 --modes heal,sample-5

For each mode, the tasks whose result changed between the two folders (gained, lost: the noise
of repeating a run); for the first two modes, the tasks only one of them passes, in each run
and over both (how large the lead of one mode over the other is, and how steady). Only tasks
both folders hold for every mode named are compared. A mode renamed between the two runs is
named as ``FIRST=SECOND`` (``--modes heal=heal-r4,sample-5``: the first folder's ``heal``
against the second's ``heal-r4``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from evaluation.results_file import reporting_errors, results_in

__all__ = ["compare_runs"]

Passed = Mapping[tuple[str, str], bool]
"""(task id, mode) -> passed."""


def _natural(task: str) -> tuple[str, int, str]:
    """``HumanEval/9`` before ``HumanEval/10``."""
    head, _, tail = task.rpartition("/")
    return (head, int(tail), "") if tail.isdigit() else (head, -1, tail)


def _short(ids: Sequence[str]) -> str:
    return ", ".join("/" + t.rsplit("/", 1)[-1] for t in ids) or "none"


def compare_runs(runs: Sequence[tuple[str, Passed]], modes: Sequence[str]) -> str:
    """The markdown comparison of named runs (see the module docs)."""
    every = {t for _, p in runs for (t, _m) in p}
    tasks = sorted(
        (t for t in every if all((t, m) in p for _, p in runs for m in modes)), key=_natural
    )
    (name_a, a), (name_b, b) = runs[0], runs[-1]
    lines = [f"{len(tasks)} tasks in both {name_a} and {name_b}", ""]
    for m in modes:
        gained = [t for t in tasks if not a[(t, m)] and b[(t, m)]]
        lost = [t for t in tasks if a[(t, m)] and not b[(t, m)]]
        lines.append(
            f"- `{m}`: {sum(a[(t, m)] for t in tasks)} -> {sum(b[(t, m)] for t in tasks)}; "
            f"changed on {len(gained) + len(lost)}: gained {len(gained)} ({_short(gained)}), "
            f"lost {len(lost)} ({_short(lost)})"
        )
    if len(modes) >= 2:
        x, y = modes[0], modes[1]
        lines.append("")
        only_x = only_y = 0
        for name, p in runs:
            xs = [t for t in tasks if p[(t, x)] and not p[(t, y)]]
            ys = [t for t in tasks if p[(t, y)] and not p[(t, x)]]
            only_x, only_y = only_x + len(xs), only_y + len(ys)
            lines.append(
                f"- {name}: only `{x}` passes {len(xs)} ({_short(xs)}); "
                f"only `{y}` passes {len(ys)} ({_short(ys)})"
            )
        lines.append(f"- over the runs: only `{x}` {only_x}, only `{y}` {only_y}")
    return "\n".join(lines)


@reporting_errors
def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m evaluation.compare", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("runs", type=Path, nargs=2, help="two results folders")
    ap.add_argument(
        "--modes",
        default="heal,sample-5",
        help="comma-separated modes; FIRST=SECOND for a mode named differently in the second run",
    )
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not modes:
        print("error: --modes names no mode.", file=sys.stderr)
        return 2
    runs: list[tuple[str, Passed]] = []
    for side, folder in enumerate(args.runs):
        # a label's mode in this folder: FIRST=SECOND names the mode differently in each
        here = {label: label.split("=")[side] if "=" in label else label for label in modes}
        latest = {key: r.credited for key, r in results_in(folder).latest().items()}
        passed = {
            (t, label): ok for label in modes for (t, m), ok in latest.items() if m == here[label]
        }
        runs.append((folder.name, passed))
    print(compare_runs(runs, modes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
