"""Reports: ``results.json``, ``results.md`` and PNG charts (matplotlib, Agg backend; skipped
with a note when the ``eval`` extra is not installed)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation.ask_gain import AskGain, ask_gain, ask_table
from evaluation.environment import RunInfo
from evaluation.errors import ResultsFileError
from evaluation.metrics import (
    Comparison,
    MemoryUse,
    ModeMetrics,
    PairedUse,
    compare,
    memory_use,
    paired_use,
    summarise,
)
from evaluation.modes import split_mode
from evaluation.records import TaskRecord
from selfheal.records import Record

__all__ = ["Settings", "Summary", "build_summary", "load_summary", "write_reports"]


class Settings(Record):
    """What must stay the same across resumptions of one results directory."""

    suite: str
    """Suite name."""
    model: str
    """Model string from the command line."""
    modes: tuple[str, ...]
    """Modes of the run."""
    max_iterations: int
    """Iteration budget of the heal modes."""
    temperature: float
    """Sampling temperature of every role."""


class Summary(Record):
    """The content of ``results.json``."""

    settings: Settings
    """The run's settings."""
    runs: tuple[RunInfo, ...]
    """One entry per invocation (the first run and every ``--resume``)."""
    tasks_selected: int
    """Tasks selected for the run."""
    metrics: dict[str, ModeMetrics]
    """Per-mode metrics over the records finished so far."""
    comparisons: tuple[Comparison, ...]
    """Each mode against the first mode (the baseline), and each later pass of a mode run
    several times (``heal-memory:2``) against its first pass."""
    memory: tuple[MemoryUse, ...] = ()
    """For each pass of a memory mode: what its runs recalled and what that did."""
    paired: tuple[PairedUse, ...] = ()
    """For each paired mode (``--paired``): where it parted from its base and what that did."""
    asking: tuple[AskGain, ...] = ()
    """For each ``+askN`` mode (``--ask N``) beside its mode without questions: right answers
    gained per question asked (``evaluation.ask_gain``)."""
    complete: bool
    """True when every selected (task, mode) has a record."""
    tasks: tuple[dict[str, Any], ...]
    """A compact per-(task, mode) table; full records are in ``results.jsonl``."""


def load_summary(path: Path) -> Summary | None:
    """The existing ``results.json`` of a directory, if any."""
    if not path.exists():
        return None
    try:
        return Summary.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ResultsFileError(
            f"{path} exists but cannot be read ({exc}). Move it away or pick another --out."
        ) from exc


def _compact(r: TaskRecord) -> dict[str, Any]:
    return {
        "task_id": r.task_id,
        "mode": r.mode,
        "category": r.category,
        "passed": r.passed,
        "first_attempt_passed": r.first_attempt_passed,
        "verified": r.verified,
        "status": r.status,
        "iterations": r.iterations,
        "llm_calls": r.usage.calls,
        "wall_time": round(r.wall_time, 2),
        "outcome": r.verdict.outcome,
        "failing_assertion": r.verdict.failing_assertion,
        "error": r.error,
    }


