"""``selfheal heal``: a spec (your code, your tests) in; the healed code and its evidence out."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from selfheal.approval import Approve, Edit, Reject
from selfheal.asking import ask_on_terminal
from selfheal.cli.session import EXIT_AWAITING, EXIT_NOT_VERIFIED, EXIT_VERIFIED, session_of
from selfheal.config import HealConfig
from selfheal.config.options import FLAGS, config_values
from selfheal.errors import ConfigError
from selfheal.graph.runner import Run
from selfheal.inputs import check_output_path, check_python, read_text_file, read_text_stream
from selfheal.progress import TerminalLine, TokenMeter, progress_only
from selfheal.request import HealRequest
from selfheal.result import HealResult, proposal_text
from selfheal.state import Answer, Decision, Event, HealState, Proposal, Question
from selfheal.texts import cut
from selfheal.usertests import code_spec

_ICONS = {"end": "✓", "error": "✗", "degraded": "⚠", "decision": "?"}


class Progress:
    """Prints one line per node as the run goes (to stderr, so ``--json`` stays clean), and
    while a node runs, its seconds and tokens so far (``selfheal.progress``: a live line on a
    terminal, a plain line every 15 s otherwise)."""

    def __init__(self, stream: TextIO, *, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.meter = TokenMeter()
        self.line = TerminalLine(stream, self.meter)
        self.on_token = progress_only(self.meter.on_token)
        """The run's token sink (it counts; it shows no text)."""

    def __call__(self, e: Event) -> None:
        self.meter.on_event(e)
        if self.quiet:
            return
        self.line.start()
        if e.kind == "end":
            tok = e.prompt_tokens + e.completion_tokens
            model = f"  [{e.model}]" if e.model else ""
            line = f"  ✓ {e.node:<11} {e.duration:6.2f}s {tok:6d} tok  {e.detail}{model}"
        elif e.kind in ("error", "degraded"):
            line = f"  {_ICONS[e.kind]} {e.node:<11} {e.detail}"
        elif e.kind == "tool":  # one of the debugger's tool calls
            line = f"    {e.node:<11} {e.duration:6.2f}s  {e.detail}"
        else:
            return
        self.line.print(cut(line, 220))


def _model_string(provider: str | None, model: str | None) -> str | None:
    if model and provider and ":" not in model and provider not in ("auto",):
        return f"{provider}:{model}"
    return model or provider


def heal_config(args: argparse.Namespace) -> HealConfig:
    cfg = config_values(args)
    if isinstance(args.candidates, int) and args.candidates >= 1 and args.first_sample is None:
        cfg["first_sample"] = min(args.candidates, HealConfig().generation.first_sample)
    return HealConfig.model_validate(cfg, context={"names": FLAGS})


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


def ask_here(question: Question, state: HealState, progress: Progress) -> Answer:
    """``ask_on_terminal`` with the live progress line held while it waits."""
    with progress.line.paused():
        return ask_on_terminal(question, state)


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


def _write_out(
    path: str | None, result: HealResult, *, as_json: bool, given: str | None = None
) -> str:
    """Write the final code to ``path`` (below a ``# selfheal: NOT verified`` comment when it
    is not verified, as stderr says too); on failure, the message that says where it is. The
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
    head = "" if result.verified else not_verified_header(result)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(head + result.code.rstrip() + "\n")
    except OSError as exc:
        where = "in this JSON object's `code`" if as_json else "printed above"
        return (
            f"Could not write the code to {path!r} ({exc.strerror or exc}). Nothing is lost: it "
            f"is {where} and kept in the run log {result.path} "
            f"(`selfheal runs show {result.run_id}`)."
        )
    if head:
        print(
            f"selfheal: wrote {path}: NOT verified ({result.status}); its first lines say so and "
            f"why: {result.evidence.summary}",
            file=sys.stderr,
        )
    return ""


def not_verified_header(result: HealResult) -> str:
    """The comment ``--out`` puts above code that is not verified: that it is not, and the
    evidence it rests on (wrapped, one ``#`` line each)."""
    import textwrap

    text = (
        f"selfheal: NOT verified ({result.status}, run {result.run_id}): {result.evidence.summary}"
    )
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 97)) + "\n"


def finish(result: HealResult, args: argparse.Namespace) -> int:
    session = session_of(args)
    session.result = result
    as_json = bool(getattr(args, "json", False))
    failed_write = _write_out(
        getattr(args, "out", None), result, as_json=as_json, given=getattr(args, "code", None)
    )
    if getattr(args, "write_tests", None):
        Path(args.write_tests).write_text(
            result.tests_file(Path(args.out).stem if args.out else None), encoding="utf-8"
        )
        print(f"selfheal: the tests behind the result are in {args.write_tests}", file=sys.stderr)
    if failed_write and as_json:
        raise ConfigError(failed_write)  # main prints the one JSON object, code included
    out = sys.stdout
    code = EXIT_VERIFIED if result.verified else EXIT_NOT_VERIFIED
    if result.status == "awaiting_approval":
        code = EXIT_AWAITING
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
    progress = Progress(sys.stderr, quiet=args.quiet)
    request = HealRequest(
        spec,  # type: ignore[arg-type]  # bytes are checked as UTF-8 by the request
        provider=model,
        config=heal_config(args),
        entry_point=args.entry_point,
        code=code,
        tests=[*(args.test or ()), *(Path(f) for f in args.tests or ())],
        approver=terminal_approver if sys.stdin.isatty() else None,
        # questions when the evidence runs out: on a terminal, and never under full_auto
        asker=(lambda q, s: ask_here(q, s, progress)) if sys.stdin.isatty() else None,
        on_event=progress,
        on_token=progress.on_token,
    )
    session = session_of(args)
    session.run = Run.start(request)
    if not args.quiet:
        print(f"selfheal: healing with {model or 'auto'}", file=sys.stderr)
    try:
        result = session.run.run(request.approver)
    finally:
        progress.line.stop()
    return finish(result, args)
