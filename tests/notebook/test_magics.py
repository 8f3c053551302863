"""The magics on a real IPython shell, with the mock provider."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from nb_fakes import InProcessExecutor

from selfheal import magics
from selfheal.cells import fixed_cell, split_spec_and_tests
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import DEMO_SPEC, MockProvider
from selfheal.magics import defaults
from selfheal.result import HealResult


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "selfheal")
    d = defaults(sh)
    d.executor = InProcessExecutor()
    sh.rl_next_input = None
    yield sh
    sh.run_line_magic("unload_ext", "selfheal")
    for name in ("median", "mean", "Box", "none"):
        sh.user_ns.pop(name, None)


def _run(sh: InteractiveShell, cell: str) -> None:
    res = sh.run_cell(cell, store_history=True)
    if res.error_in_exec is not None:
        raise res.error_in_exec
    if res.error_before_exec is not None:
        raise res.error_before_exec


def test_cell_magic_defines_the_function_and_offers_the_code(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SELFHEAL_MODEL", "mock")
    _run(shell, f"%%selfheal --name median --max-iterations 3\n{DEMO_SPEC}\n")
    median = shell.user_ns["median"]
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        median([])
    last = defaults(shell).last
    assert isinstance(last, HealResult) and last.verified
    assert last.config.repairs.max_iterations == 3
    assert shell.rl_next_input == last.code.rstrip() + "\n"


def test_every_setting_is_an_option_of_the_cell_magic_and_a_config_word(
    shell: InteractiveShell,
) -> None:
    """Derived from the config as the CLI's options are: no hand-written list to extend."""
    defaults(shell).provider = MockProvider.demo()
    _run(shell, "%selfheal_config candidates=4 seed=7")
    _run(shell, f"%%selfheal --name median --oracle-calls 1 --max-tokens 900\n{DEMO_SPEC}\n")
    config = defaults(shell).last.config
    assert (config.selection.oracle_calls, config.calls.max_tokens) == (1, 900)
    assert (config.generation.candidates, config.generation.seed) == (4, 7)


def test_cell_magic_tests_flag_adds_trusted_user_tests(shell: InteractiveShell) -> None:
    defaults(shell).provider = MockProvider.demo()
    body = f"{DEMO_SPEC}\nassert median([10, 20]) == 15\nassert median([1, 2, 3,\n    4]) == 2.5\n"
    _run(shell, "%%selfheal --tests\n" + body)
    result = defaults(shell).last
    user = [t for t in result.tests if t.origin == "user"]
    assert [t.code for t in user] == [
        "assert median([10, 20]) == 15",
        "assert median([1, 2, 3,\n    4]) == 2.5",
    ]
    assert all(t.trusted for t in user)
    assert result.verified and result.test_outcomes()["u1"] == "passed"
    assert "assert median" not in result.state.spec.text


def test_cell_magic_tests_file_runs_pytest_functions_in_the_sandbox(
    shell: InteractiveShell, pool: KernelPool, tmp_path: Path
) -> None:
    # the real sandbox: a pytest function that must fail keeps the result from `verified`
    defaults(shell).executor = pool
    defaults(shell).provider = MockProvider.demo()
    tests = tmp_path / "test_median.py"
    tests.write_text("def test_x():\n    assert median([1, 2, 3]) == 999\n")
    _run(shell, f"%%selfheal --tests {tests}\n{DEMO_SPEC}\n")
    result = defaults(shell).last
    assert not result.verified
    assert result.test_outcomes()["u1::test_x"] == "failed"
    assert "median" not in shell.user_ns
    defaults(shell).provider = MockProvider.demo()
    _run(
        shell,
        f"%%selfheal --tests\n{DEMO_SPEC}\nimport pytest\n\ndef test_even():\n"
        "    assert median([1, 2]) == pytest.approx(1.5)\n",
    )
    result = defaults(shell).last
    assert result.verified and result.test_outcomes()["u1::test_even"] == "passed"


def test_cell_magic_user_tests_run_in_the_real_sandbox(
    shell: InteractiveShell, pool: KernelPool
) -> None:
    """The user's tests go from the magic to the real sandbox (not the in-process fake): the
    candidates the run chose between ran them there, ids and all."""
    d = defaults(shell)
    d.provider, d.executor = MockProvider.demo(), pool
    body = f"{DEMO_SPEC}\nassert median([10, 20]) == 15\n"
    _run(shell, "%%selfheal --tests\n" + body)
    result = d.last
    assert result.verified and result.test_outcomes()["u1"] == "passed"
    chosen = next(a for a in reversed(result.attempts) if a.report is not None)
    assert "u1" in {r.test_id for r in chosen.report.results}
    assert shell.user_ns["median"]([10, 20]) == 15


