"""Every bad input gets a clear error and loses nothing (issue 14).

The command line runs in this process through ``selfheal.cli.main`` (what the ``selfheal``
script calls), except where a real process matters (bytes in argv, tracebacks on stderr).
Each row of the issue's table is a test asserting the exit code and a phrase of the message.
A run that does start uses the session's real kernel pool; ``kernels_started`` records
whether a command got as far as asking for one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_harness import run_cli, run_process

import selfheal
from selfheal import HealConfig
from selfheal.errors import ConfigError, ProviderError, ProviderUnavailable
from selfheal.graph.checkpoint import list_runs, read_states
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import DEMO_SPEC, MockProvider

ADD_SPEC = "Write a function add(a, b) that returns a + b. Example: add(1, 2) -> 3"
GOOD_ADD = "```python\ndef add(a, b):\n    return a + b\n```"


@pytest.fixture
def kernels_started(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> list[KernelPool]:
    """The default pool is the session's pool; the list records every time a run asked."""
    asked: list[KernelPool] = []

    def pool() -> KernelPool:
        asked.append(request.getfixturevalue("pool"))
        return asked[-1]

    monkeypatch.setattr("selfheal.kernel_sandbox.get_default_pool", pool)
    return asked


def _no_run_started(runs_dir: Path, kernels: list[KernelPool]) -> None:
    assert not kernels, "a kernel pool was asked for"
    assert list_runs(str(runs_dir)) == [], "a run log was written"


