"""Command line: ``python -m evaluation.run_benchmark --suite SUITE --model MODEL ...``.

Runs every selected task in every mode with the same model and settings, scores each final
(and first) candidate with the hidden reference tests, appends each result to
``OUT/results.jsonl`` as it finishes, and writes ``results.json``, ``results.md`` and
charts. ``--resume`` continues an interrupted run where it stopped.
"""

from __future__ import annotations

import argparse
import functools
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from evaluation.benchmark import BenchmarkRunner
from evaluation.environment import RunInfo, collect_run_info
from evaluation.errors import ResultsFileError, SuiteError
from evaluation.modes import DEFAULT_MODES, MODES, asks_of, parse_modes, with_asks
from evaluation.report import Settings, build_summary, load_summary, render_markdown, write_reports
from evaluation.results_file import ResultsFile
from evaluation.suites import SUITES, get_suite, select_tasks
from selfheal.config import HealConfig
from selfheal.errors import ConfigError, SelfHealError
from selfheal.llm.base import Provider

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.run_benchmark",
        description="Measure how many programs selfheal gets right against the single-shot "
        "baseline, scored by hidden reference tests.",
    )
    parser.add_argument(
        "--suite",
        required=True,
        metavar="SUITE",
        help=f"a suite name ({', '.join(sorted(SUITES))}) or the path of your own suite file "
        "(.jsonl or .yaml: docs/evaluation.md, 'Your own suite')",
    )
    parser.add_argument(
        "--model",
        "--provider",
        dest="model",
        required=True,
        help="model string: local, local:/path.gguf, ollama:NAME, anthropic:NAME, openai:NAME, "
        "hf:NAME, mock (the scripted demo: --suite demo only), mock:<script.yaml>",
    )
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated modes (default {','.join(DEFAULT_MODES)}); known: {', '.join(MODES)}",
    )
    parser.add_argument(
        "--ask",
        default="",
        metavar="N[,N...]",
        help="also run each heal mode with a simulated user that answers up to N of its "
        "questions from the task's reference solution (mode heal+askN; e.g. --ask 1,2,3); "
        "the report compares each with the mode without questions (docs/evaluation.md)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument(
        "--task-ids", nargs="+", default=None, help="only these task ids (space or comma separated)"
    )
    parser.add_argument(
        "--max-iterations",
        type=int,
        default=None,
        help="heal rounds, the first population included (default: HealConfig's)",
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="tasks run in parallel (local); with --executor dask and no --scheduler: the "
        "worker processes of a local cluster",
    )
    parser.add_argument(
        "--executor",
        choices=["local", "dask"],
        default="local",
        help="where tasks run: this process (local) or a Dask cluster (needs selfheal[dask]; "
        "docs/scale.md)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="the Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: start a local cluster "
        "of --workers processes on 127.0.0.1)",
    )
    parser.add_argument(
        "--pool-size",
        type=int,
        default=2,
        help="kernels in each cluster worker's sandbox pool (default 2)",
    )
    parser.add_argument(
        "--model-limits",
        default=None,
        metavar="LIMITS",
        help="request limits per model id, YAML/JSON or a file: "
        '\'{"openai:M": {"max_concurrency": 8, "requests_per_minute": 600}}\' '
        "(default: $SELFHEAL_MODEL_LIMITS); held across every worker",
    )
    parser.add_argument(
        "--resume", action="store_true", help="skip (task, mode) pairs already in OUT"
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="a role's mode (heal-critic, heal-debugger, ...) continues heal's run of the task "
        "from where its switch first matters, and a +askN mode from where its first question "
        "is open, instead of a run of its own (evaluation.paired)",
    )
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-hash", action="store_true", help="do not sha256 the local model file")
    parser.add_argument("--list-tasks", action="store_true", help="print the task ids and exit")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild results.json/.md and charts from OUT/results.jsonl without running "
        "anything (safe while a run is still writing to OUT)",
    )
    return parser


def with_asked(modes: tuple[str, ...], ask: str) -> tuple[str, ...]:
    """``modes`` with, after each heal mode, its ``+askN`` variant for each N in ``ask``
    (``"1,2,3"``); a ``SuiteError`` for an N that is not a number from 1 to 20."""
    counts: list[int] = []
    for word in (w.strip() for w in ask.split(",")):
        if not word:
            continue
        if not word.isdigit() or not 1 <= int(word) <= 20:
            raise SuiteError(
                f"--ask takes numbers of answers from 1 to 20, e.g. --ask 1,2,3; got {word!r}."
            )
        counts.append(int(word))
    out: list[str] = []
    for m in modes:
        out.append(m)
        if m.startswith("heal") and not asks_of(m):
            out += [with_asks(m, n) for n in dict.fromkeys(counts)]
    return tuple(dict.fromkeys(out))


