"""``%selfheal`` on a cell that raised (issue 44, item 2), on a real IPython shell with the
scripted mock: the failing call as trusted evidence, one approval per proposal against your
code, none under ``full_auto``, and the fixed cell offered from the ``%selfheal`` cell itself."""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from nb_fakes import InProcessExecutor

from selfheal import magics
from selfheal.cells import fixed_cell
from selfheal.config import HealConfig
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.magics import defaults
from selfheal.result import HealResult
from selfheal.state import Proposal

CELL = '''def mean_of_positive(xs):
    """Mean of the positive numbers in xs; 0.0 if there are none."""
    pos = [x for x in xs if x > 0]
    return sum(pos) / len(pos)

mean_of_positive({args})'''

FIXED = '''```python
def mean_of_positive(xs):
    """Mean of the positive numbers in xs; 0.0 if there are none."""
    pos = [x for x in xs if x > 0]
    return sum(pos) / len(pos) if pos else 0.0
```'''

FIXED_TOO = """```python
def mean_of_positive(xs):
    pos = [x for x in xs if x > 0]
    if not pos:
        return 0.0
    return sum(pos) / len(pos)
```"""

WRITER = """```python
def mean_of_positive(xs): ...

assert mean_of_positive([1, 3]) == 2
```"""

MUST_NOT_RAISE = (
    "try:\n    mean_of_positive([-1, -2])\nexcept ZeroDivisionError:\n"
    "    raise AssertionError('mean_of_positive([-1, -2]) raised ZeroDivisionError, as in "
    "your notebook')\nexcept Exception:\n    pass  # another outcome is not this failure"
)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "selfheal")
    d = defaults(sh)
    d.executor = InProcessExecutor()
    d.provider = MockProvider(
        {"test_writer": [WRITER], "generator": [FIXED, FIXED_TOO], "debugger": ["{}"]},
        repeat_last=True,
    )
    sh.rl_next_input = None
    yield sh
    sh.run_line_magic("unload_ext", "selfheal")
    for name in ("mean_of_positive", "data", "Box"):
        sh.user_ns.pop(name, None)


def _raise_then_heal(sh: InteractiveShell, cell: str, line: str = "") -> HealResult:
    res = sh.run_cell(cell, store_history=True)
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    res = sh.run_cell(f"%selfheal {line}".rstrip(), store_history=True)
    assert res.error_in_exec is None and res.error_before_exec is None, res
    last: HealResult = defaults(sh).last
    return last


