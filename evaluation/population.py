"""What the populations held: every candidate of a results file's runs scored against the
reference tests after the fact, to say where right answers came from and how often one was in
the population but not chosen.

    PYTHONPATH=. python -m evaluation.population evaluation/results/humaneval164-r3 [--modes heal]

The agent never sees these scores: they are computed here, after the run, in the same scoring
sandbox as ``passed`` (:func:`evaluation.scoring.score`). Scores are kept in
``population.json`` beside the results (keyed by task and the candidate's code), so a second
report re-scores nothing. For each mode with candidates it prints:

* tasks passed, and tasks failed although some candidate passed the reference (a *selection
  miss*: the tournament chose another), with their ids;
* for the passed tasks, which kind of candidate was the first right one (``greedy``,
  ``sample``, a repair strategy, ``remembered``): what each part of the loop contributed;
* how many candidates a run made, and how many of them were right;
* the runs with a right candidate (the population ceiling), and for each draw (how a candidate
  was asked for: origin, prompt form, temperature, e.g. ``sample/complete/0.6``) the runs with
  a right candidate of that draw, and those only that draw got right (``heal-mixed`` against
  ``heal``: which forms and temperatures reach which problems);
* the ``verified`` results, and those failing the reference (false successes), as recorded and
  under the agreement rule (``HealConfig.agreement``, ``--agreement K``): a record counts as
  verified only when its chosen behaviour was shared by at least K candidates (a remembered one
  counts twice). It is computed from the recorded evidence, so records made before the rule
  existed show what it would have said (the rule only decides the final status; nothing before
  it changes);
* a stricter status rule, computed the same way: the chosen behaviour held by a majority of
  all the candidates a run made, not only of those that pass the trusted tests;
* for those false successes, how many a probe input could have exposed: the chosen code and
  the task's canonical solution are run on the probes the run had (as the spec and the run's
  tests give them, ``selfheal.probes``), and a probe *separates* them when their outputs
  differ. A false success no probe separates is invisible to any rule that compares
  behaviour on these inputs.

With more than one mode, the modes taken together (:func:`pooled`): on the tasks every one of
them ran, those some mode passed, those some mode's population reached, and for each mode those
it alone reached (the single shot in each prompt form: which form reaches what the others miss).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evaluation.records import TaskRecord
from evaluation.results_file import folder_command, reporting_errors, results_in
from evaluation.scoring import score
from evaluation.suites import Task, get_suite
from selfheal.agreement import outputs_of
from selfheal.config import HealConfig, flat_settings
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm import run_sync
from selfheal.probes import planned_probes, probe_call
from selfheal.spec import parse_spec
from selfheal.state import TestCase

__all__ = [
    "PopulationReport",
    "agreed",
    "draw",
    "pooled",
    "population_report",
    "score_populations",
    "outputs_on",
    "probe_calls",
    "separating_probes",
]

Scores = dict[str, bool]
"""``"<task id>|<sha256 of the code>"`` -> passed the reference tests."""


def _key(task_id: str, code: str) -> str:
    return f"{task_id}|{hashlib.sha256(code.encode()).hexdigest()[:16]}"


def score_populations(
    records: Sequence[TaskRecord],
    tasks: dict[str, Task],
    executor: Executor,
    cache: Scores | None = None,
    on_score: Callable[[], None] | None = None,
) -> Scores:
    """Every distinct candidate of ``records`` scored against its task's reference tests
    (``cache`` holds scores already known; it is updated and returned)."""
    scores: Scores = dict(cache or {})
    for record in records:
        task = tasks.get(record.task_id)
        if task is None:
            continue
        for candidate in record.candidates:
            code = str(candidate.get("code") or "")
            key = _key(record.task_id, code)
            if key not in scores:
                scores[key] = bool(code) and score(task, code, executor).passed
                if on_score is not None:
                    on_score()
    return scores


def probe_calls(record: TaskRecord, task: Task) -> list[str]:
    """The probe inputs of ``record``'s run, in the order the run planned them (rebuilt from the
    spec and the run's model-written tests, as ``selfheal.probes`` plans them)."""
    spec = parse_spec(task.prompt, entry_point=task.entry_point)
    tests = [
        TestCase(id=t.id, origin="spec_blind", code=t.code) for t in record.tests if not t.trusted
    ]
    limit = int(flat_settings(record.config).get("max_probes") or HealConfig().tests.max_probes)
    return list(dict.fromkeys(call for call, _ in planned_probes(spec, tests, limit)))


def outputs_on(code: str, calls: Sequence[str], executor: Executor) -> list[str | None]:
    """``code``'s canonical output on each call (None where it gave none), in the sandbox."""
    probes = [probe_call(f"p{i}", call) for i, call in enumerate(calls)]
    ids = [p.id for p in probes]
    out = outputs_of(run_sync(executor.arun(code, probes)), ids)
    return [out.get(i) for i in ids]


