"""The runner: records, metrics, resume after an interruption, and the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from eval_fakes import oracle_provider

import selfheal
from evaluation.benchmark import BenchmarkRunner
from evaluation.metrics import summarise
from evaluation.pair import task_seed
from evaluation.records import TaskRecord
from evaluation.report import Settings, build_summary, render_markdown
from evaluation.results_file import ResultsFile
from evaluation.run_benchmark import main
from evaluation.suites import Task
from selfheal.config import HealConfig
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.base import Completion, CompletionRequest, WrapperProvider

ROOT = Path(__file__).resolve().parents[2]


class CountingHeal:
    """The real ``selfheal.heal``, counting calls; raises KeyboardInterrupt on call ``stop_at``."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.calls: list[str] = []
        self.stop_at = stop_at

    def __call__(
        self, spec: str, *, provider: Any, config: HealConfig, entry_point: str | None
    ) -> Any:
        self.calls.append(entry_point or "")
        if self.stop_at is not None and len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        return selfheal.heal(spec, provider=provider, config=config, entry_point=entry_point)


def _runner(
    tasks: list[Task],
    modes: list[str],
    path: Path,
    pool: KernelPool,
    heal: Any,
    wrap: Any = None,
    **kw: Any,
) -> BenchmarkRunner:
    """A runner over the oracle model (wrapped by ``wrap``, e.g. a server double) and ``pool``."""
    provider = oracle_provider(tasks, **kw)
    runner = BenchmarkRunner(
        tasks=tasks,
        modes=modes,
        provider=provider if wrap is None else wrap(provider),
        results=ResultsFile(path),
        heal=heal,
        executor_factory=lambda: pool,
        progress=False,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    return runner


def test_records_and_metrics_match_what_happened(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    tasks = builtin_tasks[:3]
    dedupe, flatten = tasks[0], tasks[1]
    runner = _runner(
        tasks,
        ["single_shot", "heal"],
        tmp_path / "r.jsonl",
        pool,
        CountingHeal(),
        # dedupe: wrong code that the agent's own test catches (no false success);
        # flatten: wrong code the agent's trivial test cannot catch (a false success).
        wrong=[dedupe.id, flatten.id],
        tests={dedupe.id: "assert dedupe([2, 2]) == [2]"},
    )
    records = {(r.task_id, r.mode): r for r in runner.run()}
    assert len(records) == 6

    # the builtin specs carry no example, so nothing can be verified: the honest status is
    # "unverified", whatever the candidates agree on
    good = records[(tasks[2].id, "heal")]
    assert good.passed and good.first_attempt_passed and not good.verified
    assert good.status == "unverified"
    assert good.verdict.outcome == "passed"
    assert {t.origin for t in good.tests} >= {"spec_blind"}
    assert good.usage.calls >= 2 and good.usage.prompt_tokens > 0 and good.timeline
    # the population and what the status rested on are in the record
    assert good.evidence is not None and "no trusted test" in good.evidence["summary"]
    # the default first round: the greedy answer in each prompt form, then samples
    assert [c["origin"] for c in good.candidates] == ["greedy", "greedy", "sample", "sample"]
    assert all(c["loaded"] and c["code"] for c in good.candidates)

    caught = records[(dedupe.id, "heal")]
    assert not caught.passed and not caught.verified and not caught.false_success
    # four identical wrong candidates agree against the model's test: disputed, not obeyed,
    # and not verified either
    assert caught.status == "unverified"
    assert caught.verdict.failing_assertion is not None
    assert any(t.outcome == "failed" for t in caught.tests)

    fooled = records[(flatten.id, "heal")]
    assert not fooled.verified and not fooled.passed and not fooled.false_success

    single = records[(tasks[2].id, "single_shot")]
    assert single.passed and single.status == "unverified" and single.usage.calls == 1
    # every mode of a task samples with the task's seed, and the record says which
    assert (
        good.config["generation"]["seed"]
        == single.config["generation"]["seed"]
        == task_seed(tasks[2].id)
    )
    assert len({records[(t.id, "heal")].config["generation"]["seed"] for t in tasks}) == 3
    assert not single.false_failure

    heal = summarise(records.values(), "heal")
    assert (heal.tasks, heal.passed, heal.false_success, heal.verified) == (3, 1, 0, 0)
    assert heal.by_category["collections"].tasks == 3
    assert heal.leaks == 0


def test_healed_counts_a_repair_that_fixed_the_first_attempt(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    task = next(t for t in builtin_tasks if t.id == "text/wrap")
    answers = iter(
        [f"def {task.entry_point}(text, width):\n    return []\n", task.canonical_solution]
    )
    provider = oracle_provider([task], tests={task.id: 'assert wrap_text("a b", 1) == ["a", "b"]'})
    provider._script.replies["generator"] = [lambda _m: f"```python\n{next(answers)}\n```"] * 2
    runner = BenchmarkRunner(
        tasks=[task],
        modes=["heal-k1"],  # one candidate per round: the model's test drives the repair
        provider=provider,
        results=ResultsFile(tmp_path / "r.jsonl"),
        heal=CountingHeal(),
        executor_factory=lambda: pool,
        progress=False,
    )
    runner.close = lambda: None  # type: ignore[method-assign]
    (record,) = runner.run()
    assert not record.first_attempt_passed and record.passed and record.healed
    assert record.first_verdict is not None and record.first_verdict.failing_assertion
    assert [a.iteration for a in record.attempts] == [1, 2]


def test_interrupted_run_resumes_only_the_missing_pairs(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    tasks = builtin_tasks[:4]
    modes = ["single_shot", "heal"]
    path = tmp_path / "results.jsonl"
    first = CountingHeal(stop_at=4)  # the 4th (task, mode) is interrupted
    with pytest.raises(KeyboardInterrupt):
        _runner(tasks, modes, path, pool, first).run()
    before = ResultsFile(path).read()
    assert len(before) == 3

    # A process killed mid-write leaves half a line: resume must cope with it.
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"suite": "builtin", "task_id": "half')

    second = CountingHeal()
    new = _runner(tasks, modes, path, pool, second).run(resume=True)
    assert len(second.calls) == 5 == len(new)
    done_before = {r.key for r in before}
    assert not done_before & {r.key for r in new}
    final = ResultsFile(path).read()
    assert sorted(r.key for r in final) == sorted((t.id, m) for t in tasks for m in modes)
    assert final[:3] == before  # earlier lines untouched

    third = CountingHeal()
    assert _runner(tasks, modes, path, pool, third).run(resume=True) == []
    assert third.calls == []


def test_harness_errors_are_retried_on_resume(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    task = builtin_tasks[2]
    path = tmp_path / "r.jsonl"

    def broken(spec: str, **_: Any) -> Any:
        raise ConnectionError("model server went away")

    (failed,) = _runner([task], ["single_shot"], path, pool, broken).run()
    assert failed.error.startswith("ConnectionError") and not failed.passed
    (retried,) = _runner([task], ["single_shot"], path, pool, CountingHeal()).run(resume=True)
    assert retried.passed and not retried.error
    assert ResultsFile(path).latest()[(task.id, "single_shot")].passed


def _mock_script(tasks: list[Task], path: Path, latency: float = 0.0) -> Path:
    script: dict[str, object] = {
        "generator": [f"```python\n{t.canonical_solution}\n```" for t in tasks] * 2
    }
    if latency:
        script["latency"] = latency
    path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return path


def test_command_line_writes_every_report(
    builtin_tasks: list[Task], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _mock_script(builtin_tasks[:2], tmp_path / "script.yaml")
    out = tmp_path / "out"
    args = ["--suite", "builtin", "--model", f"mock:{script}", "--modes", "single_shot",
            "--limit", "2", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((out / "results.json").read_text())
    assert summary["complete"] is True
    assert summary["metrics"]["single_shot"]["passed"] == 2
    assert summary["runs"][0]["command"].endswith(" ".join(args))
    assert summary["runs"][0]["hardware"]["logical_cores"] >= 1
    assert summary["runs"][0]["git_commit"]
    table = (out / "results.md").read_text()
    assert "| single_shot | 2 | 2 (100.0%)" in table
    for chart in ("pass_rate.png", "iterations.png"):
        assert (out / chart).read_bytes().startswith(b"\x89PNG")
    # A second run into the same directory must be explicit about resuming.
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    # Reports can be rebuilt from the JSON lines alone (e.g. while a run is going on).
    (out / "results.md").unlink()
    assert main([*args, "--report-only"]) == 0
    assert "| single_shot | 2 | 2 (100.0%)" in (out / "results.md").read_text()
    assert len(json.loads((out / "results.json").read_text())["runs"]) == 1


def test_demo_suite_with_the_mock_gets_a_fresh_script_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--suite demo --model mock``: every (task, mode) run replays the demo script from its
    start, so the baseline fails (the script's first answer) and heal passes (its repair)."""
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path / "runs"))
    out = tmp_path / "out"
    args = ["--suite", "demo", "--model", "mock", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    records = {r.mode: r for r in ResultsFile(out / "results.jsonl").read()}
    assert not records["single_shot"].passed and not records["single_shot"].error
    assert records["heal"].passed and records["heal"].verified and records["heal"].iterations == 2
    assert records["heal"].honesty.clean
    assert "| heal | 1 | 1 (100.0%)" in (out / "results.md").read_text()


def test_a_provider_built_already_is_used_and_named_by_model(
    builtin_tasks: list[Task], tmp_path: Path
) -> None:
    """``main(argv, provider=...)``: a model loaded once (a notebook's GPU model) is used as is;
    ``--model`` only names it."""
    tasks = builtin_tasks[:1]
    provider = oracle_provider(tasks)
    out = tmp_path / "out"
    args = ["--suite", "builtin", "--model", "hf:my/model", "--modes", "single_shot",
            "--limit", "1", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(args, provider=provider) == 0
    (record,) = ResultsFile(out / "results.jsonl").read()
    assert record.passed and record.usage.calls == 1
    assert json.loads((out / "results.json").read_text())["settings"]["model"] == "hf:my/model"


def test_a_benchmark_in_a_notebook_shows_no_view_per_task(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    """Inside a kernel ``selfheal.heal`` hands runs to the notebook frontend (a view each); the
    runner's default heal goes to the engine directly."""
    from selfheal import api

    shown: list[str] = []

    class Watching:
        def active(self) -> bool:
            return True

        def heal(self, request: Any) -> Any:
            shown.append(request.spec)
            raise AssertionError("the benchmark went through the notebook frontend")

        async def aheal(self, request: Any) -> Any:
            raise AssertionError("not used")

    tasks = builtin_tasks[:1]
    runner = BenchmarkRunner(
        tasks=tasks,
        modes=["single_shot"],
        provider=oracle_provider(tasks),
        results=ResultsFile(tmp_path / "r.jsonl"),
        executor_factory=lambda: pool,
        progress=False,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    api.use_frontend(Watching())
    try:
        (record,) = runner.run()
    finally:
        api.use_frontend(None)
    assert record.passed and not record.error and shown == []


def test_runner_needs_exactly_one_provider_source(tmp_path: Path) -> None:
    with pytest.raises(selfheal.ConfigError, match="exactly one of provider"):
        BenchmarkRunner(tasks=[], modes=["heal"], results=ResultsFile(tmp_path / "r.jsonl"))


@pytest.mark.slow
def test_killed_process_resumes_from_the_file(
    builtin_tasks: list[Task], tmp_path: Path, kill_then_resume: Any
) -> None:
    tasks = builtin_tasks[:4]
    # a slow model (0.5 s a call) so the run is surely still going when it is killed
    script = _mock_script(tasks, tmp_path / "script.yaml", latency=0.5)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "evaluation.run_benchmark", "--suite", "builtin",
           "--model", f"mock:{script}", "--modes", "single_shot", "--limit", "4",
           "--out", str(out), "--no-progress", "--resume"]  # fmt: skip
    kill_then_resume(cmd, out / "results.jsonl", [t.id for t in tasks])


def test_parallel_workers_record_every_pair_once(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    tasks = builtin_tasks[:4]
    heal = CountingHeal()
    runner = BenchmarkRunner(
        tasks=tasks,
        modes=["single_shot"],
        provider=oracle_provider(tasks),
        results=ResultsFile(tmp_path / "r.jsonl"),
        heal=heal,
        executor_factory=lambda: pool,
        workers=2,
        progress=False,
    )
    runner.close = lambda: None  # type: ignore[method-assign]
    records = runner.run()
    assert sorted(r.task_id for r in records) == sorted(t.id for t in tasks)
    assert all(r.passed for r in records)
    assert sorted(r.key for r in ResultsFile(tmp_path / "r.jsonl").read()) == sorted(
        r.key for r in records
    )


class _CachingServer(WrapperProvider):
    """The oracle model behind a server that reports 5 prompt tokens of each call as reused
    from its prompt cache (as llama-server's ``timings.cache_n`` does)."""

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        c = await super()._acomplete(request)
        return c.model_copy(update={"cached_tokens": 5})


def test_cached_prompt_tokens_reach_the_timeline_the_record_and_the_metrics(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    runner = _runner(
        builtin_tasks[:1], ["heal"], tmp_path / "r.jsonl", pool, CountingHeal(), _CachingServer
    )
    (record,) = runner.run()
    assert record.usage.calls >= 2 and record.usage.cached_tokens == 5 * record.usage.calls
    llm = [e for e in record.timeline if e["kind"] == "llm"]
    assert llm and all(e["cached_tokens"] == 5 for e in llm)
    m = summarise([record], "heal")
    assert m.cached_tokens == record.usage.cached_tokens
    assert m.warm_starts == 1  # its first call found 5 tokens it had not processed
    first = next(e for e in record.timeline if e["kind"] == "llm")
    cold = [{**e, "cached_tokens": 0} if e is first else e for e in record.timeline]
    cold_record = record.model_copy(update={"timeline": tuple(cold)})
    assert summarise([cold_record], "heal").warm_starts == 0
    settings = Settings(
        suite="builtin", model="mock", modes=("heal",), max_iterations=2, temperature=0
    )
    warm, cold_report = (
        render_markdown(
            build_summary(settings=settings, runs=(), records=[r], task_ids=[r.task_id])
        )
        for r in (record, cold_record)
    )
    assert "Not cold: the first model call of 1 of `heal` run(s)" in warm
    assert "Not cold" not in cold_report


def test_records_written_with_flat_counts_still_load() -> None:
    """Before ``usage`` held a record's counts they were flat fields (``llm_calls``,
    ``prompt_tokens`` ...): every stored results file still reads, with the same counts."""
    stored = sorted((ROOT / "evaluation" / "results").glob("*/results.jsonl"))
    assert stored and all(ResultsFile(path).read() for path in stored)
    line = json.loads(stored[0].read_text().splitlines()[-1])
    assert "usage" not in line  # written in the old form
    record = TaskRecord.model_validate(line)
    assert record.usage.model_dump(exclude={"latency"}) == {
        "calls": line["llm_calls"],
        "prompt_tokens": line["prompt_tokens"],
        "completion_tokens": line["completion_tokens"],
        "cached_tokens": line["cached_tokens"],
    }
    assert TaskRecord.model_validate_json(record.model_dump_json()) == record


class _ForgettingServer(WrapperProvider):
    """The oracle model behind a server with a prompt cache to erase: every erase and every
    call is logged in order."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.log: list[str] = []

    def forget_prompts(self) -> None:
        self.log.append("forget")

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        self.log.append("call")
        return await super()._acomplete(request)


def test_each_run_starts_from_a_cold_prompt_cache(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path
) -> None:
    servers: list[_ForgettingServer] = []

    def wrap(p: Any) -> _ForgettingServer:
        servers.append(_ForgettingServer(p))
        return servers[-1]

    runner = _runner(
        builtin_tasks[:2], ["single_shot", "heal"], tmp_path / "r.jsonl", pool, CountingHeal(), wrap
    )
    records = runner.run()
    log = servers[0].log
    assert len(records) == 4 and log.count("forget") == 4
    # the cache is erased before each run's first call, never in the middle of a run
    runs = "".join("F" if e == "forget" else "c" for e in log).split("F")
    assert runs[0] == "" and len(runs) == 5 and all(runs[1:])
    assert [len(r) for r in runs[1:]] == [r.usage.calls for r in records]


def test_paired_modes_continue_heal_from_where_their_switch_matters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--paired``: heal-critic and heal-debugger continue heal's own run of the demo task
    (a failing first round, a diagnosis, a repair), sharing everything before the branch."""
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path / "runs"))
    out = tmp_path / "out"
    args = ["--suite", "demo", "--model", "mock", "--out", str(out), "--no-progress",
            "--modes", "heal,heal-critic,heal-debugger", "--paired"]  # fmt: skip
    assert main(args) == 0
    records = {r.mode: r for r in ResultsFile(out / "results.jsonl").read()}
    heal, critic, debugger = records["heal"], records["heal-critic"], records["heal-debugger"]
    assert heal.paired is None and heal.passed
    assert critic.paired is not None and critic.paired.diverged
    assert (critic.paired.base, critic.paired.base_run_id) == ("heal", heal.run_id)
    assert critic.paired.at_node == "critic" and critic.run_id != heal.run_id
    # the critic is asked once, after the very population heal chose from
    assert critic.usage.calls == heal.usage.calls + 1 == critic.paired.shared_calls + 1
    assert [c["code"] for c in critic.candidates] == [c["code"] for c in heal.candidates]
    assert critic.wall_time >= critic.paired.shared_seconds > 0
    assert critic.config["selection"]["critic"] and not heal.config["selection"]["critic"]
    assert critic.config["generation"]["seed"] == heal.config["generation"]["seed"]
    # the debugger's steps change the diagnosis itself: the branch starts at diagnose, after
    # the first round heal ran (the same candidates up to there)
    assert debugger.paired is not None and debugger.paired.at_node == "diagnose"
    first_round = [c["code"] for c in heal.candidates if c["round"] == 1]
    assert [c["code"] for c in debugger.candidates if c["round"] == 1] == first_round
    assert debugger.honesty is not None and debugger.honesty.clean
    report = (out / "results.md").read_text()
    assert "- `heal-critic` from `heal`: parted on 1 of 1 task(s) (1 at critic)" in report
    assert "- `heal-debugger` from `heal`: parted on 1 of 1 task(s) (1 at diagnose)" in report
    # --resume keeps them: nothing runs again
    assert main([*args, "--resume"]) == 0
    assert len(ResultsFile(out / "results.jsonl").read()) == 3


def test_paired_modes_need_their_base_first_and_one_pair_at_a_time(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    base = ["--suite", "demo", "--model", "mock", "--out", out, "--no-progress", "--paired"]
    assert main([*base, "--modes", "heal-critic,heal"]) == 2
    assert main([*base, "--modes", "heal,heal-critic", "--workers", "2"]) == 2


def test_a_paired_mode_whose_switch_never_matters_repeats_the_base_result(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right first time, heal never diagnoses nor repairs: heal-debugger and heal-no-repair
    would have done exactly what it did, so their records repeat heal's, marked so."""
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path / "runs"))
    tasks = builtin_tasks[:1]
    heal = CountingHeal()
    runner = BenchmarkRunner(
        tasks=tasks,
        modes=["heal", "heal-debugger", "heal-no-repair"],
        provider=oracle_provider(tasks),
        results=ResultsFile(tmp_path / "r.jsonl"),
        heal=heal,
        executor_factory=lambda: pool,
        progress=False,
        paired=True,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    records = {r.mode: r for r in runner.run()}
    assert len(heal.calls) == 1  # only heal ran the agent
    base = records["heal"]
    for mode in ("heal-debugger", "heal-no-repair"):
        r = records[mode]
        assert r.paired is not None and not r.paired.diverged
        assert r.paired.base_run_id == base.run_id == r.run_id
        assert (r.passed, r.code, r.wall_time, r.usage.calls) == (
            base.passed, base.code, base.wall_time, base.usage.calls,
        )  # fmt: skip
        assert r.config["repairs"]["debugger_steps"] == (3 if mode == "heal-debugger" else 0)


def test_a_paired_mode_without_its_base_run_log_runs_on_its_own(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(runs))
    tasks = builtin_tasks[:1]
    results = ResultsFile(tmp_path / "r.jsonl")
    first = _runner(tasks, ["heal"], results.path, pool, CountingHeal())
    first.run()  # not paired: its run logs are not kept beside the results
    for log in runs.glob("*.jsonl"):
        log.unlink()  # e.g. the results were copied from another machine
    heal = CountingHeal()
    second = BenchmarkRunner(
        tasks=tasks,
        modes=["heal", "heal-critic"],
        provider=oracle_provider(tasks),
        results=results,
        heal=heal,
        executor_factory=lambda: pool,
        progress=False,
        paired=True,
    )
    second.close = lambda: None  # type: ignore[method-assign]
    (record,) = second.run(resume=True)
    assert record.mode == "heal-critic" and record.paired is None and len(heal.calls) == 1


def test_the_base_runs_are_kept_beside_the_results_for_a_later_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paired run keeps its base runs' logs, compressed, in OUT/runs: resumed on a machine
    whose runs directory is empty, a paired mode still continues heal's run."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(runs))
    out = tmp_path / "out"
    args = ["--suite", "demo", "--model", "mock", "--out", str(out), "--no-progress", "--paired"]
    assert main([*args, "--modes", "heal"]) == 0  # not paired yet: nothing kept
    assert not (out / "runs").exists()
    assert main([*args, "--modes", "heal,heal-critic", "--resume"]) == 0
    (heal,) = [r for r in ResultsFile(out / "results.jsonl").read() if r.mode == "heal"]
    kept = out / "runs" / f"{heal.run_id}.jsonl.xz"
    assert kept.is_file() and kept.stat().st_size < (runs / f"{heal.run_id}.jsonl").stat().st_size
    for log in runs.glob("*.jsonl"):
        log.unlink()  # another machine
    assert main([*args, "--modes", "heal,heal-critic,heal-lessons", "--resume"]) == 0
    lessons = [r for r in ResultsFile(out / "results.jsonl").read() if r.mode == "heal-lessons"]
    assert lessons[0].paired is not None and lessons[0].paired.base_run_id == heal.run_id
    assert lessons[0].paired.diverged and lessons[0].paired.at_node == "lessons"


def test_the_first_answer_of_a_run_with_samples_only_and_no_attempt() -> None:
    """A heal whose first round held samples but no greedy answer, and that ran no attempt (the
    notebook suite met one: the benchmark crashed with an IndexError), is scored on its first
    sample."""
    from types import SimpleNamespace as Rec

    from evaluation.pair import first_answer

    greedy, sample, attempt = (
        Rec(origin="greedy", code="g"),
        Rec(origin="sample", code="s"),
        Rec(code="a"),
    )
    assert first_answer((), (sample,)) == "s"
    assert first_answer((attempt,), (sample, greedy)) == "g"
    assert first_answer((attempt,), (sample,)) == "a"
    assert first_answer((), ()) is None