def build_summary(
    *,
    settings: Settings,
    runs: Sequence[RunInfo],
    records: Sequence[TaskRecord],
    task_ids: Sequence[str],
) -> Summary:
    """Metrics over the latest record of each selected (task, mode)."""
    wanted = set(task_ids)
    latest = {r.key: r for r in records if r.task_id in wanted and r.mode in settings.modes}
    order = {t: i for i, t in enumerate(task_ids)}
    chosen = sorted(latest.values(), key=lambda r: (order[r.task_id], settings.modes.index(r.mode)))
    baseline = settings.modes[0]
    comparisons = [compare(chosen, baseline, m) for m in settings.modes[1:]]
    for m in settings.modes:
        mode, n = split_mode(m)
        first = f"{mode}:1"
        if n > 1 and first in settings.modes and first != baseline:
            comparisons.append(compare(chosen, first, m))
    memory_modes = [m for m in settings.modes if ":" in m]
    return Summary(
        settings=settings,
        runs=tuple(runs),
        tasks_selected=len(task_ids),
        metrics={m: summarise(chosen, m) for m in settings.modes},
        comparisons=tuple(comparisons),
        memory=tuple(memory_use(chosen, m) for m in memory_modes),
        paired=tuple(p for m in settings.modes if (p := paired_use(chosen, m)) is not None),
        asking=tuple(g for m in settings.modes if (g := ask_gain(chosen, m)) is not None),
        complete=len(latest) == len(task_ids) * len(settings.modes),
        tasks=tuple(_compact(r) for r in chosen),
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render_markdown(summary: Summary) -> str:
    """The Markdown report."""
    s = summary.settings
    last = summary.runs[-1] if summary.runs else None
    lines = [
        f"# Benchmark: {s.suite} with `{s.model}`",
        "",
    ]
    if not summary.complete:
        done = max((m.tasks for m in summary.metrics.values()), default=0)
        lines += [
            f"**Partial results**: {done} of {summary.tasks_selected} tasks finished so far.",
            "",
        ]
    lines += [
        "| mode | tasks | pass@1 | first attempt | healed | broken | self-reported verified | "
        "false success | false failure | mean iterations | mean LLM calls | "
        "prompt tok (cached) | completion tok | tok per right answer | mean s/task | "
        "median s/task | harness errors | leaks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in summary.metrics.values():
        # records from before cached tokens were kept say 0: show the count only when known
        cached = f" ({m.cached_tokens})" if m.cached_tokens else ""
        per_pass = "-" if m.tokens_per_pass is None else f"{m.tokens_per_pass:.0f}"
        lines.append(
            f"| {m.mode} | {m.tasks} | {m.passed} ({_pct(m.pass_at_1)}) | "
            f"{m.first_attempt_passed} ({_pct(m.first_attempt_rate)}) | {m.healed} | {m.broken} | "
            f"{m.verified} | {m.false_success} | {m.false_failure} | {m.mean_iterations:.2f} | "
            f"{m.mean_llm_calls:.1f} | {m.prompt_tokens}{cached} | {m.completion_tokens} | "
            f"{per_pass} | "
            f"{m.mean_wall_time:.1f} | {m.median_wall_time:.1f} | {m.harness_errors} | {m.leaks} |"
        )
    warm = [f"{m.warm_starts} of `{m.mode}`" for m in summary.metrics.values() if m.warm_starts]
    if warm:
        lines += [
            "",
            f"Not cold: the first model call of {', '.join(warm)} run(s) found prompt tokens "
            "already cached, processed before the run began (the runner's cold start, "
            "`LocalProvider.forget_prompts`, restarts a server it supervises and reaches no "
            "other; before it restarted it, it erased only the slots): compare these modes' "
            "times with care.",
        ]
    for m in summary.metrics.values():
        if m.disputed:
            lines += [
                "",
                f"`{m.mode}` gave up on {m.gave_up} task(s); on {m.disputed} of them the final code "
                "passed every trusted test (the spec's examples) and only model-written tests "
                f"failed — a dispute between the code and the model's own tests; "
                f"{m.disputed_passed} of those {m.disputed} pass the reference tests.",
            ]
    if summary.comparisons:
        lines += ["", "Paired comparisons (same tasks):", ""]
        for c in summary.comparisons:
            gained = ", ".join(c.gained) or "none"
            lost = ", ".join(c.lost) or "none"
            lines.append(
                f"- `{c.mode}` vs `{c.baseline}` on {c.tasks} tasks: both pass {c.both}, "
                f"gained {len(c.gained)} ({gained}), lost {len(c.lost)} ({lost}), "
                f"neither {c.neither}."
            )
    if summary.memory:
        lines += ["", "Memory across runs (each pass in order, one memory that starts empty):", ""]
        for u in summary.memory:
            lines.append(
                f"- `{u.mode}`: remembered lessons went into the prompts on {u.lessons} of "
                f"{u.tasks} task(s); a remembered verified solution joined the first round on "
                f"{u.solutions} and was the chosen candidate on {u.chosen} (passing the "
                f"reference tests on {u.chosen_passed} of those)."
            )
    if summary.paired:
        lines += [
            "",
            "Paired modes (`--paired`: each continued its base mode's run of the task from "
            "where its switch first mattered; the tasks where it never did repeat the base's "
            "result):",
            "",
        ]
        for p in summary.paired:
            where = ", ".join(f"{n} at {node}" for node, n in sorted(p.at_nodes.items()))
            own = f"; {p.unpaired} ran on their own (no base run log)" if p.unpaired else ""
            lines.append(
                f"- `{p.mode}` from `{p.base}`: parted on {p.diverged} of {p.tasks} task(s)"
                + (f" ({where})" if where else "")
                + f"; on those it passes {p.passed} and `{p.base}` {p.base_passed}, "
                f"{p.extra_seconds:+.1f} s a task{own}."
            )
    if summary.asking:
        lines += ["", *ask_table(summary.asking)]
    categories = sorted({c for m in summary.metrics.values() for c in m.by_category})
    if len(categories) > 1:
        lines += ["", "Pass@1 by category:", ""]
        lines.append("| category | " + " | ".join(summary.metrics) + " |")
        lines.append("|---|" + "---:|" * len(summary.metrics))
        for cat in categories:
            cells = []
            for metrics in summary.metrics.values():
                cm = metrics.by_category.get(cat)
                cells.append(f"{cm.passed}/{cm.tasks}" if cm else "-")
            lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    if summary.tasks:
        lines += ["", "<details><summary>Per task</summary>", ""]
        lines.append(
            "| task | mode | reference | status | iterations | failing reference assertion / error |"
        )
        lines.append("|---|---|---|---|---:|---|")
        for t in summary.tasks:
            why = t["error"] or t["failing_assertion"] or ("" if t["passed"] else t["outcome"])
            why = str(why).replace("|", "\\|").replace("\n", " ")[:120]
            mark = "pass" if t["passed"] else "FAIL"
            lines.append(
                f"| {t['task_id']} | {t['mode']} | {mark} | {t['status']} | {t['iterations']} | {why} |"
            )
        lines += ["", "</details>"]
    lines += [
        "",
        "Definitions: *pass@1* = final code passes the hidden reference tests (temperature "
        f"{s.temperature}, one run per task); *first attempt* = the first generated code "
        "passes them; *healed* = first attempt failed, final passed; *broken* = first "
        "attempt passed, final failed; *false success* = the agent reported `verified` but "
        "the reference tests fail; *false failure* = the agent gave up (`failed`/`exhausted`) "
        "but the reference tests pass; *leaks* = runs where a reference assertion was found "
        "in a message sent to the model.",
    ]
    if last is not None:
        hw = last.hardware
        model = last.model
        lines += ["", "Invocations (the first run, then each `--resume`):", ""]
        for run in summary.runs:
            dirty = " (dirty work tree)" if run.git_dirty else ""
            lines.append(f"- {run.date}, commit `{run.git_commit}`{dirty}: `{run.command}`")
        lines += [
            "",
            f"Model: `{model.id}`"
            + (f", file `{Path(model.file).name}`" if model.file else "")
            + (f", quantization {model.quantization}" if model.quantization else "")
            + (f", sha256 `{model.sha256}`" if model.sha256 else "")
            + "  ",
            f"Hardware: {hw.cpu_model}, {hw.logical_cores} logical cores, {hw.ram_gib} GiB RAM, "
            f"GPU: {hw.gpu}",
        ]
    return "\n".join(lines) + "\n"


def _charts(summary: Summary, records: Sequence[TaskRecord], out: Path) -> list[Path]:
    try:
        import matplotlib
    except ImportError:
        print(
            "Charts skipped: matplotlib is not installed. For pass_rate.png and "
            'iterations.png: pip install "selfheal[eval]"',
            file=sys.stderr,
        )
        return []

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    metrics = list(summary.metrics.values())
    x = range(len(metrics))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(metrics) + 2), 5.0))
    width = 0.38
    first = [100 * m.first_attempt_rate for m in metrics]
    final = [100 * m.pass_at_1 for m in metrics]
    false_s = [100 * m.false_success / m.tasks if m.tasks else 0.0 for m in metrics]
    ax.bar([i - width / 2 for i in x], first, width, label="first attempt passes", color="#9db4d0")
    ax.bar([i + width / 2 for i in x], final, width, label="pass@1 (final code)", color="#2f6db5")
    ax.bar(
        [i + width / 2 for i in x],
        false_s,
        width,
        bottom=final,
        label="false success (claimed, fails reference)",
        color="#d9534f",
        hatch="//",
        edgecolor="white",
    )
    for i in range(len(metrics)):
        ax.text(
            i + width / 2, final[i] + false_s[i] + 1, f"{final[i]:.0f}%", ha="center", fontsize=9
        )
    ax.set_xticks(list(x), [f"{m.mode}\n(n={m.tasks})" for m in metrics])
    ax.set_ylabel("% of tasks")
    ax.set_ylim(0, 110)
    ax.set_title(f"{summary.settings.suite} with {summary.settings.model}: reference pass rate")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    fig.tight_layout()
    path = out / "pass_rate.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    most = max((r.iterations for r in records), default=1)
    bins = [b + 0.5 for b in range(0, max(most, 1) + 1)]
    plotted = False
    for mode in summary.settings.modes:
        its = [r.iterations for r in records if r.mode == mode]
        if its:
            ax.hist(its, bins=bins, alpha=0.6, label=mode)
            plotted = True
    ax.set_xlabel("code versions (iterations) per task")
    ax.set_ylabel("tasks")
    ax.set_title("Iterations per task")
    if plotted:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "iterations.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    return written


def write_reports(summary: Summary, records: Sequence[TaskRecord], out: Path) -> list[Path]:
    """Write results.json, results.md and the charts into ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "results.json"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    tmp.replace(json_path)
    md_path = out / "results.md"
    md_path.write_text(render_markdown(summary), encoding="utf-8")
    wanted = {(t["task_id"], t["mode"]) for t in summary.tasks}
    latest = {r.key: r for r in records if r.key in wanted}
    charts = _charts(summary, list(latest.values()), out)
    return [json_path, md_path, *charts]
