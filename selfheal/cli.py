"""The ``selfheal`` command line.

selfheal heal "SPEC" | --spec-file PATH | -   [--provider P] [--model M] [--max-iterations N]
                     [--autonomy A] [--out FILE] [--json] [--entry-point NAME] [--test ASSERT ...]
selfheal runs list [--json] [--status S] [--since WHEN] | show ID [--calls] | fork ID --at K [...]
              | resume ID [--approve|--reject R|--edit F]
selfheal memory list | show ID | forget ID... | clear [--yes]
selfheal doctor [--no-load]
selfheal install [--dry-run]
selfheal serve [--port N] [--slots N] [--ctx N] [--threads N] [--model GGUF] [--api-key KEY]

Every command runs inside one error boundary (``main``): a mistake exits 2 with a message that
says what to do (``--debug`` or ``SELFHEAL_DEBUG=1`` adds the traceback), and with ``--json``
stdout holds exactly one JSON object whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO, get_args

from selfheal.approval import Approve, Edit, Reject
from selfheal.config import HealConfig
from selfheal.errors import ConfigError, SelfHealError
from selfheal.graph.checkpoint import find_run, list_runs, read_states
from selfheal.graph.runner import Run
from selfheal.inputs import (
    check_output_path,
    check_python,
    read_text_file,
    read_text_stream,
)
from selfheal.memory.command import add_parser as add_memory_parser
from selfheal.request import HealRequest
from selfheal.result import HealResult, proposal_text
from selfheal.state import Decision, Event, HealState, Proposal, Status
from selfheal.usertests import code_spec

EXIT_VERIFIED, EXIT_NOT_VERIFIED, EXIT_ERROR, EXIT_AWAITING = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""stdout was closed early (``| head``): the shell's code for a process ended by SIGPIPE."""

DEBUG_ENV = "SELFHEAL_DEBUG"
"""Set to 1 to print the traceback of every error (the same as ``--debug``)."""

_ICONS = {"end": "✓", "error": "✗", "degraded": "⚠", "decision": "?"}


class Progress:
    """Prints one line per node as the run goes (to stderr, so ``--json`` stays clean)."""

    def __init__(self, stream: TextIO, *, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet

    def __call__(self, e: Event) -> None:
        if self.quiet:
            return
        if e.kind == "end":
            tok = e.prompt_tokens + e.completion_tokens
            model = f"  [{e.model}]" if e.model else ""
            line = f"  ✓ {e.node:<11} {e.duration:6.2f}s {tok:6d} tok  {e.detail}{model}"
        elif e.kind in ("error", "degraded"):
            line = f"  {_ICONS[e.kind]} {e.node:<11} {e.detail}"
        elif e.kind == "tool":  # one of the debugger's tool calls
            line = f"    {e.node:<11} {e.duration:6.2f}s  {e.detail}"
        elif e.kind == "start":
            line = ""
        else:
            return
        if line:
            print(line[:220], file=self.stream, flush=True)


def _model_string(provider: str | None, model: str | None) -> str | None:
    if model and provider and ":" not in model and provider not in ("auto",):
        return f"{provider}:{model}"
    return model or provider


HEAL_OPTIONS: dict[str, str] = {
    "max_iterations": "--max-iterations",
    "candidates": "--candidates",
    "first_sample": "--first-sample",
    "agreement": "--agreement",
    "autonomy": "--autonomy",
    "critic": "--critic",
    "adversarial_tests": "--adversarial",
    "lessons": "--lessons",
    "spec_blind_tests": "--spec-tests",
    "example_tests": "--examples",
    "probes": "--probes",
    "repair": "--repair",
    "diagnosis": "--diagnosis",
    "memory": "--memory",
    "debugger_tool_calls": "--debugger-tool-calls",
    "debugger_steps": "--debugger-steps",
    "token_budget": "--token-budget",
    "time_budget": "--time-budget",
    "test_timeout": "--test-timeout",
    "max_spec_chars": "--max-spec-chars",
}
"""``HealConfig`` field -> the ``heal`` flag that sets it (a flag left out keeps the field's
default, defined once in ``HealConfig``); errors name the flag."""


def default_text(field: str) -> str:
    """``(default X)`` for a ``HealConfig`` field, read from ``HealConfig`` itself so a help
    text cannot drift from the real default: on/off for a switch, none for no limit."""
    value = HealConfig.model_fields[field].default
    if isinstance(value, bool) or value is None:
        shown = {True: "on", False: "off", None: "none"}[value]
    else:
        shown = str(value)
    return f"(default {shown})"


def _config(args: argparse.Namespace) -> HealConfig:
    cfg: dict[str, object] = {}
    for field, flag in HEAL_OPTIONS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            cfg[field] = value
    if isinstance(args.candidates, int) and args.candidates >= 1 and args.first_sample is None:
        cfg["first_sample"] = min(args.candidates, HealConfig().first_sample)
    return HealConfig.model_validate(cfg, context={"names": HEAL_OPTIONS})


def _count_or_auto(value: str) -> int | str:
    """``--candidates``: a number, or ``auto``."""
    if value.strip().lower() == "auto":
        return "auto"
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid int value: {value!r} (a number or auto)"
        ) from None


