"""Would the spec oracle, asked about the consensus, have caught the false successes? A replay
on a results folder, for the one target of issue 13 agreement misses (``verified`` wrong at
most 2% of the time).

    PYTHONPATH=. python -m evaluation.judge evaluation/results/humaneval164-r4 --model local --probes 4

For every run of ``--mode`` that is verified under the agreement rule, the first ``--probes``
probe inputs of the run (as ``evaluation.population`` rebuilds them: ``selfheal.probes``) are
put to the spec oracle (the model, shown only the spec: ``selfheal.roles.oracle``, its prompt
and its parsing, asked at once as a run asks it). Its answers are compared with the chosen
code's outputs on those inputs and, after the fact, with the canonical solution's. It prints:

* the oracle's own accuracy on these inputs (against the canonical solution), and how often it
  gave no usable answer;
* for the first k inputs (k up to ``--probes``) and a threshold m (1 or 2): a rule "verified
  only when the oracle contradicts the chosen outputs on fewer than m of them" keeps how many
  verified runs, how many of them are wrong, how many right ones it would leave unverified and
  which wrong ones it catches;
* what it cost: model seconds per verified run.

``--again`` instead puts the questions the runs themselves asked the oracle (ties between
clusters, a lone candidate's failing model test; read from the kept timelines) to the oracle
as it is now, and compares both sets of answers with the canonical solution's outputs: how a
change to the oracle moves its accuracy on the same questions.

The oracle's answers are kept in ``judge.jsonl`` beside the results (one line per run,
appended as each is asked), so an interrupted replay continues where it stopped and a second
report asks nothing. The agent never sees the canonical outputs: they only score the replay.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence

from evaluation.population import agreed, outputs_on, probe_calls
from evaluation.records import TaskRecord
from evaluation.results_file import folder_command, reporting_errors, results_in
from evaluation.suites import Task, get_suite
from selfheal.agreement import canonical_literal
from selfheal.config import HealConfig
from selfheal.kernel_sandbox.types import Executor
from selfheal.records import Record
from selfheal.spec import parse_spec
from selfheal.state import HealState

__all__ = ["Judged", "ask_again", "asked_before", "judge_one", "judge_report"]


class Judged(Record):
    """One verified run put to the oracle: a line of ``judge.jsonl``."""

    task_id: str
    """The task."""
    mode: str
    """The mode of the run."""
    passed: bool
    """Whether the run's final code passes the reference tests."""
    limit: int
    """How many probe inputs were asked for (``calls`` has fewer when the run had fewer)."""
    calls: tuple[str, ...]
    """The probe inputs asked about, in the order the run plans them."""
    chosen: tuple[str | None, ...]
    """The chosen code's canonical output on each (None: no output)."""
    reference: tuple[str | None, ...]
    """The canonical solution's output on each (scoring only)."""
    oracle: tuple[str, ...]
    """The oracle's answer on each, as it wrote it (``""``: no usable answer)."""
    seconds: float
    """Wall time of the oracle's answers."""

    def contradictions(self, first: int | None = None) -> int:
        """Inputs (of the ``first`` ones; all by default) where the oracle gave a literal and
        the chosen code returned another."""
        return sum(
            1
            for got, said in zip(self.chosen[:first], self.oracle[:first], strict=True)
            if (want := canonical_literal(said) if said else None) is not None
            and got is not None
            and want != got
        )


def _ask(task: Task, calls: Sequence[str], executor: Executor, provider: object) -> dict[str, str]:
    """The spec oracle's answers to ``calls`` about ``task``'s spec, asked as a run asks them."""
    from selfheal.context import Context, FixedRouter
    from selfheal.llm import run_sync
    from selfheal.roles.oracle import aanswers

    if not calls:
        return {}
    state = HealState(
        spec=parse_spec(task.prompt, entry_point=task.entry_point),
        config=HealConfig(temperature=0.0, memory=False),
    )
    ctx = Context(llm=FixedRouter(provider), executor=executor)  # type: ignore[arg-type]
    return run_sync(aanswers(state, ctx, calls))


