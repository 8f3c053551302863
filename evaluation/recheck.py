"""Check the honesty of recorded runs again, from the messages their timelines kept.

``python -m evaluation.recheck RESULTS_DIR`` prints, for every record whose leaks change,
what was recorded and what the current check (``evaluation.honesty``) finds; ``--write``
stores the new reports in ``results.jsonl`` (the old file kept beside it as
``results.jsonl.orig``), after which ``run_benchmark --report-only`` rebuilds the reports.
Use it when the check itself is corrected, never while a run appends to the same folder.
A record whose timeline kept no messages (``transcripts`` off) cannot be checked again and
keeps its report.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence

from evaluation.honesty import HonestyReport, check_calls
from evaluation.recording import RecordedCall
from evaluation.records import TaskRecord
from evaluation.results_file import folder_command, reporting_errors, results_in
from evaluation.suites import Task, get_suite
from selfheal.llm.base import Completion, Message

__all__ = ["recheck", "timeline_calls"]


def timeline_calls(record: TaskRecord) -> list[RecordedCall] | None:
    """The record's model calls as its timeline kept them (messages sent, reply), in order;
    None when a call's messages were not kept."""
    calls: list[RecordedCall] = []
    for event in record.timeline:
        if event.get("kind") != "llm":
            continue
        messages = event.get("messages") or ()
        if not messages:
            return None
        calls.append(
            RecordedCall(
                messages=tuple(
                    Message(role=m["role"], content=m.get("content") or "") for m in messages
                ),
                completion=Completion(text=event.get("reply") or ""),
            )
        )
    return calls


def recheck(
    records: Sequence[TaskRecord], tasks: dict[str, Task]
) -> list[tuple[TaskRecord, HonestyReport | None]]:
    """Each record with the honesty report the current check gives it (None: not checkable)."""
    out: list[tuple[TaskRecord, HonestyReport | None]] = []
    for record in records:
        calls = timeline_calls(record)
        task = tasks.get(record.task_id)
        out.append((record, None if calls is None or task is None else check_calls(task, calls)))
    return out


@reporting_errors
def main(argv: Sequence[str] | None = None) -> int:
    ap = folder_command("evaluation.recheck", __doc__)
    ap.add_argument("--write", action="store_true", help="store the new reports")
    args = ap.parse_args(argv)
    results = results_in(args.results)
    path = results.path
    records = results.read()
    suites = {r.suite for r in records}
    tasks = {t.id: t for s in suites for t in get_suite(s).tasks()}
    checked = recheck(records, tasks)
    changed = unchecked = 0
    lines = []
    for record, report in checked:
        if report is None:
            unchecked += 1
            lines.append(json.dumps(record.model_dump(mode="json")))
            continue
        before = record.honesty.leaks if record.honesty else ()
        if before != report.leaks:
            changed += 1
            print(f"{record.task_id} {record.mode}: leaks {len(before)} -> {len(report.leaks)}")
            for leak in report.leaks:
                print(f"    still a leak: {leak}")
        lines.append(
            json.dumps(record.model_copy(update={"honesty": report}).model_dump(mode="json"))
        )
    leaks = sum(len(r.leaks) for _, r in checked if r is not None)
    print(
        f"{len(records)} records, {changed} changed, {unchecked} not checkable "
        f"(no messages kept); leaks now: {leaks}"
    )
    if args.write and changed:
        shutil.copyfile(path, path.with_name("results.jsonl.orig"))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {path} (the old one: {path.with_name('results.jsonl.orig')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