def test_split_spec_and_tests_syntax() -> None:
    spec, tests = split_spec_and_tests("Add numbers.\nadd(1, 2) -> 3\n\nassert add(1, 1) == 2\n")
    assert spec == "Add numbers.\nadd(1, 2) -> 3" and tests == ["assert add(1, 1) == 2"]
    assert split_spec_and_tests("Only a spec.") == ("Only a spec.", [])
    with pytest.raises(ConfigError, match="is not a test"):
        split_spec_and_tests("Spec.\nassert f(1) == 1\nprint('x')\n")


def test_cell_magic_rejects_unknown_options(shell: InteractiveShell) -> None:
    with pytest.raises(ConfigError, match="Unknown option '--bogus'"):
        _run(shell, "%%selfheal --bogus\nAdd two numbers.\n")
    with pytest.raises(ConfigError, match="needs a number"):
        _run(shell, "%%selfheal --max-iterations many\nAdd two numbers.\n")


def test_config_magic_shows_and_sets_defaults(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(shell, "%selfheal_config autonomy=review_repairs max_iterations=3 critic=false")
    out = capsys.readouterr().out
    assert "autonomy = 'review_repairs'" in out and "max_iterations = 3" in out
    cfg = defaults(shell).heal_config()
    assert (
        cfg.approval.autonomy == "review_repairs"
        and cfg.repairs.max_iterations == 3
        and cfg.selection.critic is False
    )
    with pytest.raises(ConfigError, match="Unknown setting 'autonomyy'"):
        _run(shell, "%selfheal_config autonomyy=full_auto")
    with pytest.raises(ConfigError, match="autonomy='sometimes': must be one of 'full_auto'"):
        _run(shell, "%selfheal_config autonomy=sometimes")
    assert (
        defaults(shell).heal_config().approval.autonomy == "review_repairs"
    )  # unchanged by the error
    _run(shell, "%selfheal_config sandbox=off")  # "off" is a mode here, not a boolean
    assert defaults(shell).heal_config().limits.sandbox == "off"
    _run(shell, "%selfheal_config --reset")
    assert defaults(shell).heal_config().approval.autonomy == "full_auto"


def test_config_magic_turns_the_memory_off_and_on(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], memory_path: Path
) -> None:
    def heal_twice() -> HealResult:
        for _ in range(2):
            defaults(shell).provider = MockProvider.demo()
            _run(shell, f"%%selfheal\n{DEMO_SPEC}\n")
        last: HealResult = defaults(shell).last
        assert last.verified
        return last

    _run(shell, "%selfheal_config memory=off")
    assert "memory = False" in capsys.readouterr().out
    assert defaults(shell).heal_config().storage.memory is False
    assert heal_twice().remembered == ()
    assert not memory_path.exists()  # nothing read, nothing written
    _run(shell, "%selfheal_config memory=on")
    assert defaults(shell).heal_config().storage.memory is True
    last = heal_twice()  # the second run recalls what the first learnt
    assert [r.kind for r in last.remembered] == ["lesson", "solution"]
    assert any(c.origin == "memory" for c in last.candidates)