def judge_one(
    record: TaskRecord, task: Task, limit: int, executor: Executor, provider: object
) -> Judged:
    """Ask the oracle about one verified run's first ``limit`` probe inputs."""
    calls = probe_calls(record, task)[:limit]
    chosen = outputs_on(record.code or "", calls, executor)
    reference = outputs_on(task.canonical_solution or "", calls, executor)
    t0 = time.monotonic()
    answers = _ask(task, calls, executor, provider)
    seconds = time.monotonic() - t0
    return Judged(
        task_id=record.task_id,
        mode=record.mode,
        passed=record.passed,
        limit=limit,
        calls=tuple(calls),
        chosen=tuple(chosen),
        reference=tuple(reference),
        oracle=tuple(answers.get(c, "") for c in calls),
        seconds=round(seconds, 2),
    )


_QUESTION = re.compile(r"what does `(.+?)` return\?", re.DOTALL)


def asked_before(record: TaskRecord) -> list[tuple[str, str]]:
    """The oracle questions ``record``'s run asked, as ``(call, value as answered)`` (``""``
    when the reply held no value), in order, each once; read from its kept timeline."""
    out: dict[str, str] = {}
    for event in record.timeline:
        messages = event.get("messages") or []
        if event.get("kind") != "llm" or not messages:
            continue
        found = _QUESTION.search(str(messages[-1].get("content", "")))
        if found is None or found.group(1) in out:
            continue
        try:
            value = str(json.loads(event.get("reply") or "").get("value", ""))
        except (ValueError, AttributeError):
            value = ""
        out[found.group(1)] = value
    return list(out.items())


def _accuracy(said: Sequence[str], reference: Sequence[str | None]) -> tuple[int, int]:
    """(usable literals, of them equal to the reference output)."""
    usable = right = 0
    for value, ref in zip(said, reference, strict=True):
        want = canonical_literal(value) if value else None
        if want is not None:
            usable += 1
            right += int(want == ref)
    return usable, right


def ask_again(records: Sequence[TaskRecord], tasks: dict[str, Task], provider: object) -> str:
    """The questions ``records``' runs asked the oracle, asked again; both sets of answers
    scored against the canonical solution (see the module docs)."""
    from selfheal.kernel_sandbox import KernelPool

    before: list[str] = []
    now: list[str] = []
    reference: list[str | None] = []
    with KernelPool(size=1) as pool:
        for r in records:
            asked = asked_before(r)
            if not asked or r.task_id not in tasks:
                continue
            task = tasks[r.task_id]
            calls = [c for c, _ in asked]
            again = _ask(task, calls, pool, provider)
            before += [v for _, v in asked]
            now += [again.get(c, "") for c in calls]
            reference += outputs_on(task.canonical_solution or "", calls, pool)
            print(f"{r.task_id} {r.mode}: {len(calls)} question(s)", file=sys.stderr)
    (u0, r0), (u1, r1) = _accuracy(before, reference), _accuracy(now, reference)
    n = len(reference)
    return (
        f"{n} oracle questions the runs asked\n\n"
        f"| answers | usable literal | equal to the canonical solution's output |\n"
        f"|---|---:|---:|\n"
        f"| as recorded | {u0} | {r0} ({100 * r0 / max(n, 1):.0f}% of all) |\n"
        f"| asked again now | {u1} | {r1} ({100 * r1 / max(n, 1):.0f}% of all) |"
    )


