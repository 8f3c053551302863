"""The honesty rule: the agent's inputs never contain the reference tests.

Every message the agent sends goes through a ``RecordingProvider``; afterwards no
reference assertion (normalised) that is not also in the prompt may appear in any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from eval_fakes import oracle_provider

import selfheal
from evaluation.benchmark import BenchmarkRunner
from evaluation.honesty import check_calls, check_messages, secret_assertions
from evaluation.metrics import summarise
from evaluation.modes import MODES, config_for
from evaluation.pair import heal_quietly
from evaluation.recording import RecordedCall, RecordingProvider
from evaluation.results_file import ResultsFile
from evaluation.suites import HumanEvalSuite, Task
from selfheal.config import HealConfig
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.base import Completion, Message, Provider


@pytest.fixture(scope="module")
def humaneval_tasks() -> list[Task]:
    tasks = {t.id: t for t in HumanEvalSuite().tasks()}
    return [tasks["HumanEval/0"], tasks["HumanEval/12"]]


def _messages_of_a_real_heal(task: Task, provider: Provider, mode: str) -> RecordingProvider:
    recorder = RecordingProvider(provider)
    result = selfheal.heal(
        task.prompt, provider=recorder, config=config_for(mode), entry_point=task.entry_point
    )
    assert result.code is not None
    return recorder


@pytest.mark.parametrize("mode", ["heal", "single_shot"])
def test_agent_inputs_contain_no_reference_assertion(
    builtin_tasks: list[Task], humaneval_tasks: list[Task], mode: str
) -> None:
    tasks = [*builtin_tasks[:3], *humaneval_tasks]
    dedupe = tasks[0]
    assert dedupe.id == "collections/dedupe"
    # dedupe gets a wrong solution and a test that catches it, so it goes through
    # diagnosis and repair: those prompts must not leak either. (Its spec has no example: a
    # population that agrees against the model's test would dispute it, so it runs with one
    # candidate per round, where a failing model test drives a repair.)
    provider = oracle_provider(
        tasks, wrong=[dedupe.id], tests={dedupe.id: "assert dedupe([2, 2]) == [2]"}
    )
    for task in tasks:
        task_mode = "heal-k1" if mode == "heal" and task is dedupe else mode
        recorder = _messages_of_a_real_heal(task, provider, task_mode)
        if mode == "heal" and task is dedupe:
            assert "debugger" in {c.role for c in recorder.calls}, "no repair happened"
        messages = recorder.messages
        assert messages, "the recorder saw no message"
        assert secret_assertions(task), f"{task.id} has nothing secret to check"
        # Strict form: any secret reference assertion in any message is a leak.
        report = check_messages(task, messages)
        assert report.leaks == (), (task.id, report.leaks)
        assert report.messages_checked == len(messages)


@pytest.mark.parametrize("mode", [m for m in MODES if m not in ("heal", "single_shot")])
def test_no_mode_sends_a_reference_assertion(
    builtin_tasks: list[Task], humaneval_tasks: list[Task], mode: str
) -> None:
    """Every evaluation mode, not only the two above: two tasks whose first answers are wrong
    (HumanEval/0 fails its docstring's examples, so every mode that diagnoses and repairs does),
    every message checked."""
    dedupe, other = builtin_tasks[0], humaneval_tasks[0]
    provider = oracle_provider(
        [dedupe, other],
        wrong=[dedupe.id, other.id],
        tests={dedupe.id: "assert dedupe([2, 2]) == [2]"},
    )
    for task in (dedupe, other):
        recorder = _messages_of_a_real_heal(task, provider, mode)
        report = check_calls(task, recorder.calls)
        assert report.leaks == (), (mode, task.id, report.leaks)
        assert report.messages_checked == len(recorder.messages) > 0


def test_the_check_catches_a_leak(builtin_tasks: list[Task]) -> None:
    task = builtin_tasks[0]
    secret = task.reference_tests[2]
    # Reformatted (extra spaces, other quotes) still counts.
    sneaky = "Hint:\n" + secret.replace("==", "  ==  ").replace('"', "'")
    report = check_messages(task, [Message(role="user", content=task.prompt + sneaky)])
    assert len(report.leaks) == 1
    assert not report.clean


def test_prompt_examples_are_not_secret(humaneval_tasks: list[Task]) -> None:
    task = humaneval_tasks[0]  # HumanEval/0: the docstring has two >>> examples
    report = check_messages(task, [Message(role="user", content=task.prompt)])
    assert report.clean
    # The example call in the docstring is public even when it also appears in check().
    assert all("[1.0, 2.0, 3.0], 0.5" not in s for s in secret_assertions(task))


def test_examples_the_prompt_states_in_words_are_not_secret() -> None:
    """``For num = "AB" the output should be 1`` states ``hex_key("AB") == 1``: restating it
    (as the generator's prompt does) is no leak; a value the prompt does not give still is."""
    task = Task(
        id="t/1",
        suite="t",
        category="t",
        prompt=(
            "def hex_key(num):\n    '''Count prime hex digits.\n"
            '    For num = "AB" the output should be 1.\n    Input: "2020"\n    Output: 2\n    \'\'\'\n'
        ),
        entry_point="hex_key",
        reference_tests=(
            'def check(candidate):\n    assert candidate("AB") == 1\n'
            "    assert candidate(('2020')) == 2\n"
            '    assert candidate("ABED1A33") == 4\n\ncheck(hex_key)\n',
        ),
    )
    assert secret_assertions(task) == ['candidate("ABED1A33") == 4']
    said = 'It must satisfy these examples:\nhex_key("AB") == 1\nhex_key("2020") == 2\n'
    assert check_messages(task, [Message(role="user", content=said)]).clean
    leaked = check_messages(task, [Message(role="user", content='hex_key("ABED1A33") == 4')])
    assert leaked.leaks == ('candidate("ABED1A33") == 4',)


def test_an_assertion_the_model_wrote_itself_is_an_echo_not_a_leak(
    builtin_tasks: list[Task],
) -> None:
    task = builtin_tasks[0]
    guess = f"assert {secret_assertions(task)[0]}"
    calls = [
        RecordedCall(
            messages=(Message(role="user", content=task.prompt),),
            completion=Completion(text=f"```python\n{guess}\n```"),
        ),
        RecordedCall(messages=(Message(role="user", content=f"Your tests:\n{guess}"),)),
    ]
    report = check_calls(task, calls)
    assert report.leaks == () and len(report.echoes) == 1
    # The same message without the model having written it first is a leak.
    assert len(check_calls(task, calls[1:]).leaks) == 1


class _LeakyHeal:
    """A deliberately dishonest 'agent': it shows the model the reference tests, then heals
    as the real agent does (and so passes them)."""

    def __init__(self, task: Task, pool: KernelPool) -> None:
        self.task = task
        self.pool = pool

    def __call__(
        self, spec: str, *, provider: Any, config: HealConfig, entry_point: str | None
    ) -> Any:
        leak = "\n".join(self.task.reference_tests)
        hint = spec + "\nMake these pass:\n" + leak
        provider.complete([Message(role="user", content=hint)], role="generator")
        return heal_quietly(
            spec, provider=provider, config=config, entry_point=entry_point, executor=self.pool
        )


def test_a_leaky_run_that_passes_is_recorded_as_leaky_and_not_counted_as_passed(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Any
) -> None:
    task = builtin_tasks[1]
    runner = BenchmarkRunner(
        tasks=[task],
        modes=["single_shot"],
        provider=oracle_provider([task]),
        results=ResultsFile(tmp_path / "r.jsonl"),
        heal=_LeakyHeal(task, pool),
        executor_factory=lambda: pool,
        progress=False,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    (record,) = runner.run()
    # the agent worked: its code passes the reference tests; only the leak makes it not count
    assert not record.error and record.status == "unverified" and record.passed
    assert record.honesty is not None and record.honesty.leaks
    assert record.leaked and not record.credited
    metrics = summarise([record], "single_shot")
    assert (metrics.passed, metrics.pass_at_1, metrics.leaks) == (0, 0.0, 1)
    honesty = record.honesty.model_copy(update={"leaks": ()})
    honest = record.model_copy(update={"honesty": honesty})
    assert summarise([honest], "single_shot").passed == 1  # the same run without the leak


def test_recording_provider_records_role_bound_calls(builtin_tasks: list[Task]) -> None:
    task = builtin_tasks[0]
    recorder = _messages_of_a_real_heal(task, oracle_provider([task]), "heal")
    roles = {c.role for c in recorder.calls}
    assert {"generator", "test_writer"} <= roles
    assert all(c.completion is not None for c in recorder.calls)
    assert recorder.model_id == "mock:oracle"


def test_every_mode_builds_a_config() -> None:
    for mode in MODES:
        cfg = config_for(mode, max_iterations=3, temperature=0.0)
        assert cfg.calls.temperature == 0.0
    single = config_for("single_shot")
    reference = HealConfig.single_shot()
    flat, ref = single.flat(), reference.flat()
    for field in ("max_iterations", "repair", "run_tests", "critic", "spec_blind_tests"):
        assert flat[field] == ref[field], field
    assert config_for("heal-no-critic").selection.critic is False
    assert config_for("heal-critic").selection.critic is True
    assert config_for("heal").selection.critic is HealConfig().selection.critic
    assert (
        config_for("heal-k1").generation.candidates == 1
        and config_for("heal").generation.candidates == "auto"
    )
    yardstick = config_for("sample-5")
    assert (
        yardstick.generation.candidates,
        yardstick.generation.first_sample,
        yardstick.repairs.repair,
    ) == (5, 1, False)
    assert (
        not yardstick.tests.probes
        and not yardstick.tests.spec_blind_tests
        and not yardstick.selection.oracle_calls
    )
    assert config_for("heal").repairs.debugger_steps == 0
    debugger = config_for("heal-debugger")
    assert (debugger.repairs.debugger_steps, debugger.repairs.debugger_tool_calls) == (3, "native")
    assert config_for("heal-debugger-json").repairs.debugger_tool_calls == "structured"


def _unused(_: Sequence[object]) -> None: ...


def test_a_paired_continuation_knows_what_the_model_wrote_before_the_branch(
    builtin_tasks: list[Task], pool: KernelPool, tmp_path: Any, monkeypatch: Any
) -> None:
    """heal's test writer guesses a reference assertion (before the branch); the critic of the
    paired heal-critic is shown it again (after the branch): an echo, as in one run, not a
    leak."""
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path / "runs"))
    task = builtin_tasks[0]
    guess = f"assert {secret_assertions(task)[0]}"
    runner = BenchmarkRunner(
        tasks=[task],
        modes=["heal", "heal-critic"],
        provider=oracle_provider([task], tests={task.id: guess}),
        results=ResultsFile(tmp_path / "r.jsonl"),
        executor_factory=lambda: pool,
        progress=False,
        paired=True,
    )
    runner.close = lambda: None  # type: ignore[method-assign]  # the pool is shared
    heal, critic = runner.run()
    assert critic.paired is not None and critic.paired.at_node == "critic"
    shown = [e for e in critic.timeline if e["node"] == "critic" and e["kind"] == "llm"]
    assert (
        guess.removeprefix("assert ").split("==")[0].strip() in shown[0]["messages"][-1]["content"]
    )
    assert critic.honesty is not None and critic.honesty.leaks == ()
    assert len(critic.honesty.echoes) == 1
    assert critic.honesty.messages_checked > heal.honesty.messages_checked  # the shared part too