def test_review_outside_a_kernel_returns_the_paused_result_without_defining_code(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    defaults(shell).provider = MockProvider.demo()
    _run(shell, "%selfheal_config autonomy=review_repairs")
    _run(shell, f"%%selfheal\n{DEMO_SPEC}\n")
    last = defaults(shell).last
    assert last.status == "awaiting_approval"
    assert "median" not in shell.user_ns
    assert "not verified" in capsys.readouterr().err


def test_a_review_in_a_live_notebook_asks_in_the_cell_and_offers_the_code_from_it(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """%%selfheal under a review in a live notebook runs to the end inside its own cell,
    asking there with input(), as %selfheal does: the code is offered while the %%selfheal cell
    runs, so it rides on that cell's reply and lands directly below it (a run left going after
    the cell returned offered it with whatever cell ran next, or lost it when that one
    raised)."""
    monkeypatch.setattr(magics, "notebook_mode", lambda: "live")
    prompts: list[str] = []

    def answer(prompt: str = "") -> str:
        prompts.append(prompt)
        return "a"

    monkeypatch.setattr(builtins, "input", answer)
    offered: list[tuple[str, str, bool]] = []

    def set_next_input(text: str, replace: bool = False) -> None:
        offered.append((shell.user_ns["In"][-1], text, replace))  # the cell running now

    monkeypatch.setattr(shell, "set_next_input", set_next_input)
    defaults(shell).provider = MockProvider.demo()
    _run(shell, "%selfheal_config autonomy=review_repairs")
    _run(shell, f"%%selfheal --name median\n{DEMO_SPEC}\n")
    last = defaults(shell).last
    assert isinstance(last, HealResult) and last.verified and last.code
    assert [d.kind for d in last.state.decisions] == ["approve"]
    assert len(prompts) == 1 and "approve this change?" in prompts[0]
    assert shell.user_ns["median"]([4, 1, 3, 2]) == 2.5  # defined before the cell returned
    assert len(offered) == 1
    running, text, replace = offered[0]
    assert running.startswith("get_ipython().run_cell_magic('selfheal', '--name median'")
    assert (text, replace) == (last.code.rstrip() + "\n", False)


MEAN_TESTS = """```python
def mean(xs): ...

# why: the user asked for 0.0 on an empty list
assert mean([]) == 0.0
# why: plain average
assert mean([1, 2, 3]) == 2
```"""

MEAN_FIXED = """```python
def mean(xs):
    if not xs:
        return 0.0
    return sum(xs) / len(xs)
```"""

MEAN_FIXED_TOO = """```python
def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0
```"""


def test_line_magic_heals_the_function_that_raised(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    # the function that raised runs first (c0) and fails the message's example; the repairs
    # start from it
    mock = MockProvider(
        {
            "test_writer": [MEAN_TESTS],
            "generator": [MEAN_FIXED, MEAN_FIXED_TOO],
            "debugger": ["{}"],
        },
        repeat_last=True,
    )
    defaults(shell).provider = mock
    _run(shell, "%selfheal_config autonomy=full_auto adversarial_tests=false critic=false")
    cell = "def mean(xs):\n    return sum(xs) / len(xs)\n\nprint(mean([]))"
    shell.run_cell(cell, store_history=True)  # raises ZeroDivisionError
    _run(shell, "%selfheal return 0.0 for an empty list: mean([]) -> 0.0")
    result = defaults(shell).last
    assert result.verified and result.entry_point == "mean"
    c0 = result.candidates[0]
    assert (c0.id, c0.origin) == ("c0", "user") and "return sum(xs) / len(xs)" in c0.code
    assert result.attempts[0].candidate == "c0" and result.attempts[-1].candidate != "c0"
    assert mock.calls_for("generator")  # the repair round
    # the message's example, and the call that raised: it must not raise again
    trusted = [t.code or "" for t in result.tests if t.trusted]
    assert len(trusted) == 2 and "assert mean([]) == 0.0" in trusted
    assert any(c.startswith("try:\n    mean([])\nexcept ZeroDivisionError:") for c in trusted)
    spec = result.state.spec.text
    assert spec.startswith("Fix the function mean from this notebook cell. return 0.0 for")
    assert "ZeroDivisionError" in spec and "return sum(xs) / len(xs)" in spec
    assert shell.user_ns["mean"]([]) == 0.0
    # the fixed cell keeps the rest of the cell and replaces the function
    assert shell.rl_next_input == fixed_cell(cell, "mean", result.code) + "\n"
    assert shell.rl_next_input.endswith("print(mean([]))\n")
    out = capsys.readouterr().out
    assert "--- cell (before)" in out and "+    if not xs:" in out


def test_line_magic_without_an_example_offers_the_fix_unverified(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    # no trusted test (the failing call's argument is not plain data, so it cannot become
    # one): agreement alone never verifies, so the fix is offered, not defined
    mock = MockProvider({"test_writer": [MEAN_TESTS], "generator": [MEAN_FIXED] * 4})
    defaults(shell).provider = mock
    _run(shell, "%selfheal_config autonomy=full_auto")
    _run(shell, "class Box(list):\n    pass\n\nnone = Box()")
    cell = "def mean(xs):\n    return sum(xs) / len(xs)\n\nprint(mean(none))"
    shell.run_cell(cell, store_history=True)  # raises ZeroDivisionError
    _run(shell, "%selfheal return 0.0 for an empty list")
    result = defaults(shell).last
    assert result.status == "unverified" and result.evidence.trusted_total == 0
    assert len(mock.calls_for("generator")) == 4  # no trusted test: the sample is topped up
    with pytest.raises(ZeroDivisionError):  # the notebook keeps its own (buggy) function
        shell.user_ns["mean"]([])
    assert shell.rl_next_input == fixed_cell(cell, "mean", result.code) + "\n"
    out, err = capsys.readouterr()
    assert "`none` is not plain data (a Box" in out
    assert "not verified (status unverified)" in err
    assert "evidence: no trusted test" in err
    assert "add an example to your message (%selfheal ... mean(<args>) -> <expected>)" in err


def test_line_magic_without_an_error_says_what_to_do(shell: InteractiveShell) -> None:
    import sys

    for attr in ("last_type", "last_value", "last_traceback"):
        if hasattr(sys, attr):
            delattr(sys, attr)
    with pytest.raises(ConfigError, match="right after a cell that raised"):
        _run(shell, "%selfheal")


def test_fixed_cell_replaces_only_the_function() -> None:
    cell = "import math\n\n@cache\ndef f(x):\n    return x\n\nf(1)"
    assert fixed_cell(cell, "f", "def f(x):\n    return x + 1\n") == (
        "import math\n\ndef f(x):\n    return x + 1\n\nf(1)"
    )
    assert fixed_cell("x = 1", "g", "def g(): pass") == "def g(): pass\n\nx = 1"