def separating_probes(record: TaskRecord, task: Task, executor: Executor) -> list[str]:
    """The probe inputs of ``record``'s run on which its final code and ``task``'s canonical
    solution give different outputs (``[]`` when none does, or without a canonical solution)."""
    if not (record.code and task.canonical_solution):
        return []
    calls = probe_calls(record, task)
    chosen = outputs_on(record.code, calls, executor)
    right = outputs_on(task.canonical_solution, calls, executor)
    return [call for call, a, b in zip(calls, chosen, right, strict=True) if a != b]


def agreed(record: TaskRecord, agreement: int) -> bool:
    """``record`` is verified and at least ``agreement`` candidates shared the chosen behaviour
    (its evidence's ``chosen_cluster``; a remembered candidate in that cluster counts twice)."""
    if record.status != "verified":
        return False
    size = int((record.evidence or {}).get("chosen_cluster") or 0)
    remembered = sum(
        1 for c in record.candidates if c.get("cluster") == 0 and c.get("origin") == "memory"
    )
    return size + remembered >= agreement


def _majority_of_all(record: TaskRecord) -> bool:
    """More than half of all the candidates the run made share the chosen behaviour (a status
    rule stricter than the agreement rule, computed from the evidence)."""
    ev = record.evidence or {}
    return 2 * int(ev.get("chosen_cluster") or 0) > int(ev.get("candidates") or 0)


class PopulationReport:
    """The population figures of one mode (see the module docs)."""

    def __init__(
        self,
        mode: str,
        records: Sequence[TaskRecord],
        scores: Scores,
        agreement: int = 2,
        separated: dict[str, list[str]] | None = None,
    ) -> None:
        self.mode = mode
        self.separated = separated or {}
        """False success (agreement rule) -> the probes that separate it from the reference."""
        self.agreement = agreement
        self.false_success = [r.task_id for r in records if r.status == "verified" and not r.passed]
        """Verified as recorded, failing the reference tests."""
        self.verified = sum(1 for r in records if r.status == "verified")
        by_rule = [r for r in records if agreed(r, agreement)]
        self.verified_agreed = len(by_rule)
        """Verified under the agreement rule."""
        self.false_agreed = [r.task_id for r in by_rule if not r.passed]
        """Verified under the agreement rule, failing the reference tests."""
        stricter = [r for r in by_rule if _majority_of_all(r)]
        self.verified_all = len(stricter)
        """Of those, the ones whose chosen behaviour a majority of all candidates shares."""
        self.false_all = [r.task_id for r in stricter if not r.passed]
        """Of those, the ones failing the reference tests."""
        self.runs = len(records)
        self.tasks = [r.task_id for r in records]
        """The tasks the mode ran."""
        self.passed = [r.task_id for r in records if r.passed]
        self.misses: list[str] = []
        """Failed although a candidate passed the reference tests."""
        self.none_right: list[str] = []
        """Failed with no candidate that passes them."""
        self.first_right: Counter[str] = Counter()
        """Passed runs by the origin of their first right candidate."""
        self.reached: list[str] = []
        """Runs with a right candidate, chosen or not (the population ceiling)."""
        self.right_by_draw: Counter[str] = Counter()
        """Runs with a right candidate of each :func:`draw` (one count per run and draw)."""
        self.only_by_draw: Counter[str] = Counter()
        """Runs whose right candidates all came from one draw, by that draw."""
        self.candidates = 0
        self.right = 0
        for r in records:
            right = [
                c for c in r.candidates if scores.get(_key(r.task_id, str(c.get("code") or "")))
            ]
            self.candidates += len(r.candidates)
            self.right += len(right)
            draws = {draw(c) for c in right}
            self.right_by_draw.update(draws)
            if len(draws) == 1:
                self.only_by_draw.update(draws)
            if right:
                self.reached.append(r.task_id)
            if not r.passed:
                (self.misses if right else self.none_right).append(r.task_id)
            elif right:
                self.first_right[str(right[0].get("origin") or "?")] += 1

    def markdown(self) -> str:
        runs = max(1, self.runs)
        origins = ", ".join(f"{o} {n}" for o, n in self.first_right.most_common()) or "none"
        by_draw = ", ".join(
            f"{d} {n}" + (f" ({self.only_by_draw[d]} only it)" if self.only_by_draw[d] else "")
            for d, n in sorted(self.right_by_draw.items())
        )
        return "\n".join(
            [
                f"### `{self.mode}`: {self.runs} runs, {len(self.passed)} passed",
                "",
                f"- candidates per run: {self.candidates / runs:.1f} on average, "
                f"{self.right / runs:.1f} of them right (pass the reference tests)",
                f"- failed although a candidate was right (selection misses): {len(self.misses)}"
                + (f" ({', '.join(self.misses)})" if self.misses else ""),
                f"- failed with no right candidate: {len(self.none_right)}",
                f"- the first right candidate of each passed run, by origin: {origins}",
                f"- runs with a right candidate (the population ceiling): {len(self.reached)}",
                "- runs with a right candidate from each draw (origin/form/temperature; in "
                f"brackets, the runs only that draw got right): {by_draw or 'none'}",
                f"- verified as recorded: {self.verified}, failing the reference: "
                + _ids(self.false_success, self.verified),
                f"- verified with at least {self.agreement} agreeing candidates: "
                f"{self.verified_agreed}, failing the reference: "
                + _ids(self.false_agreed, self.verified_agreed),
                "- of those, a probe input separates the chosen code from the reference on "
                + _ids(
                    [t for t in self.false_agreed if self.separated.get(t)], len(self.false_agreed)
                )
                + "; the others behave like the reference on every probe the run had",
                "- of those, the chosen behaviour also held by a majority of all the candidates "
                f"(not only of those passing the trusted tests): {self.verified_all}, failing the "
                "reference: " + _ids(self.false_all, self.verified_all),
            ]
        )


