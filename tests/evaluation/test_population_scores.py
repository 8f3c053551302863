"""evaluation/population.py: every candidate of a run scored against the reference tests after
the fact (real sandbox), selection misses and the origin of the first right candidate, scores
cached beside the results, and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evaluation.pair import error_record
from evaluation.population import (
    PopulationReport,
    draw,
    pooled,
    population_report,
    score_populations,
    separating_probes,
)
from evaluation.records import TaskRecord
from evaluation.results_file import ResultsFile
from evaluation.suites import HumanEvalSuite, Task
from selfheal.config import HealConfig
from selfheal.kernel_sandbox import KernelPool

ROOT = Path(__file__).resolve().parents[2]
WRONG = "def {name}(*args, **kwargs):\n    return None\n"


def record(task: Task, passed: bool, *origins_right: tuple[str, bool]) -> TaskRecord:
    """A heal record of ``task`` whose candidates have these origins, right or wrong."""
    base = error_record(task, "heal", HealConfig(), "mock:x", "")
    candidates = tuple(
        {
            "id": f"c{i + 1}",
            "origin": origin,
            "code": task.canonical_solution if right else WRONG.format(name=task.entry_point),
        }
        for i, (origin, right) in enumerate(origins_right)
    )
    return base.model_copy(
        update={"passed": passed, "status": "verified", "error": "", "candidates": candidates}
    )


def test_misses_and_origins(builtin_tasks: list[Task], pool: KernelPool) -> None:
    a, b, c = builtin_tasks[:3]
    records = [
        record(a, True, ("greedy", False), ("sample", True)),  # a sample was the right one
        record(b, False, ("greedy", False), ("patch", True)),  # right one not chosen: a miss
        record(c, False, ("greedy", False)),  # nothing right
    ]
    calls: list[int] = []
    scores = score_populations(
        records, {t.id: t for t in builtin_tasks}, pool, on_score=lambda: calls.append(1)
    )
    assert len(calls) == 5 and sum(scores.values()) == 2
    (report,) = population_report(records, scores)
    assert report.misses == [b.id] and report.none_right == [c.id]
    assert dict(report.first_right) == {"sample": 1}
    assert (report.candidates, report.right) == (5, 2)
    text = report.markdown()
    assert "selection misses): 1 (" + b.id + ")" in text and "sample 1" in text
    # known scores are not computed again
    again = score_populations(records, {t.id: t for t in builtin_tasks}, pool, scores)
    assert again == scores and len(calls) == 5


def test_right_candidates_counted_by_the_draw_they_came_from(
    builtin_tasks: list[Task], pool: KernelPool
) -> None:
    """Issue 45 item 2: per run, which form and temperature produced a right candidate (the
    records keep both), and the runs only one draw got right; a record made before forms were
    recorded shows ``?``."""
    a, b, c = builtin_tasks[:3]
    drawn = [
        ("greedy", "complete", 0.0), ("greedy", "instruct", 0.0),
        ("sample", "complete", 0.6), ("sample", "instruct", 1.0),
    ]  # fmt: skip

    def mixed(task: Task, passed: bool, *right: bool) -> TaskRecord:
        r = record(task, passed, *[(o, ok) for (o, _, _), ok in zip(drawn, right, strict=True)])
        rows = [
            {**row, "form": form, "temperature": t}
            for row, (_, form, t) in zip(r.candidates, drawn, strict=True)
        ]
        return r.model_copy(update={"candidates": tuple(rows), "mode": "heal-mixed"})

    records = [
        mixed(a, True, True, False, True, False),  # complete, greedy and sampled
        mixed(b, False, False, False, False, True),  # only the hot instructed sample: a miss
        mixed(c, False, False, False, False, False),  # nothing right
    ]
    scores = score_populations(records, {t.id: t for t in builtin_tasks}, pool)
    (report,) = population_report(records, scores)
    assert report.reached == [a.id, b.id]
    assert dict(report.right_by_draw) == {
        "greedy/complete/0": 1, "sample/complete/0.6": 1, "sample/instruct/1": 1
    }  # fmt: skip
    assert dict(report.only_by_draw) == {"sample/instruct/1": 1}
    text = report.markdown()
    assert "(the population ceiling): 2" in text
    assert "sample/instruct/1 1 (1 only it)" in text
    old = record(a, True, ("greedy", True))
    assert draw(old.candidates[0]) == "greedy/?/?"


def test_heal_mixed_is_heal_with_its_samples_across_forms_and_temperatures() -> None:
    from evaluation.modes import config_for

    heal, mixed = config_for("heal").flat(), config_for("heal-mixed").flat()
    assert {k: v for k, v in mixed.items() if heal[k] != v} == {
        "population_forms": ("complete", "instruct"),
        "population_temperatures": (0.6, 1.0),
    }
    # the same mean temperature as heal's samples
    assert sum(mixed["population_temperatures"]) / 2 == heal["sample_temperature"]


def test_the_modes_pooled_say_what_each_alone_reaches(
    builtin_tasks: list[Task], pool: KernelPool
) -> None:
    """The single shot in each of the three forms on the same tasks: the tasks some form
    passed (the union of their pass sets), and the tasks only one form got right; a task one
    mode did not run is left out."""
    a, b, c, d = builtin_tasks[:4]

    def shot(mode: str, task: Task, right: bool) -> TaskRecord:
        return record(task, right, ("greedy", right)).model_copy(update={"mode": mode})

    records = [
        shot("single_shot-complete", a, True), shot("single_shot-complete", b, False),
        shot("single_shot-complete", c, False), shot("single_shot-complete", d, True),
        shot("single_shot-instruct", a, True), shot("single_shot-instruct", b, False),
        shot("single_shot-instruct", c, False),
        shot("single_shot-script", a, False), shot("single_shot-script", b, True),
        shot("single_shot-script", c, False),
    ]  # fmt: skip
    scores = score_populations(records, {t.id: t for t in builtin_tasks}, pool)
    text = pooled(population_report(records, scores))
    assert "(the 3 tasks every one of them ran)" in text
    assert "- passed by some mode: 2\n" in text
    assert "(the pooled ceiling): 2\n" in text
    assert (
        "- reached by one mode alone: `single_shot-complete` 0; `single_shot-instruct` 0; "
        f"`single_shot-script` 1: {b.id}"
    ) in text


def test_the_script_form_modes() -> None:
    """``single_shot-script`` is the single shot in the third form; ``heal-three-forms`` is
    ``heal`` whose round takes turns across the three forms."""
    from evaluation.modes import config_for, parse_modes

    single, script = config_for("single_shot").flat(), config_for("single_shot-script").flat()
    assert {k: v for k, v in script.items() if single[k] != v} == {"first_answer": "script"}
    heal, three = config_for("heal").flat(), config_for("heal-three-forms").flat()
    assert {k: v for k, v in three.items() if heal[k] != v} == {
        "population_forms": ("complete", "instruct", "script")
    }
    assert parse_modes("single_shot-complete,single_shot-instruct,single_shot-script") == (
        "single_shot-complete", "single_shot-instruct", "single_shot-script"
    )  # fmt: skip


def test_command_line_caches_the_scores(builtin_tasks: list[Task], tmp_path: Path) -> None:
    a = builtin_tasks[0]
    ResultsFile(tmp_path / "results.jsonl").append(
        record(a, True, ("greedy", True), ("sample", True))
    )
    cmd = [sys.executable, "-m", "evaluation.population", str(tmp_path)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "`heal`: 1 runs, 1 passed" in done.stdout and "greedy 1" in done.stdout
    assert list(json.loads((tmp_path / "population.json").read_text()).values()) == [True]
    missing = subprocess.run(
        [*cmd[:-1], str(tmp_path / "nothing")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_false_successes_under_the_agreement_rule(builtin_tasks: list[Task]) -> None:
    a, b, c, d = builtin_tasks[:4]

    def verified(task: Task, passed: bool, chosen: int, *origins: str) -> TaskRecord:
        base = record(task, passed, *((o, passed) for o in origins))
        candidates = tuple({**cand, "cluster": 0} for cand in base.candidates)
        return base.model_copy(
            update={"evidence": {"chosen_cluster": chosen}, "candidates": candidates}
        )

    records = [
        verified(a, True, 2, "greedy", "sample"),  # two agree, right
        verified(b, False, 1, "patch"),  # a lone winner, wrong: the rule drops it
        verified(c, False, 2, "greedy", "sample"),  # two agree on a wrong behaviour
        verified(d, True, 1, "memory"),  # a remembered solution counts twice
    ]
    (report,) = population_report(records, {}, agreement=2)
    assert report.verified == 4 and report.false_success == [b.id, c.id]
    assert report.verified_agreed == 3 and report.false_agreed == [c.id]
    text = report.markdown()
    assert f"verified as recorded: 4, failing the reference: 2 (50.0%): {b.id}, {c.id}" in text
    assert f"at least 2 agreeing candidates: 3, failing the reference: 1 (33.3%): {c.id}" in text
    (lenient,) = population_report(records, {}, agreement=1)
    assert lenient.verified_agreed == 4
    (strict,) = population_report(records, {}, agreement=3)
    assert strict.verified_agreed == 0 and strict.false_agreed == []


def test_separating_probes_of_a_false_success(pool: KernelPool) -> None:
    """HumanEval/157: ``a**2 + b**2 == c**2`` passes the examples and is wrong when the
    hypotenuse is not last; the mutations of ``(3, 4, 5)`` never move it, so no probe of the
    run separates it from the reference. A wrong answer on an example's own neighbours is
    separated."""
    tasks = {t.id: t for t in HumanEvalSuite().tasks()}
    task = tasks["HumanEval/157"]
    code = "def right_angle_triangle(a, b, c):\n    return a**2 + b**2 == c**2\n"
    base = error_record(task, "heal", HealConfig(), "mock:x", "")
    consensus = base.model_copy(update={"code": code, "passed": False, "status": "verified"})
    assert separating_probes(consensus, task, pool) == []
    always = "def right_angle_triangle(a, b, c):\n    return a == 3\n"
    shown = consensus.model_copy(update={"code": always})
    assert separating_probes(shown, task, pool)  # some mutation of (3, 4, 5) tells them apart
    report = PopulationReport("heal", [consensus], {}, separated={task.id: []})
    assert "separates the chosen code from the reference on 0" in report.markdown()


def test_the_stricter_rule_needs_a_majority_of_all_candidates(builtin_tasks: list[Task]) -> None:
    a, b, c = builtin_tasks[:3]

    def verified(task: Task, passed: bool, chosen: int, made: int) -> TaskRecord:
        base = record(task, passed, ("greedy", passed), ("sample", passed))
        return base.model_copy(update={"evidence": {"chosen_cluster": chosen, "candidates": made}})

    records = [
        verified(a, True, 2, 2),  # both candidates agree: kept
        verified(b, False, 2, 4),  # two of four, the other two failed the examples: dropped
        verified(c, False, 3, 4),  # three of four agree on a wrong behaviour: kept
    ]
    (report,) = population_report(records, {}, agreement=2)
    assert report.verified_agreed == 3 and report.false_agreed == [b.id, c.id]
    assert report.verified_all == 2 and report.false_all == [c.id]
    assert (
        f"majority of all the candidates (not only of those passing the trusted tests): 2, "
        f"failing the reference: 1 (50.0%): {c.id}" in report.markdown()
    )
