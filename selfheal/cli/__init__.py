"""The ``selfheal`` command line (``selfheal COMMAND --help``; docs/usage.md): every command runs
inside one error boundary (``main``): a mistake exits 2 with what to do, and with ``--json``
stdout holds exactly one JSON object whatever happens."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from selfheal.cli.heal import cmd_heal
from selfheal.cli.local import cmd_doctor, cmd_install, cmd_serve
from selfheal.cli.runs import RUN_STATUSES, cmd_runs
from selfheal.cli.session import DEBUG_ENV, EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, Session
from selfheal.config.options import add_config_options
from selfheal.errors import ConfigError, SelfHealError
from selfheal.memory.command import add_parser as add_memory_parser
from selfheal.result import HealResult

JSON_HELP = "print the result as one JSON object"
RUN_ID_HELP = "a run id (`selfheal runs list`), or a unique start of one"


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
    add_config_options(h)
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
    again = _Parser(add_help=False, parents=[common])  # what fork and resume share
    again.add_argument("id", help=RUN_ID_HELP)
    again.add_argument(
        "--provider",
        help="the model string for a run started with a provider object (a run started from "
        "a model string uses that one)",
    )
    again.add_argument("--json", action="store_true", help=JSON_HELP)
    again.add_argument("--out", help="write the final code to this file")
    fork = rs.add_parser(
        "fork", help="start a new run from iteration K of a run, with changes", parents=[again]
    )
    fork.add_argument(
        "--at", type=int, required=True, help="iteration to fork from (0 = before any code)"
    )
    fork.add_argument("--lesson", action="append", help="replace the lessons (repeatable)")
    fork.add_argument("--model", help="another model string for every role")
    fork.add_argument("--code-file", help="replace attempt K's code with this file")
    res = rs.add_parser(
        "resume", help="continue a run (after a crash, or answer its approval)", parents=[again]
    )
    g = res.add_mutually_exclusive_group()
    g.add_argument("--approve", action="store_true", help="run the proposed code as it is")
    g.add_argument(
        "--reject", metavar="REASON", help="refuse the proposal; the reason guides the next one"
    )
    g.add_argument("--edit", metavar="FILE", help="run this file's code instead of the proposal")
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
    base: dict[str, Any] = {"code": None, "verified": False, "run_id": None, "path": None}
    if known is not None:
        base = {**known.to_dict(), "run_status": known.status}
    return {
        **base,
        "status": "error",
        "error": message,
        "error_type": type(exc).__name__ if exc is not None else "",
        "exit_code": code,
    }