def draw(candidate: Mapping[str, Any]) -> str:
    """How a recorded candidate was asked for: ``origin/form/temperature``
    (``sample/complete/0.6``); ``?`` for a form a record made before forms were recorded does
    not say."""
    temperature = candidate.get("temperature")
    shown = f"{float(temperature):g}" if isinstance(temperature, int | float) else "?"
    return f"{candidate.get('origin') or '?'}/{candidate.get('form') or '?'}/{shown}"


def pooled(reports: Sequence[PopulationReport]) -> str:
    """Several modes' reports taken together, on the tasks every one of them ran: the tasks
    some mode passed, those some mode's population reached (a right candidate, chosen or not),
    and for each mode those it alone reached: which prompt form's single shot, or which
    population, reaches problems the others miss (``single_shot-complete``,
    ``single_shot-instruct``, ``single_shot-script``: the union of their pass sets is what a
    population of their three greedy answers could reach)."""
    common = set.intersection(*(set(r.tasks) for r in reports)) if reports else set()
    reached = {r.mode: set(r.reached) & common for r in reports}
    passed = set().union(*(set(r.passed) & common for r in reports))
    alone = {
        mode: sorted(tasks - set().union(*(t for m, t in reached.items() if m != mode)), key=_order)
        for mode, tasks in reached.items()
    }
    modes = ", ".join(f"`{r.mode}`" for r in reports)
    return "\n".join(
        [
            f"### Pooled over {modes} (the {len(common)} tasks every one of them ran)",
            "",
            f"- passed by some mode: {len(passed)}",
            f"- a right candidate in some mode (the pooled ceiling): "
            f"{len(set().union(*reached.values()))}",
            "- reached by one mode alone: "
            + "; ".join(f"`{m}` {_ids(ids, 0)}" for m, ids in alone.items()),
        ]
    )


def _order(task: str) -> tuple[str, int, str]:
    """``HumanEval/9`` before ``HumanEval/10``."""
    head, _, tail = task.rpartition("/")
    return (head, int(tail), "") if tail.isdigit() else (head, -1, tail)


def _ids(ids: Sequence[str], whole: int) -> str:
    share = f" ({100 * len(ids) / whole:.1f}%)" if whole else ""
    return f"{len(ids)}{share}" + (f": {', '.join(ids)}" if ids else "")


def population_report(
    records: Sequence[TaskRecord],
    scores: Scores,
    agreement: int = 2,
    separated: dict[tuple[str, str], list[str]] | None = None,
) -> list[PopulationReport]:
    """One :class:`PopulationReport` per mode whose records hold candidates; ``separated``:
    (mode, task id) -> the separating probes of its false successes."""
    by_mode: dict[str, list[TaskRecord]] = {}
    for r in records:
        if r.candidates:
            by_mode.setdefault(r.mode, []).append(r)
    sep = separated or {}
    return [
        PopulationReport(
            mode, rs, scores, agreement, {t: p for (m, t), p in sep.items() if m == mode}
        )
        for mode, rs in by_mode.items()
    ]


@reporting_errors
def main(argv: Sequence[str] | None = None) -> int:
    ap = folder_command("evaluation.population", __doc__)
    ap.add_argument("--modes", default="", help="comma-separated modes (default: every mode)")
    ap.add_argument(
        "--agreement",
        type=int,
        default=HealConfig().selection.agreement,
        help="agreeing candidates the rule asks for (default: HealConfig's)",
    )
    args = ap.parse_args(argv)
    if args.agreement < 1:
        print("error: --agreement must be at least 1.", file=sys.stderr)
        return 2
    records = list(results_in(args.results).latest().values())
    wanted = {m for m in args.modes.split(",") if m}
    if wanted:
        records = [r for r in records if r.mode in wanted]
    suites = {r.suite for r in records}
    tasks = {t.id: t for name in suites for t in get_suite(name).tasks()}
    cache_path = args.results / "population.json"
    cache: Scores = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    from selfheal.kernel_sandbox import KernelPool

    with KernelPool(size=1) as pool:
        scores = score_populations(records, tasks, pool, cache)
        separated = {
            (r.mode, r.task_id): separating_probes(r, tasks[r.task_id], pool)
            for r in records
            if r.candidates and agreed(r, args.agreement) and not r.passed and r.task_id in tasks
        }
    cache_path.write_text(json.dumps(scores, indent=0, sort_keys=True) + "\n")
    reports = population_report(records, scores, args.agreement, separated)
    for report in reports:
        print(report.markdown() + "\n")
    if len(reports) > 1:
        print(pooled(reports) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
