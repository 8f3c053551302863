"""The ``selfheal`` command line.

selfheal heal "SPEC" [--provider P] [--model M] [--max-iterations N] [--autonomy A]
                     [--out FILE] [--json] [--entry-point NAME] [--test ASSERT ...]
selfheal runs list | show ID [--calls] | fork ID --at K [...] | resume ID [--approve|--reject R|--edit F]
selfheal memory list | show ID | forget ID... | clear [--yes]
selfheal doctor [--no-load]
selfheal serve [--port N] [--slots N] [--ctx N] [--threads N] [--model GGUF] [--api-key KEY]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import TextIO

from selfheal.approval import Approve, Edit, Reject
from selfheal.config import HealConfig
from selfheal.errors import SelfHealError
from selfheal.graph.checkpoint import find_run, list_runs, read_states
from selfheal.graph.runner import Run
from selfheal.memory.command import add_parser as add_memory_parser
from selfheal.request import HealRequest
from selfheal.result import HealResult
from selfheal.state import Decision, Event, HealState, Proposal

EXIT_VERIFIED, EXIT_NOT_VERIFIED, EXIT_ERROR, EXIT_AWAITING = 0, 1, 2, 3

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


def _config(args: argparse.Namespace) -> HealConfig:
    cfg: dict[str, object] = {
        "autonomy": args.autonomy,
        "spec_blind_tests": False if args.no_spec_tests else "auto",
        "debugger_steps": args.debugger_steps,
    }
    # options left out keep HealConfig's defaults (defined once, there)
    for option, field in (
        ("max_iterations", "max_iterations"),
        ("candidates", "candidates"),
        ("critic", "critic"),
        ("adversarial", "adversarial_tests"),
        ("memory", "memory"),
        ("debugger_tool_calls", "debugger_tool_calls"),
    ):
        value = getattr(args, option)
        if value is not None:
            cfg[field] = value
    if args.candidates is not None:
        cfg["first_sample"] = min(args.candidates, HealConfig().first_sample)
    if args.token_budget:
        cfg["token_budget"] = args.token_budget
    if args.time_budget:
        cfg["time_budget"] = args.time_budget
    if args.test_timeout:
        cfg["test_timeout"] = args.test_timeout
    return HealConfig.model_validate(cfg)


def _show_proposal(p: Proposal, out: TextIO) -> None:
    print(f"\n── {p.kind} proposal awaiting approval ──", file=out)
    if p.diagnosis is not None:
        print(f"diagnosis: {p.diagnosis.root_cause}", file=out)
        if p.diagnosis.repair_strategy:
            print(f"strategy:  {p.diagnosis.repair_strategy}", file=out)
    print(p.diff or p.code, file=out)


def terminal_approver(proposal: Proposal, state: HealState) -> Decision:
    """Asks on the terminal: approve, edit in $EDITOR, or reject with a reason."""
    _show_proposal(proposal, sys.stderr)
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


def _finish(result: HealResult, args: argparse.Namespace) -> int:
    out = sys.stdout
    if getattr(args, "out", None) and result.code:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(result.code.rstrip() + "\n")
    if getattr(args, "json", False):
        print(result.to_json(), file=out)
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
        if result.code:
            print("\n" + result.code.rstrip(), file=out)
    if result.status == "awaiting_approval":
        print(
            f"\nThe run waits for approval. Continue with:\n  selfheal runs resume {result.run_id} "
            "--approve   (or --reject REASON, --edit FILE)",
            file=sys.stderr,
        )
        return EXIT_AWAITING
    return EXIT_VERIFIED if result.verified else EXIT_NOT_VERIFIED


def evidence_line(result: HealResult) -> str:
    """What the final code's verdict rests on: trusted and model-written tests separately."""
    outcomes = result.test_outcomes()
    trusted = [t for t in result.tests if t.trusted]
    active = [t for t in result.tests if not t.trusted and not t.quarantined]
    quarantined = [t for t in result.tests if t.quarantined]
    t_ok = sum(1 for t in trusted if outcomes.get(t.id) == "passed")
    u_ok = sum(1 for t in active if outcomes.get(t.id) == "passed")
    line = f"evidence: trusted tests {t_ok}/{len(trusted)} passed; model-written {u_ok}/{len(active)} passed"
    if quarantined:
        line += f", {len(quarantined)} quarantined as wrong or disputed"
    line += f"\n  {result.evidence.summary}"
    if not result.verified and trusted and t_ok == len(trusted) and u_ok < len(active):
        line += (
            "\n  the code passes every trusted test; the failing model-written tests may themselves "
            "be wrong (a small model's tests often are): read them before trusting either"
        )
    return line