# -- the table of issue 14 ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["--max-iterations", "0"], "--max-iterations 0: must be at least 1"),
        (["--max-iterations", "-1"], "--max-iterations -1: must be at least 1"),
        (["--time-budget", "-1"], "--time-budget -1.0: must be greater than 0"),
        (["--debugger-steps", "50"], "--debugger-steps 50: must be at most 10"),
        (["--token-budget", "0"], "--token-budget 0: must be at least 1"),
        (["--test-timeout", "0"], "--test-timeout 0.0: must be greater than 0"),
        (["--candidates", "17"], "--candidates 17: must be at most 16"),
        (["--agreement", "0"], "--agreement 0: must be at least 1"),
        (["--first-sample", "0"], "--first-sample 0: must be at least 1"),
        (["--max-iterations", "many"], "argument --max-iterations: invalid int value: 'many'"),
        (["--autonomy", "sometimes"], "argument --autonomy: invalid choice: 'sometimes'"),
    ],
)
def test_out_of_range_options_exit_2_naming_the_flag(
    argv: list[str], phrase: str, runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", *argv)
    assert ran.code == 2
    assert ran.err.startswith("selfheal: error: ") and phrase in ran.err
    assert "Traceback" not in ran.err and ran.out == ""
    _no_run_started(runs_dir, kernels_started)


def test_a_spec_that_is_not_utf8_is_reported_with_its_byte_offset(runs_dir: Path) -> None:
    # a real process: the shell hands over bytes, Python escapes the invalid ones
    ran = run_process("heal", "--provider", "mock", b"Return the \xff median", runs_dir=runs_dir)
    assert ran.code == 2
    assert "The spec is not valid UTF-8: byte 0xff at byte offset 11 (after 'Return the ')" in (
        ran.err
    )
    assert "Traceback" not in ran.err and "PydanticSerializationError" not in ran.err
    assert list_runs(str(runs_dir)) == []


@pytest.mark.parametrize("command", ["fork", "resume"])
def test_missing_or_non_utf8_code_files_exit_2_before_the_run_loads(
    command: str, tmp_path: Path, runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    run_id = _paused_demo_log(runs_dir)
    flag = ["--at", "1", "--code-file"] if command == "fork" else ["--edit"]
    missing = run_cli("runs", command, run_id, *flag, str(tmp_path / "nope.py"))
    assert missing.code == 2 and "nope.py' does not exist" in missing.err
    latin = tmp_path / "latin1.py"
    raw = b"def median(v):\n    return 'caf\xe9'\n"
    latin.write_bytes(raw)
    bad = run_cli("runs", command, run_id, *flag, str(latin))
    assert bad.code == 2
    offset = raw.index(b"\xe9")
    assert f"is not valid UTF-8: byte 0xe9 at byte offset {offset}" in bad.err
    broken = tmp_path / "broken.py"
    broken.write_text("def median(v:\n")
    unparsable = run_cli("runs", command, run_id, *flag, str(broken))
    assert unparsable.code == 2 and "is not valid Python" in unparsable.err
    assert not kernels_started  # every file is checked before the run is loaded
    assert len(list_runs(str(runs_dir))) == 1  # no fork was made


def test_an_unwritable_out_file_is_refused_before_the_run(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", "--out", "/missing/dir/x.py")
    assert ran.code == 2
    assert (
        "Cannot write --out '/missing/dir/x.py': the directory '/missing/dir' does not exist"
        in (ran.err)
    )
    _no_run_started(runs_dir, kernels_started)


def test_when_writing_fails_at_the_end_the_code_is_printed_and_kept(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    # /dev/full passes every check before the run and fails the write (ENOSPC) after it
    text = run_cli("heal", "--provider", "mock", "--quiet", "--out", "/dev/full")
    assert text.code == 2
    assert "Could not write the code to '/dev/full'" in text.err
    assert "it is printed above and kept in the run log" in text.err
    assert "return (ordered[mid - 1] + ordered[mid]) / 2" in text.out
    (log,) = list_runs(str(runs_dir))
    assert str(log) in text.err
    assert "return (ordered[mid - 1]" in (read_states(log)[-1].final_code or "")
    as_json = run_cli("heal", "--provider", "mock", "--quiet", "--json", "--out", "/dev/full")
    data = as_json.json()
    assert as_json.code == 2 and data["status"] == "error" and data["exit_code"] == 2
    assert data["run_status"] == "verified" and "def median" in data["code"]
    assert "in this JSON object's `code`" in data["error"]


def test_a_test_that_does_not_parse_is_refused(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", "--test", "assert (")
    assert ran.code == 2
    assert "Your test 1 is not valid Python ('(' was never closed, line 1, column 8)" in ran.err
    _no_run_started(runs_dir, kernels_started)


def test_a_long_spec_comes_in_by_file_or_stdin_and_a_huge_one_is_refused(
    tmp_path: Path, runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    from_stdin = run_cli("heal", "-", "--provider", "mock", "--quiet", stdin=DEMO_SPEC.encode())
    assert from_stdin.code == 0, from_stdin.err
    assert "VERIFIED" in from_stdin.out
    spec_file = tmp_path / "spec.txt"
    spec_file.write_text(DEMO_SPEC + "\n")
    from_file = run_cli("heal", "--spec-file", str(spec_file), "--provider", "mock", "--quiet")
    assert from_file.code == 0, from_file.err
    huge = tmp_path / "huge.txt"
    huge.write_text("Return the median of a list of numbers. " * 3000)
    too_long = run_cli("heal", "--spec-file", str(huge), "--provider", "mock")
    assert too_long.code == 2
    assert "The spec is 120,000 characters long; the limit is 20,000" in too_long.err
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Return the médian of numbers".encode("latin-1"))
    assert (
        "not valid UTF-8: byte 0xe9 at byte offset 12"
        in run_cli("heal", "--spec-file", str(latin), "--provider", "mock").err
    )
    utf16 = run_cli("heal", "-", "--provider", "mock", stdin=DEMO_SPEC.encode("utf-16"))
    assert utf16.code == 2 and "The spec read from stdin is UTF-16 text, not UTF-8" in utf16.err
    both = run_cli("heal", "x", "--spec-file", str(spec_file))
    assert both.code == 2 and "Give the spec once" in both.err
    assert len(list_runs(str(runs_dir))) == 2  # the two good ones


def test_a_megabyte_spec_through_the_api_is_refused_before_anything_runs(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    mock = MockProvider({"generator": [GOOD_ADD]})
    with pytest.raises(ConfigError, match=r"1,048,\d+ characters long; the limit is 20,000"):
        selfheal.heal(ADD_SPEC + " " + "x" * (1 << 20), provider=mock)
    assert mock.calls == []
    _no_run_started(runs_dir, kernels_started)


def test_a_spec_that_names_no_function_is_refused(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", "make it better")
    assert ran.code == 2
    assert "The spec 'make it better' does not say what function to write" in ran.err
    assert "--entry-point NAME" in ran.err
    _no_run_started(runs_dir, kernels_started)


def test_runs_list_skips_and_names_unreadable_logs(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    run_id = _paused_demo_log(runs_dir)
    (runs_dir / "corrupt.jsonl").write_text("not json\n")
    (runs_dir / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    ran = run_cli("runs", "list")
    assert ran.code == 0
    assert run_id in ran.out and "awaiting_approval" in ran.out
    assert "skipped 2 unreadable run log(s)" in ran.err
    assert "corrupt.jsonl: Run log" in ran.err and "is corrupt at line 1" in ran.err
    assert "binary.jsonl: Run log" in ran.err and "is not UTF-8 text (byte offset 0)" in ran.err
    shown = run_cli("runs", "show", "corrupt")
    assert shown.code == 2 and "is corrupt at line 1" in shown.err


def test_an_unknown_provider_leaves_no_run_behind(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "foo:bar", ADD_SPEC)
    assert ran.code == 2
    assert "Unknown model string 'foo:bar': 'foo' is not a backend" in ran.err
    _no_run_started(runs_dir, kernels_started)
    assert run_cli("runs", "list").out.strip() == "no runs yet"


def test_a_real_provider_without_a_spec_exits_2(runs_dir: Path) -> None:
    ran = run_cli("heal", "--provider", "local")
    assert ran.code == 2
    assert "No spec given" in ran.err and "--spec-file PATH" in ran.err


def test_a_review_outside_a_terminal_shows_the_proposal_not_the_old_code(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", "--quiet", "--autonomy", "review_repairs")
    assert ran.code == 3, ran.err
    assert "repair proposal awaiting approval" in ran.out
    assert "diagnosis: For an even number of values" in ran.out
    assert "+    if not values:" in ran.out and "-    return ordered[len(ordered) // 2]" in ran.out
    run_id = run_cli("runs", "list").out.split()[0]
    shown = run_cli("runs", "show", run_id)
    assert shown.code == 0
    assert "diagnosis: For an even number of values" in shown.out
    assert "+    if not values:" in shown.out and f"selfheal runs resume {run_id}" in shown.out
    data = run_cli("runs", "show", run_id, "--json").json()
    pending = data["pending"]
    assert data["status"] == "awaiting_approval" and pending["kind"] == "repair"
    assert pending["diagnosis"]["category"] == "edge_case"
    assert "+    if not values:" in pending["diff"] and pending["candidates"] == ["c5", "c6", "c7"]
    heal_json = run_cli(
        "heal", "--provider", "mock", "--quiet", "--autonomy", "review_repairs", "--json"
    )
    assert heal_json.code == 3 and heal_json.json()["pending"]["diff"] == pending["diff"]


def test_the_mock_refuses_a_spec_it_has_no_script_for_with_one_json_object(
    runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", "--json", ADD_SPEC)
    assert ran.code == 2
    data = ran.json()
    assert data["status"] == "error" and data["exit_code"] == 2 and data["run_id"] is None
    for real in ("--provider local", "ollama:MODEL", "anthropic:MODEL", "openai:MODEL"):
        assert real in data["error"]
    assert "MockScriptExhausted" not in ran.err
    _no_run_started(runs_dir, kernels_started)


@pytest.mark.parametrize(
    ("options", "status", "code"),
    [
        (["--candidates", "8", "--max-iterations", "3"], "verified", 0),
        (["--debugger-steps", "3", "--critic", "--adversarial"], "verified", 0),
        # review_all stops before the first candidate runs: exit 3, the run waits for approval
        (["--candidates", "1", "--no-spec-tests", "--autonomy", "review_all"],
         "awaiting_approval", 3),
        (["--candidates", "1", "--agreement", "1", "--max-iterations", "3"], "verified", 0),
        (["--first-sample", "1", "--candidates", "3"], "verified", 0),
    ],
)  # fmt: skip
def test_the_demo_ends_as_each_option_set_implies(
    options: list[str], status: str, code: int, runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    ran = run_cli("heal", "--provider", "mock", "--quiet", "--json", *options)
    data = ran.json()
    assert (data["status"], ran.code, data["exit_code"]) == (status, code, code), ran.err
    assert "MockScriptExhausted" not in ran.err and data["code"]


# -- the error boundary, --debug and --json ---------------------------------------------------


def test_tracebacks_only_with_debug(runs_dir: Path) -> None:
    plain = run_process("heal", "--provider", "mock", "--max-iterations", "0", runs_dir=runs_dir)
    assert plain.code == 2 and "Traceback" not in plain.err
    flag = run_process(
        "heal", "--provider", "mock", "--max-iterations", "0", "--debug", runs_dir=runs_dir
    )
    env = run_process(
        "heal",
        "--provider",
        "mock",
        "--max-iterations",
        "0",
        runs_dir=runs_dir,
        env={"SELFHEAL_DEBUG": "1"},
    )
    for ran in (flag, env):
        assert ran.code == 2
        assert "Traceback (most recent call last)" in ran.err and "ConfigError" in ran.err
        assert "--max-iterations 0: must be at least 1" in ran.err


def test_an_internal_error_says_it_is_a_bug_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, runs_dir: Path
) -> None:
    def broken(run: str) -> Path:
        raise KeyError("oops")

    monkeypatch.setattr("selfheal.cli.runs.find_run", broken)
    ran = run_cli("runs", "show", "someid", "--json")
    assert ran.code == 2
    assert "internal error (KeyError: 'oops'). This is a bug in selfheal" in ran.err
    assert "Traceback" not in ran.err
    assert ran.json()["error_type"] == "KeyError"
    assert "Traceback" in run_cli("runs", "show", "someid", "--debug").err


def test_a_closed_stdout_ends_quietly(monkeypatch: pytest.MonkeyPatch, runs_dir: Path) -> None:
    def closed(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("selfheal.cli.runs._runs_list", closed)
    ran = run_cli("runs", "list")
    assert ran.code == 141 and ran.err == "" and ran.out == ""


def test_json_usage_errors_are_one_json_object(runs_dir: Path) -> None:
    ran = run_cli("heal", "--json", "--candidates", "x")
    assert ran.code == 2
    data = ran.json()
    assert data["status"] == "error" and "invalid int value: 'x'" in data["error"]
    assert data["code"] is None and data["verified"] is False
    shown = run_cli("runs", "show", "nosuchrun", "--json")
    assert shown.code == 2 and "No run 'nosuchrun'" in shown.json()["error"]


def test_a_provider_error_mid_run_still_prints_one_json_object_with_the_run(
    tmp_path: Path, runs_dir: Path, kernels_started: list[KernelPool]
) -> None:
    script = tmp_path / "short.yaml"
    script.write_text(
        json.dumps({"generator": ["```python\ndef add(a, b):\n    return a - b\n```"]})
    )
    ran = run_cli("heal", "--provider", f"mock:{script}", "--quiet", "--json", ADD_SPEC)
    assert ran.code == 2
    data = ran.json()
    assert data["status"] == "error" and data["run_status"] == "running"
    assert "has 1 replies and reply #2 was asked for" in data["error"]
    assert "Nothing is lost: the run is checkpointed" in data["error"]
    assert data["run_id"] and data["path"] and "return a - b" in data["code"]


# -- the API ----------------------------------------------------------------------------------


class _NoSandbox:
    """An executor that must not be used."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the sandbox was used ({name}) before the input was checked")


@pytest.mark.parametrize(
    ("call", "phrase"),
    [
        (lambda m: selfheal.heal(ADD_SPEC, provider=m, config={"max_iterations": 0}),
         "max_iterations=0: must be at least 1"),
        (lambda m: selfheal.heal(b"Return the \xff sum: add(1, 2) -> 3", provider=m),
         "byte 0xff at byte offset 11"),
        (lambda m: selfheal.heal("Return add(a, b).\x00", provider=m),
         "contains a NUL byte at byte offset 17"),
        (lambda m: selfheal.heal(ADD_SPEC, provider=m, tests=["assert add(1, 2) =="]),
         "Your test 1 is not valid Python"),
        (lambda m: selfheal.heal(ADD_SPEC, provider=m, entry_point="1add"),
         "'1add' is not a Python function name"),
        (lambda m: selfheal.heal(ADD_SPEC, provider="foo:bar"), "Unknown model string 'foo:bar'"),
        (lambda m: selfheal.heal(ADD_SPEC, provider="mock"), "only replays its scripted median demo"),
        (lambda m: selfheal.heal("   ", provider=m), "The spec is empty"),
        (lambda m: selfheal.heal("make it better", provider=m), "does not say what function"),
    ],
)  # fmt: skip
def test_the_api_raises_config_error_before_any_model_call_or_kernel_start(
    call: Callable[[MockProvider], object],
    phrase: str,
    runs_dir: Path,
    kernels_started: list[KernelPool],
) -> None:
    mock = MockProvider({"generator": [GOOD_ADD]})
    with pytest.raises(ConfigError) as info:
        call(mock)
    assert phrase in str(info.value)
    assert mock.calls == []
    _no_run_started(runs_dir, kernels_started)


def test_a_config_mistake_is_a_config_error_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"time_budget=-1: must be greater than 0"):
        HealConfig(time_budget=-1)
    with pytest.raises(ConfigError, match=r"bogus=1: is not an option of HealConfig"):
        HealConfig(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"test_timeout=inf: input should be a finite number"):
        HealConfig(test_timeout=float("inf"))


def test_a_run_that_fails_before_any_work_is_failed_not_running(
    runs_dir: Path, pool: KernelPool
) -> None:
    down = MockProvider({"generator": [ProviderUnavailable("the server is down")]})
    with pytest.raises(ProviderUnavailable) as info:
        selfheal.heal(ADD_SPEC, provider=down, executor=pool)
    assert "stopped before any work and is marked failed" in "\n".join(info.value.__notes__)
    (log,) = list_runs(str(runs_dir))
    last = read_states(log)[-1]
    assert last.status == "failed" and last.next == "done"
    assert "ProviderUnavailable: the server is down" in last.error
    # with work done, the run stays resumable
    later = MockProvider(
        {"generator": ["```python\ndef add(a, b):\n    return a - b\n```"]},
    )
    with pytest.raises(ProviderError):
        selfheal.heal(ADD_SPEC, provider=later, executor=pool)
    newest = max(list_runs(str(runs_dir)), key=lambda p: p.stat().st_mtime)
    assert read_states(newest)[-1].status == "running"


def _paused_demo_log(runs_dir: Path) -> str:
    """A run log of the demo paused for approval, made without a run: its first state."""
    from selfheal.request import HealRequest
    from selfheal.state import Proposal

    state = HealRequest(
        DEMO_SPEC, provider="mock", config=HealConfig(autonomy="review_repairs")
    ).initial_state()
    paused = state.model_copy(
        update={
            "status": "awaiting_approval",
            "iteration": 1,
            "pending": Proposal(kind="repair", code="def median(v):\n    return 0\n"),
        }
    )
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / f"{state.run_id}.jsonl").write_text(
        state.model_dump_json() + "\n" + paused.model_dump_json() + "\n"
    )
    return state.run_id


def test_a_killed_run_resumes_and_leaves_no_sandbox_directory(tmp_path: Path) -> None:
    """Issue 14: /tmp/selfheal-k-* directories were left behind after a killed run was
    resumed. Kill a CLI run mid-way (SIGKILL: no cleanup runs), resume it: it finishes, and
    the killed process's directories are gone too."""
    import os
    import signal
    import subprocess
    import sys

    from cli_harness import ROOT

    tmp, runs = tmp_path / "tmp", tmp_path / "runs"
    tmp.mkdir()
    script = tmp_path / "slow.yaml"
    wrong = "```python\ndef add(a, b):\n    return a - b\n```"
    diagnosis = json.dumps(
        {"root_cause": "subtracts", "category": "logic", "repair_strategy": "add",
         "confidence": 0.9, "blame": "code", "wrong_tests": []}
    )  # fmt: skip
    script.write_text(
        json.dumps({"latency": 2, "generator": [wrong] + [GOOD_ADD] * 8, "debugger": [diagnosis]})
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp), SELFHEAL_RUNS_DIR=str(runs))
    env.pop("SELFHEAL_MODEL", None)
    cmd = [sys.executable, "-m", "selfheal", "heal", "--provider", f"mock:{script}", ADD_SPEC]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    seen = []
    for raw in proc.stderr:  # wait until candidates ran in the sandbox
        seen.append(raw.decode())
        if "✓ select" in seen[-1]:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert any(p.name.startswith("selfheal-k-") for p in tmp.iterdir()), seen
    (log,) = list_runs(str(runs))
    assert read_states(log)[-1].status == "running"
    resumed = run_process(
        "runs", "resume", log.stem, "--json", runs_dir=runs, env={"TMPDIR": str(tmp)}
    )
    assert resumed.code in (0, 1), resumed.err
    assert resumed.json()["run_id"] == log.stem
    assert sorted(p.name for p in tmp.iterdir()) == []