def terminal_approver(proposal: Proposal, state: HealState) -> Decision:
    """Asks on the terminal: approve, edit in $EDITOR, or reject with a reason."""
    print("\n" + proposal_text(proposal), file=sys.stderr)
    while True:
        sys.stderr.write("[a]pprove / [e]dit / [r]eject? ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer in ("a", "approve", "y", "yes", ""):
            return Approve()
        if answer in ("r", "reject", "n", "no"):
            sys.stderr.write("reason: ")
            sys.stderr.flush()
            return Reject(sys.stdin.readline().strip())
        if answer in ("e", "edit"):
            return Edit(_edit(proposal.code))


def _edit(code: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w+", suffix=".py", delete=False) as f:
        f.write(code)
        path = f.name
    try:
        subprocess.call([editor, path])
        with open(path, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(path)


@dataclass
class Session:
    """What one command knows while it runs, for its error report: a failing command still
    says which run it was and what code there is (with ``--json``: in the one JSON object)."""

    json: bool = False
    """Whether stdout is one JSON object (``--json``)."""
    debug: bool = False
    """Whether errors print their traceback (``--debug``, ``SELFHEAL_DEBUG=1``)."""
    run: Run | None = None
    """The run the command started or loaded, once there is one."""
    result: HealResult | None = None
    """The run's result, once there is one."""

    def known(self) -> HealResult | None:
        if self.result is not None:
            return self.result
        return self.run.result if self.run is not None else None


def _session(args: argparse.Namespace) -> Session:
    session = getattr(args, "session", None)
    return session if isinstance(session, Session) else Session()


def _write_out(
    path: str | None, result: HealResult, *, as_json: bool, given: str | None = None
) -> str:
    """Write the final code to ``path``; on failure, the message that says where it is. The
    file you gave with ``--code`` is only overwritten by verified code."""
    if not path or not result.code:
        return ""
    if given and not result.verified and Path(path).resolve() == Path(given).resolve():
        print(
            f"selfheal: {path} is left as it was: the result is {result.status}, not verified "
            "(the healed code is printed below; --out another file to keep it).",
            file=sys.stderr,
        )
        return ""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(result.code.rstrip() + "\n")
    except OSError as exc:
        where = "in this JSON object's `code`" if as_json else "printed above"
        return (
            f"Could not write the code to {path!r} ({exc.strerror or exc}). Nothing is lost: it "
            f"is {where} and kept in the run log {result.path} "
            f"(`selfheal runs show {result.run_id}`)."
        )
    return ""


def _finish(result: HealResult, args: argparse.Namespace) -> int:
    session = _session(args)
    session.result = result
    as_json = bool(getattr(args, "json", False))
    failed_write = _write_out(
        getattr(args, "out", None), result, as_json=as_json, given=getattr(args, "code", None)
    )
    if getattr(args, "write_tests", None):
        Path(args.write_tests).write_text(
            result.tests_file(_module_of(args.out) if args.out else None), encoding="utf-8"
        )
        print(f"selfheal: the tests behind the result are in {args.write_tests}", file=sys.stderr)
    if failed_write and as_json:
        raise ConfigError(failed_write)  # main prints the one JSON object, code included
    out = sys.stdout
    code = _exit_code(result)
    if as_json:
        print(json.dumps({**result.to_dict(), "exit_code": code}), file=out)
    else:
        verdict = "VERIFIED" if result.verified else result.status.upper()
        print(
            f"\n{verdict} after {result.iterations} iteration(s); {result.usage.calls} model "
            f"call(s), {result.usage.total_tokens} tokens; run {result.run_id}",
            file=out,
        )
        if result.tests:
            print("\ntests:\n" + result.tests_text(), file=out)
            print("\n" + evidence_line(result), file=out)
        if result.lessons:
            print("\nlessons:\n" + "\n".join(f"  - {x}" for x in result.lessons), file=out)
        if result.remembered:
            print("\nremembered from earlier runs:\n" + result.remembered_text(), file=out)
        if result.error:
            print(f"\nerror: {result.error}", file=out)
        if result.diff:
            print("\nchanges to your code:\n" + result.diff.rstrip(), file=out)
        if result.pending_text():
            print("\n" + result.pending_text(), file=out)
        elif result.code:
            print("\n" + result.code.rstrip(), file=out)
    if failed_write:
        raise ConfigError(failed_write)
    if result.status == "awaiting_approval":
        print(
            f"\nThe run waits for approval. Continue with:\n  selfheal runs resume {result.run_id} "
            "--approve   (or --reject REASON, --edit FILE)",
            file=sys.stderr,
        )
    return code


def _module_of(path: str) -> str:
    """The module name ``--write-tests`` imports the ``--out`` file as (its stem)."""
    return Path(path).stem


def _exit_code(result: HealResult) -> int:
    if result.status == "awaiting_approval":
        return EXIT_AWAITING
    return EXIT_VERIFIED if result.verified else EXIT_NOT_VERIFIED


def evidence_line(result: HealResult) -> str:
    """What the final code's verdict rests on, each thing once: the evidence summary (trusted
    tests, agreement), then the model-written tests when there are any."""
    outcomes = result.test_outcomes()
    trusted = [t for t in result.tests if t.trusted]
    active = [t for t in result.tests if not t.trusted and not t.quarantined]
    quarantined = [t for t in result.tests if t.quarantined]
    t_ok = sum(1 for t in trusted if outcomes.get(t.id) == "passed")
    u_ok = sum(1 for t in active if outcomes.get(t.id) == "passed")
    line = f"evidence: {result.evidence.summary}"
    if active or quarantined:
        line += f"\n  model-written tests: {u_ok}/{len(active)} pass"
        if quarantined:
            line += f", {len(quarantined)} quarantined as wrong or disputed"
    if not result.verified and trusted and t_ok == len(trusted) and u_ok < len(active):
        line += (
            "\n  the code passes every trusted test; the failing model-written tests may themselves "
            "be wrong (a small model's tests often are): read them before trusting either"
        )
    return line


def _spec_from(args: argparse.Namespace, model: str | None, code: str | None) -> str | bytes:
    """The spec: the argument, ``--spec-file PATH``, or stdin (``-`` for either); with
    ``--code`` alone, "make this code pass its tests"; the mock alone has a built-in one (its
    scripted demo)."""
    from selfheal.demo import DEMO_SPEC

    if args.spec is not None and args.spec_file is not None:
        raise ConfigError("Give the spec once: as an argument or with --spec-file, not both.")
    source = args.spec_file if args.spec_file is not None else args.spec
    if source == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            raise ConfigError("`-` reads the spec from stdin, but there is no stdin here.")
        return read_text_stream(stdin, "The spec read from stdin")
    if args.spec_file is not None:
        return read_text_file(args.spec_file, "The spec file")
    if source is not None:
        return str(source)
    if code is not None:
        return code_spec(code, args.entry_point)
    if model in ("mock", "mock:demo"):
        return DEMO_SPEC
    raise ConfigError(
        'No spec given. Pass it as an argument (selfheal heal "Return the median of a list ..."), '
        "with --spec-file PATH, or on stdin with `-`; only --provider mock has a built-in demo."
    )


def cmd_heal(args: argparse.Namespace) -> int:
    model = _model_string(args.provider, args.model)
    code = check_python(read_text_file(args.code, "--code"), "--code") if args.code else None
    spec = _spec_from(args, model, code)
    for path in (args.out, args.write_tests):
        if path:
            check_output_path(path, "--out" if path == args.out else "--write-tests")
    request = HealRequest(
        spec,  # type: ignore[arg-type]  # bytes are checked as UTF-8 by the request
        provider=model,
        config=_config(args),
        entry_point=args.entry_point,
        code=code,
        tests=[*(args.test or ()), *(Path(f) for f in args.tests or ())],
        approver=terminal_approver if sys.stdin.isatty() else None,
        on_event=Progress(sys.stderr, quiet=args.quiet),
    )
    session = _session(args)
    session.run = Run.start(request)
    if not args.quiet:
        print(f"selfheal: healing with {model or 'auto'}", file=sys.stderr)
    return _finish(session.run.run(request.approver), args)


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
    session = _session(args)
    run = Run.load(path, provider=args.provider, sink=Progress(sys.stderr))
    session.run = run
    approver = terminal_approver if sys.stdin.isatty() else None
    if args.runs_cmd == "fork":
        child = run.fork(args.at, lessons=args.lesson or None, code=code, model=args.model)
        session.run = child
        print(
            f"forked {run.state.run_id} @ iteration {args.at} -> {child.state.run_id}",
            file=sys.stderr,
        )
        return _finish(child.run(approver), args)
    result = run.resume(decision, approver) if decision else run.run(approver)
    return _finish(result, args)


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
        rows.append(
            {
                "run_id": s.run_id,
                "status": s.status,
                "iterations": s.iteration,
                "started_at": datetime.datetime.fromtimestamp(s.started_at).isoformat(
                    timespec="seconds"
                ),
                "spec": s.spec.text,
                "parent": None
                if s.parent is None
                else {"run_id": s.parent.run_id, "at_iteration": s.parent.at_iteration},
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
    _session(args).result = result
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


def cmd_doctor(args: argparse.Namespace) -> int:
    from selfheal.doctor import doctor, format_report

    report = doctor(load_model=not args.no_load)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(format_report(report))
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    """The local model for a pip user: the steps ``make install`` runs after the package."""
    from selfheal.local.install import run_install

    return run_install(dry_run=args.dry_run, out=sys.stdout if args.dry_run else sys.stderr)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the local model's llama-server in the foreground, for other processes to share."""
    import signal

    from selfheal.local.server import LocalServer
    from selfheal.local.settings import server_settings

    settings = server_settings(
        args.model or None, slots=args.slots, ctx_per_slot=args.ctx, threads=args.threads
    )
    server = LocalServer(settings, api_key=args.api_key or None, port=args.port, max_restarts=0)
    print(
        f"selfheal: starting llama-server for {settings.alias} ({settings.slots} slots x "
        f"{settings.ctx_per_slot} tokens, {settings.threads} threads); log: {server.log_path}",
        file=sys.stderr,
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the server on `kill` too
    try:
        server.start()
        url = server.base_url
        print(f"OPENAI_BASE_URL={url}", flush=True)
        print(f"OPENAI_API_KEY={server.api_key}", flush=True)
        print(f"SELFHEAL_LOCAL_URL={url}", flush=True)
        print(f"SELFHEAL_LOCAL_KEY={server.api_key}", flush=True)
        print(
            "selfheal: serving. Set SELFHEAL_LOCAL_URL and SELFHEAL_LOCAL_KEY in a notebook or "
            "shell so that `local` uses this server (or use openai:"
            f"{settings.alias} with the OPENAI_ variables). Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )
        code = server.wait()
        print(f"selfheal: error: {server.describe_exit()}", file=sys.stderr)
        return EXIT_ERROR if code else 0
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


JSON_HELP = "print the result as one JSON object"
RUN_ID_HELP = "a run id (`selfheal runs list`), or a unique start of one"
PROVIDER_OBJECT_HELP = (
    "the model string for a run started with a provider object (a run started from a model "
    "string uses that one)"
)
RUN_STATUSES = get_args(Status)
"""The statuses ``runs list --status`` filters by."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is a ``ConfigError`` (exit 2 through ``main``, and one
    JSON object with ``--json``) instead of a print and ``sys.exit`` inside argparse."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (in `{self.prog}`). See `{self.prog} --help`.")


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"print the traceback of an error (also {DEBUG_ENV}=1)",
    )
    p = _Parser(
        prog="selfheal",
        description="Spec in, tested Python out; repaired when it fails.",
        epilog="exit codes: 0 verified, 1 not verified (a result), 2 error (the message says "
        "what to do), 3 awaiting approval, 130 interrupted",
    )
    p.add_argument("--debug", action="store_true", help=f"print tracebacks (also {DEBUG_ENV}=1)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=_Parser)

    h = sub.add_parser("heal", help="heal a spec into tested code", parents=[common])
    h.add_argument(
        "spec",
        nargs="?",
        help="what the function must do (plain language or a def with a docstring); "
        "`-` reads it from stdin",
    )
    h.add_argument(
        "--spec-file", metavar="PATH", help="read the spec from a UTF-8 file (`-`: stdin)"
    )
    h.add_argument(
        "--provider",
        help="where the model runs: local (the installed local model), ollama[:MODEL], "
        "anthropic[:MODEL], openai:MODEL (OPENAI_BASE_URL for any OpenAI-compatible server), "
        "hf:MODEL, mock (the scripted median demo), mock:<script.yaml> (your scripted replies), "
        "or auto (default: $SELFHEAL_MODEL, else the first that works)",
    )
    h.add_argument("--model", help="model name (combined with --provider) or a full model string")
    h.add_argument(
        "--max-iterations",
        type=int,
        help="most rounds, the first population included " + default_text("max_iterations"),
    )
    h.add_argument(
        "--candidates",
        type=_count_or_auto,
        help="independent candidates in the first round: the greedy one plus samples; auto: "
        "what the backend decodes at once, at least 4 " + default_text("candidates"),
    )
    h.add_argument(
        "--first-sample",
        type=int,
        help="candidates asked for first, the greedy one and confirming samples; 1 asks for "
        "the greedy one alone and stops when it passes the examples: faster, but a lone answer "
        "is not verified " + default_text("first_sample"),
    )
    h.add_argument(
        "--agreement",
        type=int,
        help="candidates that must pass the examples and behave alike for `verified`; "
        "1 accepts a lone candidate " + default_text("agreement"),
    )
    h.add_argument(
        "--autonomy",
        choices=["full_auto", "review_repairs", "review_all"],
        help="who approves code before it runs: nobody (full_auto), you for each repair "
        "(review_repairs), you for every version (review_all); on a terminal you are asked, "
        "otherwise the run waits for `selfheal runs resume ID --approve` "
        + default_text("autonomy"),
    )
    h.add_argument("--entry-point", help="name of the function, if the spec does not say")
    h.add_argument(
        "--test",
        action="append",
        help="a test of your own (trusted): assert lines or a pytest function; repeatable",
    )
    h.add_argument(
        "--tests",
        action="append",
        metavar="FILE",
        help="a pytest file of your own (trusted; every item pytest collects is a test); "
        "repeatable",
    )
    h.add_argument(
        "--code",
        metavar="FILE",
        help="heal the code in FILE: it runs first (candidate c0); repairs start from it and "
        "the result shows the diff",
    )
    h.add_argument(
        "--write-tests",
        metavar="PATH",
        help="write the tests behind the result to PATH as a pytest file",
    )
    h.add_argument(
        "--out",
        help="write the final code to this file (the --code file itself only when verified)",
    )
    h.add_argument("--json", action="store_true", help="print the result as one JSON object")
    h.add_argument("--quiet", action="store_true", help="no progress lines")
    switches = {
        "critic": "review the chosen code and ask for a counterexample",
        "adversarial_tests": "ask for edge-case tests against the first candidate",
        "lessons": "keep lessons from failures and show them to the repairer (one more call "
        "per repair round)",
        "spec_blind_tests": "ask the test writer for tests from the spec alone; auto: only when "
        "the spec gives no example or too few probe inputs",
        "example_tests": "turn the spec's examples into trusted tests",
        "probes": "run every candidate on probe inputs and compare their outputs",
        "repair": "repair failing candidates in further rounds",
        "diagnosis": "ask the debugger for a diagnosis before a repair round",
        "memory": "recall lessons and verified solutions from earlier runs, and remember this "
        "one (see `selfheal memory`)",
    }
    for field, what in switches.items():
        h.add_argument(
            HEAL_OPTIONS[field],
            action=argparse.BooleanOptionalAction,
            help=f"{what} {default_text(field)}",
        )
    h.add_argument(
        "--debugger-steps",
        type=int,
        help="let the debugger make up to N tool calls before diagnosing (run a snippet, "
        "inspect a function, diff two candidates, trace a failing test) "
        + default_text("debugger_steps"),
    )
    h.add_argument(
        "--debugger-tool-calls",
        choices=["native", "structured"],
        help="native: the provider's own tool calling where it has one; structured: JSON "
        "replies " + default_text("debugger_tool_calls"),
    )
    h.add_argument(
        "--token-budget",
        type=int,
        help="stop once this many tokens are spent " + default_text("token_budget"),
    )
    h.add_argument(
        "--time-budget",
        type=float,
        help="stop after this many seconds " + default_text("time_budget"),
    )
    h.add_argument(
        "--test-timeout",
        type=float,
        help="seconds one test may run " + default_text("test_timeout"),
    )
    h.add_argument(
        "--max-spec-chars",
        type=int,
        help="longest spec accepted, in characters " + default_text("max_spec_chars"),
    )
    h.set_defaults(func=cmd_heal)

    r = sub.add_parser("runs", help="list, show, fork or resume runs", parents=[common])
    rs = r.add_subparsers(dest="runs_cmd", required=True, metavar="ACTION", parser_class=_Parser)
    ls = rs.add_parser("list", help="all runs, oldest first", parents=[common])
    ls.add_argument("--json", action="store_true", help=JSON_HELP + " (a list under `runs`)")
    ls.add_argument(
        "--status",
        action="append",
        choices=RUN_STATUSES,
        help="only runs that ended (or wait) with this status; repeatable",
    )
    ls.add_argument(
        "--since",
        metavar="WHEN",
        help="only runs started since WHEN: a date (2026-11-26), a date and time "
        "(2026-11-26T08:30) or an age (30m, 6h, 2d)",
    )
    show = rs.add_parser("show", help="a run's timeline, tests and code", parents=[common])
    show.add_argument("id", help=RUN_ID_HELP)
    show.add_argument("--json", action="store_true", help=JSON_HELP)
    show.add_argument(
        "--calls", action="store_true", help="print every model call: messages sent, raw reply"
    )
    fork = rs.add_parser(
        "fork", help="start a new run from iteration K of a run, with changes", parents=[common]
    )
    fork.add_argument("id", help=RUN_ID_HELP)
    fork.add_argument(
        "--at", type=int, required=True, help="iteration to fork from (0 = before any code)"
    )
    fork.add_argument("--lesson", action="append", help="replace the lessons (repeatable)")
    fork.add_argument("--model", help="another model string for every role")
    fork.add_argument("--code-file", help="replace attempt K's code with this file")
    fork.add_argument("--provider", help=PROVIDER_OBJECT_HELP)
    fork.add_argument("--json", action="store_true", help=JSON_HELP)
    fork.add_argument("--out", help="write the final code to this file")
    res = rs.add_parser(
        "resume", help="continue a run (after a crash, or answer its approval)", parents=[common]
    )
    res.add_argument("id", help=RUN_ID_HELP)
    g = res.add_mutually_exclusive_group()
    g.add_argument("--approve", action="store_true", help="run the proposed code as it is")
    g.add_argument(
        "--reject", metavar="REASON", help="refuse the proposal; the reason guides the next one"
    )
    g.add_argument("--edit", metavar="FILE", help="run this file's code instead of the proposal")
    res.add_argument("--provider", help=PROVIDER_OBJECT_HELP)
    res.add_argument("--json", action="store_true", help=JSON_HELP)
    res.add_argument("--out", help="write the final code to this file")
    r.set_defaults(func=cmd_runs)

    add_memory_parser(sub)

    d = sub.add_parser(
        "doctor", help="what works here: providers, the local model, kernels, GPU", parents=[common]
    )
    d.add_argument(
        "--no-load", action="store_true", help="do not load the model to test generation"
    )
    d.add_argument("--json", action="store_true", help="print the report as one JSON object")
    d.set_defaults(func=cmd_doctor)

    ins = sub.add_parser(
        "install",
        help="install the local model after `pip install selfheal[local]`: the model, "
        "llama-server, a smoke test (what `make install` does in a clone)",
        parents=[common],
    )
    ins.add_argument(
        "--dry-run",
        action="store_true",
        help="print the steps and what is done already; run nothing",
    )
    ins.set_defaults(func=cmd_install)

    sv = sub.add_parser(
        "serve",
        help="run the local model's llama-server in the foreground, shared by other processes",
        parents=[common],
    )
    sv.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    sv.add_argument("--slots", type=int, help="parallel slots (default $SELFHEAL_LOCAL_SLOTS or 4)")
    sv.add_argument("--ctx", type=int, help="context tokens per slot (default 4096)")
    sv.add_argument("--threads", type=int, help="CPU threads (default: the usable cores)")
    sv.add_argument("--model", help="a GGUF file (default: the installed model)")
    sv.add_argument("--api-key", help="the key clients must send (default: a random one)")
    sv.set_defaults(func=cmd_serve)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. The one error boundary: every command's mistakes and failures end
    here as exit 2 and a message (``--json``: one JSON object), never a traceback unless
    ``--debug``/``SELFHEAL_DEBUG=1`` asks for it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    session = Session(
        json="--json" in argv,
        debug="--debug" in argv or os.environ.get(DEBUG_ENV, "").lower() in ("1", "true", "yes"),
    )
    if not argv:
        # a bare `selfheal`: what it can do, not an error about a missing argument
        build_parser().print_help(sys.stderr)
        return EXIT_ERROR
    try:
        args = build_parser().parse_args(argv)
        session.json = bool(getattr(args, "json", False))
        session.debug = session.debug or bool(getattr(args, "debug", False))
        args.session = session
        code: int = args.func(args)
        return code
    except BrokenPipeError:
        # the reader of stdout went away (`selfheal runs list | head`): nothing to report
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        run = session.run.state.run_id if session.run is not None else None
        where = f"; run {run} is checkpointed: `selfheal runs resume {run}`" if run else ""
        return _fail(session, f"interrupted{where}.", EXIT_INTERRUPTED)
    except SelfHealError as exc:
        notes = "".join(f"\n  {note}" for note in getattr(exc, "__notes__", []))
        return _fail(session, f"{exc}{notes}", EXIT_ERROR, exc)
    except Exception as exc:
        return _fail(
            session,
            f"internal error ({type(exc).__name__}: {exc}). This is a bug in selfheal: run again "
            f"with --debug (or {DEBUG_ENV}=1) for the traceback and report it.",
            EXIT_ERROR,
            exc,
        )


def _fail(session: Session, message: str, code: int, exc: BaseException | None = None) -> int:
    """Report a failed command: the traceback if asked, the message on stderr, and with
    ``--json`` one JSON object on stdout with what is known (the run, its code)."""
    if session.debug and exc is not None:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"selfheal: error: {message}", file=sys.stderr)
    if session.json:
        print(json.dumps(error_object(message, code, session.known(), exc)))
    return code


def error_object(
    message: str, code: int, known: HealResult | None, exc: BaseException | None = None
) -> dict[str, Any]:
    """The ``--json`` object of a failed command: ``status`` ``error``, the ``error`` message,
    the ``exit_code``, and what is known: the run's id, log, code and status (``run_status``)."""
    base: dict[str, Any] = {
        "code": None,
        "verified": False,
        "run_id": None,
        "path": None,
    }
    if known is not None:
        base = {**known.to_dict(), "run_status": known.status}
    return {
        **base,
        "status": "error",
        "error": message,
        "error_type": type(exc).__name__ if exc is not None else "",
        "exit_code": code,
    }


if __name__ == "__main__":
    sys.exit(main())