def cmd_heal(args: argparse.Namespace) -> int:
    from selfheal.demo import DEMO_SPEC

    model = _model_string(args.provider, args.model)
    spec = args.spec
    if spec is None:
        if model and model.startswith("mock"):
            spec = DEMO_SPEC
        else:
            raise SystemExit(
                "selfheal heal: give a SPEC (the mock provider alone has a built-in demo spec)"
            )
    if model and model.split(":", 1)[0] == "mock" and spec != DEMO_SPEC:
        print(
            "note: the mock provider replays its scripted median demo whatever the spec; "
            "use --provider local (or ollama/anthropic) to heal this spec for real.",
            file=sys.stderr,
        )
    progress = Progress(sys.stderr, quiet=args.quiet)
    if not args.quiet:
        print(f"selfheal: healing with {model or 'auto'}", file=sys.stderr)
    request = HealRequest(
        spec,
        provider=model,
        config=_config(args),
        entry_point=args.entry_point,
        tests=args.test or (),
        approver=terminal_approver if sys.stdin.isatty() else None,
        on_event=progress,
    )
    return _finish(Run.start(request).run(request.approver), args)


def cmd_runs(args: argparse.Namespace) -> int:
    if args.runs_cmd == "list":
        paths = list_runs()
        if not paths:
            print("no runs yet")
            return 0
        for p in paths:
            s = read_states(p)[-1]
            parent = f"  (fork of {s.parent.run_id} @ {s.parent.at_iteration})" if s.parent else ""
            spec = " ".join(s.spec.text.split())[:50]
            print(f"{s.run_id}  {s.status:<17} it={s.iteration}  {spec}{parent}")
        return 0
    path = find_run(args.id)
    if args.runs_cmd == "show":
        states = read_states(path)
        result = HealResult.from_state(states[-1], path=path)
        if args.json:
            print(result.to_json())
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
        if result.code:
            print("\n" + result.code.rstrip())
        return 0
    run = Run.load(path, provider=args.provider, sink=Progress(sys.stderr))
    if args.runs_cmd == "fork":
        code = None
        if args.code_file:
            with open(args.code_file, encoding="utf-8") as f:
                code = f.read()
        child = run.fork(args.at, lessons=args.lesson or None, code=code, model=args.model)
        print(
            f"forked {run.state.run_id} @ iteration {args.at} -> {child.state.run_id}",
            file=sys.stderr,
        )
        return _finish(child.run(terminal_approver if sys.stdin.isatty() else None), args)
    # resume
    decision: Decision | None = None
    if args.approve:
        decision = Approve()
    elif args.reject is not None:
        decision = Reject(args.reject)
    elif args.edit:
        with open(args.edit, encoding="utf-8") as f:
            decision = Edit(f.read())
    approver = terminal_approver if sys.stdin.isatty() else None
    result = run.resume(decision, approver) if decision else run.run(approver)
    return _finish(result, args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from selfheal.doctor import doctor, format_report

    report = doctor(load_model=not args.no_load)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(format_report(report))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the local model's llama-server in the foreground, for other processes to share."""
    import signal

    from selfheal.llm.local_server import LocalServer, server_settings

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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="selfheal", description="Spec in, tested Python out; repaired when it fails."
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    h = sub.add_parser("heal", help="heal a spec into tested code")
    h.add_argument(
        "spec",
        nargs="?",
        help="what the function must do (plain language or a def with a docstring)",
    )
    h.add_argument(
        "--provider", help="local | mock | ollama[:MODEL] | anthropic[:MODEL] | hf:MODEL | auto"
    )
    h.add_argument("--model", help="model name (combined with --provider) or a full model string")
    h.add_argument(
        "--max-iterations", type=int, help="most rounds, the first population included (3)"
    )
    h.add_argument(
        "--candidates",
        type=int,
        help="independent candidates in the first round: the greedy one plus samples (4)",
    )
    h.add_argument(
        "--autonomy", choices=["full_auto", "review_repairs", "review_all"], default="full_auto"
    )
    h.add_argument("--entry-point", help="name of the function, if the spec does not say")
    h.add_argument("--test", action="append", help="an assertion of your own (trusted); repeatable")
    h.add_argument("--out", help="write the final code to this file")
    h.add_argument("--json", action="store_true", help="print the result as one JSON object")
    h.add_argument("--quiet", action="store_true", help="no progress lines")
    h.add_argument(
        "--critic",
        action=argparse.BooleanOptionalAction,
        help="review the chosen code and ask for a counterexample (off by default)",
    )
    h.add_argument(
        "--adversarial",
        action=argparse.BooleanOptionalAction,
        help="ask for edge-case tests against the first candidate (off by default)",
    )
    h.add_argument(
        "--memory",
        action=argparse.BooleanOptionalAction,
        help="recall lessons and verified solutions from earlier runs, and remember this one "
        "(on by default; see `selfheal memory`)",
    )
    h.add_argument("--no-spec-tests", action="store_true")
    h.add_argument(
        "--debugger-steps",
        type=int,
        default=0,
        help="let the debugger make up to N tool calls before diagnosing (run a snippet, "
        "inspect a function, diff two candidates, trace a failing test)",
    )
    h.add_argument(
        "--debugger-tool-calls",
        choices=["native", "structured"],
        help="native: the provider's own tool calling where it has one (default); "
        "structured: JSON replies",
    )
    h.add_argument("--token-budget", type=int)
    h.add_argument("--time-budget", type=float)
    h.add_argument("--test-timeout", type=float)
    h.set_defaults(func=cmd_heal)

    r = sub.add_parser("runs", help="list, show, fork or resume runs")
    rs = r.add_subparsers(dest="runs_cmd", required=True)
    rs.add_parser("list", help="all runs, oldest first")
    show = rs.add_parser("show", help="a run's timeline, tests and code")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.add_argument(
        "--calls", action="store_true", help="print every model call: messages sent, raw reply"
    )
    fork = rs.add_parser("fork", help="start a new run from iteration K of a run, with changes")
    fork.add_argument("id")
    fork.add_argument(
        "--at", type=int, required=True, help="iteration to fork from (0 = before any code)"
    )
    fork.add_argument("--lesson", action="append", help="replace the lessons (repeatable)")
    fork.add_argument("--model", help="another model string for every role")
    fork.add_argument("--code-file", help="replace attempt K's code with this file")
    fork.add_argument("--provider", help="provider for runs that used a provider object")
    fork.add_argument("--json", action="store_true")
    fork.add_argument("--out")
    res = rs.add_parser("resume", help="continue a run (after a crash, or answer its approval)")
    res.add_argument("id")
    g = res.add_mutually_exclusive_group()
    g.add_argument("--approve", action="store_true")
    g.add_argument("--reject", metavar="REASON")
    g.add_argument("--edit", metavar="FILE", help="run this file's code instead of the proposal")
    res.add_argument("--provider")
    res.add_argument("--json", action="store_true")
    res.add_argument("--out")
    r.set_defaults(func=cmd_runs)

    add_memory_parser(sub)

    d = sub.add_parser("doctor", help="what works here: providers, the local model, kernels, GPU")
    d.add_argument(
        "--no-load", action="store_true", help="do not load the model to test generation"
    )
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_doctor)

    sv = sub.add_parser(
        "serve",
        help="run the local model's llama-server in the foreground, shared by other processes",
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
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except SelfHealError as exc:
        print(f"selfheal: error: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", []):
            print(f"  {note}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(
            "\nselfheal: interrupted; the run is checkpointed (selfheal runs list).",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
