"""``selfheal memory list | show ID | forget ID... | clear``: the memory from the terminal.

Self-contained: ``selfheal.cli`` adds this parser (``add_parser``) and its handler comes with
it. A mistake (an unknown id, a memory that cannot be opened) raises a ``ConfigError`` that the
CLI prints as one line with exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from selfheal.config import HealConfig, memory_path_for
from selfheal.errors import ConfigError
from selfheal.memory.store import Memory, MemoryEntry, MemoryLesson


def add_parser(sub: Any) -> None:
    """Add ``memory`` and its subcommands to the CLI's subparsers ``sub``."""
    m = sub.add_parser(
        "memory",
        help="lessons and verified solutions remembered across runs: list, show, forget, clear",
    )
    m.add_argument(
        "--path",
        help="the memory file (default: $SELFHEAL_MEMORY, else memory.sqlite3 in the runs "
        "directory)",
    )
    ms = m.add_subparsers(dest="memory_cmd", required=True, metavar="ACTION")
    ls = ms.add_parser("list", help="every lesson (L3) and verified solution (S2), oldest first")
    ls.add_argument("--json", action="store_true", help="print them as one JSON object")
    show = ms.add_parser("show", help="one lesson or solution in full")
    show.add_argument("id", help="L3 (a lesson) or S2 (a verified solution)")
    show.add_argument("--json", action="store_true", help="print it as one JSON object")
    forget = ms.add_parser("forget", help="remove lessons or solutions (their text is overwritten)")
    forget.add_argument("id", nargs="+", help="L3, S2, ...")
    clear = ms.add_parser("clear", help="remove everything the memory holds")
    clear.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    m.set_defaults(func=run)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _line(e: MemoryEntry) -> str:
    if isinstance(e, MemoryLesson):
        outcome = "verified" if e.verified else "not verified"
        extra = f"used {e.uses}" + (f", led to worse {e.harm}" if e.harm else "")
        what = " ".join(e.text.split())
        return (
            f"{e.id:<5} lesson    {_when(e.created)}  run {e.run_id} ({outcome}; {extra})  {what}"
        )
    spec = " ".join(e.spec.split())
    return f"{e.id:<5} solution  {_when(e.created)}  run {e.run_id}  {e.entry_point or '?'}: {spec}"


def _show(e: MemoryEntry) -> str:
    out = [f"{e.id} · learnt {_when(e.created)} in run {e.run_id}"]
    spec = ["spec:", "  " + e.spec.strip().replace("\n", "\n  ")]
    if isinstance(e, MemoryLesson):
        out += [
            f"lesson ({e.source}): {e.text}",
            f"from a run that ended {'verified' if e.verified else 'not verified'}",
            f"used by {e.uses} run(s); led to a worse result in {e.harm}",
        ]
        if e.failure:
            out.append(f"the failure it came from: {e.failure}")
        return "\n".join(out + spec)
    summary = str(e.evidence.get("summary", ""))
    out += [
        f"verified solution of {e.entry_point or '?'}" + (f": {summary}" if summary else ""),
        *spec,
        "tests it passed:",
        *(f"  {t.strip().splitlines()[0]}" for t in e.tests),
        "code:",
        e.code.rstrip(),
    ]
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """The handler of ``selfheal memory ...``; returns the exit code."""
    path = args.path or memory_path_for(HealConfig())
    memory = Memory(path)
    cmd = args.memory_cmd
    if cmd == "list":
        entries = memory.entries()
        if args.json:
            print(json.dumps([e.model_dump(mode="json") for e in entries]))
            return 0
        lessons = sum(isinstance(e, MemoryLesson) for e in entries)
        print(
            f"memory {memory.path}: {lessons} lesson(s), {len(entries) - lessons} verified "
            f"solution(s), from {memory.runs()} run(s)"
        )
        for e in entries:
            print(_line(e)[:220])
        return 0
    if cmd == "show":
        entry = memory.show(args.id)
        print(entry.model_dump_json() if args.json else _show(entry))
        return 0
    if cmd == "forget":
        entries = [memory.show(i) for i in args.id]  # every id checked before any is removed
        for e in entries:
            memory.forget(e.id)
            print(f"forgot {e.id}")
        return 0
    # clear
    n = len(memory.entries())
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError(
                f"`selfheal memory clear` removes all {n} lesson(s) and solution(s) in "
                f"{memory.path}; run it again with --yes to confirm."
            )
        sys.stderr.write(f"Remove all {n} lesson(s) and solution(s) in {memory.path}? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 0
    removed = memory.clear()
    print(f"removed {removed} lesson(s) and solution(s) from {memory.path}")
    return 0