def _default_out(suite: str, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", model).strip("-") or "model"
    name = suite if suite in SUITES else Path(suite).stem
    return Path("evaluation") / "results" / f"{name}-{slug}"


def _interrupt_on_sigterm() -> None:
    """Treat ``kill`` (SIGTERM) like Ctrl-C: stop, write the reports, print the resume
    command. Results already appended are safe either way."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None, *, provider: Provider | None = None) -> int:
    """The command line. ``provider``: a provider built already (e.g. a transformers model
    loaded once in a notebook) to use instead of building one from ``--model``, which then
    only names it in the results."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(args_list)
    if argv is None:
        _interrupt_on_sigterm()
    try:
        return _main(args, args_list, provider)
    except SelfHealError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _providers(
    model: str, provider: Provider | None, *, suite: str, remote: bool = False
) -> tuple[Provider | str | None, Callable[[], Provider] | None]:
    """The shared provider, or a factory of one provider per run: the scripted demo
    (``mock``) replays one heal per script, so each run gets a fresh one; a YAML mock script
    (``mock:FILE``) spans the whole benchmark and is shared like a real model. ``remote``
    (a cluster): the model string instead of a provider, built once on each worker."""
    from selfheal.llm.router import parse_model_string, resolve_provider

    if provider is not None:
        if remote:
            raise ConfigError(
                f"A provider object ({provider.model_id}) cannot be sent to cluster workers; "
                "name the model with --model and let each worker build it."
            )
        return provider, None
    spec = parse_model_string(model)
    if spec is not None and spec.provider == "mock" and spec.model == "demo":
        if suite != "demo":
            raise ConfigError(
                f"--model {model} is the scripted median demo: it answers only --suite demo. "
                "Script the replies for your tasks with --model mock:<script.yaml> (a YAML map "
                "of role to replies, docs/llm.md), or use a real model."
            )
        return None, functools.partial(resolve_provider, model)
    return (model if remote else resolve_provider(model)), None


def _main(args: argparse.Namespace, args_list: list[str], provider: Provider | None) -> int:
    suite = get_suite(args.suite)
    task_ids = None
    if args.task_ids:
        task_ids = [t for item in args.task_ids for t in item.split(",") if t.strip()]
    tasks = select_tasks(suite.tasks(), limit=args.limit, task_ids=task_ids)
    if args.list_tasks:
        for t in tasks:
            print(f"{t.id}\t{t.category}\t{t.entry_point}")
        return 0
    modes = with_asked(parse_modes(args.modes), args.ask)
    out: Path = args.out or _default_out(args.suite, args.model)
    settings = Settings(
        suite=args.suite,
        model=args.model,
        modes=modes,
        max_iterations=args.max_iterations or HealConfig().repairs.max_iterations,
        temperature=args.temperature,
    )
    results = ResultsFile(out / "results.jsonl")
    previous = load_summary(out / "results.json")
    if args.report_only:
        if previous is None and not results.path.exists():
            raise ResultsFileError(f"{out} holds no results to report on.")
        runs = previous.runs if previous is not None else ()
        return _report(settings, runs, results, [t.id for t in tasks], out, args_list, False)
    if not args.resume and results.read():
        raise ResultsFileError(
            f"{out} already holds results. Pass --resume to continue that run, or choose "
            "another --out."
        )
    if args.resume and previous is not None:
        old = previous.settings
        same = (old.suite, old.model, old.max_iterations, old.temperature) == (
            settings.suite,
            settings.model,
            settings.max_iterations,
            settings.temperature,
        )
        if not same:
            raise ResultsFileError(
                f"{out} holds a run with suite={old.suite}, model={old.model}, "
                f"max_iterations={old.max_iterations}, temperature={old.temperature}; "
                "resume it with the same settings, or choose another --out."
            )

    from selfheal.llm.limits import configure_limits, parse_limits
    from selfheal.scale import Engine, make_engine
    from selfheal.scale.many import shippable_source

    if args.model_limits is not None:
        configure_limits(parse_limits(args.model_limits, source="--model-limits"))
    engine: Engine | None = None
    model = args.model
    if args.executor == "dask":
        model = str(shippable_source(args.model, "dask"))
        engine = make_engine(
            "dask", workers=args.workers, address=args.scheduler, pool_size=args.pool_size
        )
    elif args.scheduler:
        raise ConfigError("--scheduler needs --executor dask.")
    info = collect_run_info(args.model, args_list, hash_file=not args.no_hash)
    shared, factory = _providers(model, provider, suite=args.suite, remote=engine is not None)
    runner = BenchmarkRunner(
        tasks=tasks,
        modes=modes,
        provider=shared,
        provider_factory=factory,
        results=results,
        max_iterations=settings.max_iterations,
        temperature=args.temperature,
        workers=args.workers,
        engine=engine,
        progress=not args.no_progress,
        paired=args.paired,
    )
    runs = (*(previous.runs if (previous and args.resume) else ()), info)
    task_ids = [t.id for t in tasks]
    out.mkdir(parents=True, exist_ok=True)
    # Written now as well, so results.json names this invocation even while it runs.
    records = results.read()
    write_reports(
        build_summary(settings=settings, runs=runs, records=records, task_ids=task_ids),
        records,
        out,
    )
    interrupted = False
    try:
        runner.run(resume=args.resume)
    except KeyboardInterrupt:
        interrupted = True
    return _report(settings, runs, results, task_ids, out, args_list, interrupted)


def _report(
    settings: Settings,
    runs: Sequence[RunInfo],
    results: ResultsFile,
    task_ids: list[str],
    out: Path,
    args_list: list[str],
    interrupted: bool,
) -> int:
    records = results.read()
    summary = build_summary(settings=settings, runs=runs, records=records, task_ids=task_ids)
    paths = write_reports(summary, records, out)
    print(render_markdown(summary))
    print("Wrote " + ", ".join(str(p) for p in [results.path, *paths]))
    if interrupted or not summary.complete:
        skip = {"--resume", "--report-only"}
        resume_args = [a for a in args_list if a not in skip] + ["--resume"]
        print(
            ("Interrupted. " if interrupted else "Not complete. ")
            + "Continue with: python -m evaluation.run_benchmark "
            + " ".join(resume_args),
            file=sys.stderr,
        )
        return 130 if interrupted else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