@pytest.fixture
def no_input(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test if anything asks with input() (records the prompt first)."""
    asked: list[str] = []

    def refuse(prompt: str = "") -> str:
        asked.append(prompt)
        raise AssertionError(f"asked for approval: {prompt!r}")

    monkeypatch.setattr(builtins, "input", refuse)
    return asked


def test_the_raising_call_becomes_trusted_tests_and_a_probe(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], no_input: list[str]
) -> None:
    result = _raise_then_heal(shell, CELL.format(args="[-1, -2]"))
    user = [t for t in result.tests if t.origin == "user"]
    assert [(t.id, t.trusted, t.code) for t in user] == [
        ("u1", True, MUST_NOT_RAISE),
        ("u2", True, "assert mean_of_positive([-1, -2]) == 0.0"),
    ]
    assert "0.0 if there are none" in user[1].rationale  # where the value was read
    assert [(p.call, p.origin) for p in result.state.probes if p.origin == "user"] == [
        ("mean_of_positive([-1, -2])", "user")
    ]
    # the user's code (c0) fails both; the fix passes both, so the run is verified on them
    assert result.verified and result.evidence.trusted_total == 2
    outcomes = result.test_outcomes()
    assert outcomes["u1"] == outcomes["u2"] == "passed"
    c0 = result.attempts[0]
    assert c0.candidate == "c0" and c0.report is not None
    assert {r.test_id: r.outcome for r in c0.report.results}["u1"] == "failed"
    out = capsys.readouterr().out
    assert (
        "selfheal: evidence from the failing call (trusted): `mean_of_positive([-1, -2])` must "
        "not raise ZeroDivisionError; it returns 0.0 (the docstring: '0.0 if there are none')."
    ) in out
    assert shell.user_ns["mean_of_positive"]([-3]) == 0.0


def test_a_variable_of_plain_data_is_read_from_the_namespace(
    shell: InteractiveShell, no_input: list[str]
) -> None:
    shell.run_cell("data = [-1, -2]")
    cell = CELL.format(args="data").replace("; 0.0 if there are none", "")
    result = _raise_then_heal(shell, cell, "it should return 0.0 when there are none")
    user = {t.id: t for t in result.tests if t.origin == "user"}
    assert user["u1"].code == MUST_NOT_RAISE
    assert user["u2"].code == "assert mean_of_positive([-1, -2]) == 0.0"
    assert user["u2"].rationale.startswith("the message says")


def test_a_variable_that_is_not_plain_data_gives_no_test_and_says_so(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], no_input: list[str]
) -> None:
    shell.run_cell("class Box(list):\n    pass\n\ndata = Box([-1, -2])")
    result = _raise_then_heal(shell, CELL.format(args="data"))
    assert not [t for t in result.tests if t.origin == "user"]
    assert not [p for p in result.state.probes if p.origin == "user"]
    out = capsys.readouterr().out
    assert (
        "selfheal: the failing call `mean_of_positive(data)` cannot become a test: `data` is not "
        "plain data (a Box whose repr does not read back as the same value); this run has no "
        "test from the failure"
    ) in out


def test_full_auto_never_asks(shell: InteractiveShell, no_input: list[str]) -> None:
    # the configured autonomy is what %selfheal_config shows: full_auto unless set
    assert defaults(shell).heal_config().approval.autonomy == "full_auto"
    result = _raise_then_heal(shell, CELL.format(args="[-1, -2]"))
    assert result.verified and result.state.decisions == ()
    assert no_input == []
    defaults(shell).provider = MockProvider(
        {"test_writer": [WRITER], "generator": [FIXED, FIXED_TOO], "debugger": ["{}"]},
        repeat_last=True,
    )
    shell.run_cell("%selfheal_config autonomy=full_auto", store_history=True)
    result = _raise_then_heal(shell, CELL.format(args="[-1, -2]"))
    assert result.verified and result.state.decisions == () and no_input == []


def test_review_asks_once_per_proposal_with_the_diff_against_your_code(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts: list[str] = []

    def answer(prompt: str = "") -> str:
        prompts.append(prompt)
        return "a"

    monkeypatch.setattr(builtins, "input", answer)
    shell.run_cell("%selfheal_config autonomy=review_all", store_history=True)
    cell = CELL.format(args="[-1, -2]")
    result = _raise_then_heal(shell, cell)
    assert result.verified
    # your code (c0) runs without asking; the repair round from it is asked about once
    assert len(prompts) == 1 and [d.kind for d in result.state.decisions] == ["approve"]
    out = capsys.readouterr().out
    shown = out[out.index(" proposal awaiting approval") :]
    assert shown.count("awaiting approval") == 1
    assert "--- your code\n+++ proposed\n" in shown
    assert "-    return sum(pos) / len(pos)\n" in shown  # your line, as the change removes it
    assert "+    return sum(pos) / len(pos) if pos else 0.0\n" in shown


def test_a_proposal_made_from_your_code_is_shown_against_it() -> None:
    """The gate itself (every frontend): with code you gave, c0 is never asked about, and each
    proposal's diff is the change to your code (not to an empty file)."""
    from selfheal import heal

    given = "def mean_of_positive(xs):\n    pos = [x for x in xs if x > 0]\n    return sum(pos) / len(pos)\n"
    asked: list[Proposal] = []

    def approver(proposal: Proposal, state: Any) -> Any:
        from selfheal import Approve

        asked.append(proposal)
        return Approve()

    result = heal(
        "Write mean_of_positive(xs): the mean of the positive numbers; 0.0 if there are none. "
        "Example: mean_of_positive([-1, -2]) -> 0.0",
        provider=MockProvider(
            {"generator": [FIXED, FIXED_TOO], "debugger": ["{}"]}, repeat_last=True
        ),
        code=given,
        config=HealConfig(autonomy="review_all", spec_blind_tests=False),
        executor=InProcessExecutor(),
        approver=approver,
    )
    assert result.verified
    assert len(asked) == len(result.state.decisions) >= 1
    assert all(all(c.origin != "user" for c in p.candidates) for p in asked)
    for p in asked:
        assert p.previous_code == given
        assert p.diff.startswith("--- your code\n+++ proposed\n")
        assert "\n     pos = [x for x in xs if x > 0]\n" in p.diff  # your line, unchanged


def test_the_fixed_cell_is_offered_from_the_selfheal_cell_in_a_live_review(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a live notebook with review, the run ends inside the %selfheal cell (it asks there),
    so the fixed cell rides on that cell's reply: JupyterLab and Notebook 7 insert it directly
    below the cell whose reply carries it, whatever runs later."""
    monkeypatch.setattr(magics, "notebook_mode", lambda: "live")
    monkeypatch.setattr(builtins, "input", lambda prompt="": "a")
    offered: list[tuple[str, str, bool]] = []

    def set_next_input(text: str, replace: bool = False) -> None:
        offered.append((shell.user_ns["In"][-1], text, replace))  # the cell running now

    monkeypatch.setattr(shell, "set_next_input", set_next_input)
    shell.run_cell("%selfheal_config autonomy=review_repairs", store_history=True)
    cell = CELL.format(args="[-1, -2]")
    shell.run_cell(cell, store_history=True)
    res = shell.run_cell("%selfheal", store_history=True)
    assert res.error_in_exec is None, res.error_in_exec
    result = defaults(shell).last
    assert isinstance(result, HealResult) and result.verified and result.code
    # offered while the %selfheal cell ran (not on a later cell's reply), below it, not over it
    assert offered == [
        (
            "get_ipython().run_line_magic('selfheal', '')",
            fixed_cell(cell, "mean_of_positive", result.code) + "\n",
            False,
        )
    ]


def test_the_failing_call_tests_run_in_the_real_sandbox(
    shell: InteractiveShell, pool: KernelPool, no_input: list[str]
) -> None:
    """The tests from the failing call go to the real sandbox (its comparison rewrite and
    checks), not only to the in-process fake: your code fails them, the fix passes them."""
    defaults(shell).executor = pool
    result = _raise_then_heal(shell, CELL.format(args="[-1, -2]"))
    assert result.verified
    c0 = result.attempts[0]
    assert c0.candidate == "c0" and c0.report is not None
    first = {r.test_id: (r.outcome, r.message) for r in c0.report.results}
    assert first["u1"] == (
        "failed",
        "mean_of_positive([-1, -2]) raised ZeroDivisionError, as in your notebook",
    )
    assert first["u2"][0] == "error"  # the call raised before a value could be compared
    assert result.test_outcomes()["u1"] == result.test_outcomes()["u2"] == "passed"


def test_a_fix_the_magic_defined_shows_its_lines_and_heals_again_when_it_raises(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], no_input: list[str]
) -> None:
    """The fixed function is defined from code, not from a cell: its lines are kept as a
    cell's are, so a later error shows them, and ``%selfheal`` finds the function again
    (instead of "not raised inside a function defined in a cell")."""
    first = _raise_then_heal(shell, CELL.format(args="[-1, -2]"))
    assert first.verified and first.code
    capsys.readouterr()
    res = shell.run_cell("mean_of_positive(None)", store_history=True)
    assert isinstance(res.error_in_exec, TypeError)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # without colours
    assert "pos = [x for x in xs if x > 0]" in shown  # the line that raised, in the traceback
    assert "Could not get source" not in shown
    res = shell.run_cell("%selfheal it should return 0.0 for None", store_history=True)
    assert res.error_in_exec is None, res.error_in_exec
    again: HealResult = defaults(shell).last
    assert again.run_id != first.run_id and again.entry_point == "mean_of_positive"
    c0 = again.candidates[0]
    assert (c0.id, c0.origin, c0.code.strip()) == ("c0", "user", first.code.strip())
    assert "selfheal: healing mean_of_positive() from the failing cell" in capsys.readouterr().out