def judge_report(judged: Sequence[Judged], limit: int) -> str:
    """The markdown report of a replay (see the module docs)."""
    if not judged:
        return "No verified run to judge."
    said = [v for j in judged for v in j.oracle[:limit]]
    usable, right = _accuracy(said, [v for j in judged for v in j.reference[:limit]])
    asked = len(said)
    wrong_runs = [j for j in judged if not j.passed]
    lines = [
        f"{len(judged)} verified runs ({len(wrong_runs)} failing the reference), up to {limit} "
        f"probe inputs each, {asked} questions",
        "",
        f"- the oracle gave a usable literal on {usable} of {asked} "
        f"({100 * usable / max(asked, 1):.0f}%); of those, {right} "
        f"({100 * right / max(usable, 1):.0f}%) equal the canonical solution's output",
        f"- model seconds per verified run: {sum(j.seconds for j in judged) / len(judged):.1f} "
        f"(asking up to {max(j.limit for j in judged)} inputs at once)",
        "",
        "| oracle asked about the first | unverified when it contradicts the chosen outputs "
        "on at least | verified kept | of them wrong | right ones left unverified | wrong ones "
        "caught |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for k in range(1, limit + 1):
        for m in range(1, min(k, 2) + 1):
            kept = [j for j in judged if j.contradictions(k) < m]
            wrong = [j.task_id.rsplit("/", 1)[-1] for j in kept if not j.passed]
            caught = [j.task_id.rsplit("/", 1)[-1] for j in wrong_runs if j.contradictions(k) >= m]
            lost = sum(1 for j in judged if j.passed and j.contradictions(k) >= m)
            share = 100 * len(wrong) / max(len(kept), 1)
            lines.append(
                f"| {k} | {m} | {len(kept)} | {len(wrong)} ({share:.1f}%) | {lost} | "
                f"{len(caught)}{': /' + ', /'.join(caught) if caught else ''} |"
            )
    return "\n".join(lines)


@reporting_errors
def main(argv: Sequence[str] | None = None) -> int:
    ap = folder_command("evaluation.judge", __doc__)
    ap.add_argument("--mode", default="heal", help="the mode whose verified runs are judged")
    ap.add_argument("--model", default="local", help="the oracle's model (default local)")
    ap.add_argument("--probes", type=int, default=4, help="probe inputs asked per run (4)")
    ap.add_argument("--report-only", action="store_true", help="ask nothing, report judge.jsonl")
    ap.add_argument(
        "--again", action="store_true", help="ask the questions the runs asked again, compare"
    )
    args = ap.parse_args(argv)
    if args.probes < 1:
        print("error: --probes must be at least 1.", file=sys.stderr)
        return 2
    every = [r for r in results_in(args.results).latest().values() if r.mode == args.mode]
    if args.again:
        from selfheal.llm.router import resolve_provider

        suites = {r.suite for r in every}
        tasks = {t.id: t for name in suites for t in get_suite(name).tasks()}
        print(ask_again(every, tasks, resolve_provider(args.model)))
        return 0
    records = [r for r in every if r.candidates and agreed(r, HealConfig().selection.agreement)]
    path = args.results / "judge.jsonl"
    done: dict[str, Judged] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            j = Judged.model_validate_json(line)
            if j.mode == args.mode and j.limit >= args.probes:
                done[j.task_id] = j
    # the runs that fail the reference first: a replay stopped early has already asked about
    # every false success, and the right runs it has asked about are the ones it reports on
    todo = sorted((r for r in records if r.task_id not in done), key=lambda r: r.passed)
    if todo and not args.report_only:
        from selfheal.kernel_sandbox import KernelPool
        from selfheal.llm.router import resolve_provider

        tasks = {t.id: t for name in {r.suite for r in todo} for t in get_suite(name).tasks()}
        provider = resolve_provider(args.model)
        with KernelPool(size=1) as pool, path.open("a") as out:
            for i, r in enumerate(todo, start=1):
                j = judge_one(r, tasks[r.task_id], args.probes, pool, provider)
                out.write(j.model_dump_json() + "\n")
                out.flush()
                done[r.task_id] = j
                print(f"[{i}/{len(todo)}] {r.task_id}: {j.seconds} s", file=sys.stderr)
    judged = [done[r.task_id] for r in records if r.task_id in done]
    print(judge_report(judged, args.probes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
