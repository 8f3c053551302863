"""Where a mode's time goes: its runs grouped by the path the loop took, beside another mode's
seconds and passes on the same problems.

    PYTHONPATH=. python -m evaluation.timing evaluation/results/humaneval164-r3 [--mode heal] [--against sample-5]

The paths, read from each record (its candidates, their outcomes on the trusted tests, and
whether a diagnosis ran):

* ``settled``: the greedy answer passes every trusted test and the first small sample
  (``first_sample``) was enough;
* ``topped_up``: the greedy answer passes them, the first answers disagreed, and more first-round
  samples were asked for;
* ``greedy_failed``: the greedy answer fails a trusted test (or there is none), and the first
  round's candidates decided;
* ``repaired``: no candidate passed, and the run went on to the diagnosis and a repair round.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from typing import Literal

from evaluation.records import TaskRecord
from evaluation.results_file import folder_command, reporting_errors, results_in
from selfheal.config import flat_settings

__all__ = ["PATHS", "path_of", "timing_table"]

Path_ = Literal["settled", "topped_up", "greedy_failed", "repaired"]

PATHS: dict[Path_, str] = {
    "settled": "greedy answer passes the examples; the first answers agree, stop",
    "topped_up": "greedy answer passes the examples; they disagree, top-up",
    "greedy_failed": "greedy answer fails the examples (or none); the first round decides",
    "repaired": "no candidate passes: the diagnosis and a repair round",
}
"""Each path and how the table names it."""


def path_of(record: TaskRecord) -> Path_ | None:
    """The path ``record``'s run took; None for a record without candidates."""
    if not record.candidates:
        return None
    if record.diagnoses or any(int(c.get("round") or 1) > 1 for c in record.candidates):
        return "repaired"
    trusted = [t.id for t in record.tests if t.trusted]
    greedy = next((c for c in record.candidates if c.get("origin") == "greedy"), None)
    outcomes = (greedy or {}).get("outcomes") or {}
    if not trusted or not all(outcomes.get(t) == "passed" for t in trusted):
        return "greedy_failed"
    first = int(flat_settings(record.config).get("first_sample") or 1)
    asked = sum(1 for c in record.candidates if c.get("origin") in ("greedy", "sample"))
    return "topped_up" if asked > first else "settled"


def timing_table(records: Sequence[TaskRecord], mode: str, against: str) -> str:
    """The markdown table: per path, problems, mean seconds and passes of both modes."""
    latest = {(r.task_id, r.mode): r for r in records}
    rows = [
        f"| path ({mode}) | problems | {mode} s | `{against}` s | {mode} passed | "
        f"`{against}` passed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for path, label in PATHS.items():
        pairs = [
            (r, latest[(r.task_id, against)])
            for (_, m), r in latest.items()
            if m == mode and (r.task_id, against) in latest and path_of(r) == path
        ]
        if not pairs:
            continue
        mine = statistics.mean(r.wall_time for r, _ in pairs)
        theirs = statistics.mean(o.wall_time for _, o in pairs)
        rows.append(
            f"| {label} | {len(pairs)} | {mine:.1f} | {theirs:.1f} | "
            f"{sum(r.passed for r, _ in pairs)} | {sum(o.passed for _, o in pairs)} |"
        )
    return "\n".join(rows)


@reporting_errors
def main(argv: Sequence[str] | None = None) -> int:
    ap = folder_command("evaluation.timing", __doc__)
    ap.add_argument("--mode", default="heal", help="the mode whose paths are read (heal)")
    ap.add_argument("--against", default="sample-5", help="the mode beside it (sample-5)")
    args = ap.parse_args(argv)
    results = results_in(args.results)
    path = results.path
    records = results.read()
    found = {r.mode for r in records}
    missing = [m for m in (args.mode, args.against) if m not in found]
    if missing:
        print(
            f"error: no {', '.join(missing)} records in {path}; it has: {', '.join(sorted(found))}.",
            file=sys.stderr,
        )
        return 2
    print(timing_table(records, args.mode, args.against))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
