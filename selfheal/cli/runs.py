"""``selfheal runs``: list, show, fork and resume the runs kept in the run logs."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any, get_args

from selfheal.approval import Approve, Edit, Reject
from selfheal.cli.heal import Progress, ask_here, evidence_line, finish, terminal_approver
from selfheal.cli.session import session_of
from selfheal.errors import ConfigError, SelfHealError
from selfheal.graph.checkpoint import find_run, list_runs, read_states
from selfheal.graph.runner import Run
from selfheal.inputs import check_output_path, check_python, read_text_file
from selfheal.result import HealResult
from selfheal.state import Decision, Status


def cmd_runs(args: argparse.Namespace) -> int:
    if args.runs_cmd == "list":
        return _runs_list(args)
    path = find_run(args.id)
    if args.runs_cmd == "show":
        return _runs_show(path, args)
    # every file is read and checked before the run is loaded (no model, no kernel yet)
    if args.out:
        check_output_path(args.out, "--out")
    code_file = getattr(args, "code_file", None)
    code = (
        check_python(read_text_file(code_file, "--code-file"), "--code-file") if code_file else None
    )
    decision: Decision | None = None
    if args.runs_cmd == "resume":
        if args.approve:
            decision = Approve()
        elif args.reject is not None:
            decision = Reject(args.reject)
        elif args.edit:
            decision = Edit(check_python(read_text_file(args.edit, "--edit"), "--edit"))
    session = session_of(args)
    progress = Progress(sys.stderr)
    # on a terminal, the run's questions are asked here too (never under full_auto)
    asker = (lambda q, s: ask_here(q, s, progress)) if sys.stdin.isatty() else None
    run = Run.load(path, provider=args.provider, sink=progress, asker=asker)
    session.run = run
    approver = terminal_approver if sys.stdin.isatty() else None
    if args.runs_cmd == "fork":
        child = run.fork(args.at, lessons=args.lesson or None, code=code, model=args.model)
        session.run = child
        print(
            f"forked {run.state.run_id} @ iteration {args.at} -> {child.state.run_id}",
            file=sys.stderr,
        )
        return finish(child.run(approver), args)
    result = run.resume(decision, approver) if decision else run.run(approver)
    return finish(result, args)


def since_time(text: str, *, now: float | None = None) -> float:
    """The Unix time ``--since`` names: an ISO date or date and time (local time), or an age
    such as ``30m``, ``6h``, ``2d`` before ``now``."""
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    if text[:-1].isdigit() and text[-1:] in units:
        return (time.time() if now is None else now) - int(text[:-1]) * units[text[-1]]
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ConfigError(
            f"--since {text!r}: give a date (2026-11-26), a date and time (2026-11-26T08:30) "
            "or an age (30m, 6h, 2d)."
        ) from None


def _runs_list(args: argparse.Namespace) -> int:
    """The runs, oldest first, filtered by ``--status`` and ``--since``; a log that cannot be
    read is skipped and named (with ``--json``: under ``skipped``)."""
    paths = list_runs()
    since = since_time(args.since) if args.since else None
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for p in paths:
        try:
            s = read_states(p)[-1]
        except SelfHealError as exc:
            skipped.append(f"{p.name}: {exc}")
            continue
        if (args.status and s.status not in args.status) or (
            since is not None and s.started_at < since
        ):
            continue
        when = datetime.datetime.fromtimestamp(s.started_at).isoformat(timespec="seconds")
        rows.append(
            {
                "run_id": s.run_id,
                "status": s.status,
                "iterations": s.iteration,
                "started_at": when,
                "spec": s.spec.text,
                "parent": s.parent.model_dump(exclude={"changes"}) if s.parent else None,
                "path": str(p),
            }
        )
    if args.json:
        print(json.dumps({"runs": rows, "skipped": skipped, "exit_code": 0}))
        return 0
    if not rows:
        print("no runs yet" if not paths else "no run matches")
    for row in rows:
        parent = row["parent"]
        fork = f"  (fork of {parent['run_id']} @ {parent['at_iteration']})" if parent else ""
        spec = " ".join(row["spec"].split())[:50]
        print(f"{row['run_id']}  {row['status']:<17} it={row['iterations']}  {spec}{fork}")
    if skipped:
        print(
            f"selfheal: skipped {len(skipped)} unreadable run log(s) in {paths[0].parent}:\n"
            + "\n".join(f"  {line}" for line in skipped),
            file=sys.stderr,
        )
    return 0


def _runs_show(path: Path, args: argparse.Namespace) -> int:
    states = read_states(path)
    result = HealResult.from_state(states[-1], path=path)
    session_of(args).result = result
    if args.json:
        print(json.dumps({**result.to_dict(), "exit_code": 0}))
        return 0
    if args.calls:
        print(result.transcript_text())
        return 0
    print(f"run {result.run_id}  ({len(states)} checkpoints)  {path}")
    print(f"status {result.status}, {result.iterations} iteration(s)\n")
    print(result.timeline_text())
    if result.remembered:
        print("\nremembered from earlier runs:\n" + result.remembered_text())
    print("\ntests:\n" + result.tests_text())
    if result.candidates:
        print("\ncandidates:\n" + result.candidates_text())
    print("\n" + evidence_line(result))
    if result.error:
        print(f"\nerror: {result.error}")
    if result.pending_text():
        print("\n" + result.pending_text())
        print(
            f"\nDecide with: selfheal runs resume {result.run_id} --approve "
            "(or --reject REASON, --edit FILE)"
        )
    elif result.code:
        print("\n" + result.code.rstrip())
    return 0


RUN_STATUSES = get_args(Status)
"""The statuses ``runs list --status`` filters by."""
