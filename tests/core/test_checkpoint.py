"""Run logs: a run killed mid-way resumes with nothing lost; forks keep both histories."""

from __future__ import annotations

import json
import lzma
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import scripted as s

from selfheal import HealRequest, Run
from selfheal.errors import ConfigError
from selfheal.graph.checkpoint import list_runs, read_states
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.state import HealState

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

SCRIPT = {
    "test_writer": [s.TESTS],
    "generator": [s.BUGGY, s.GOOD],
    "adversary": [s.block("assert clamp(3, 0, 3) == 3")],
    "oracle": [s.ORACLE_0],
    "debugger": [s.DIAG_CODE],
    "lessons": [s.LESSONS],
    "critic": [s.ACCEPT],
}


def comparable(state: HealState) -> dict[str, object]:
    """What must be equal between an interrupted-and-resumed run and an uninterrupted one."""
    return {
        "status": state.status,
        "iteration": state.iteration,
        "final_code": state.final_code,
        "tests": [(t.id, t.origin, t.code, t.trusted, t.quarantined) for t in state.tests],
        "attempts": [
            (
                a.iteration,
                a.code,
                a.strategy,
                [(r.test_id, r.outcome) for r in a.report.results] if a.report else None,
            )
            for a in state.attempts
        ],
        "diagnoses": [(d.root_cause, d.blame) for d in state.diagnoses],
        "lessons": [lesson.text for lesson in state.lessons],
        "nodes": [e.node for e in state.events if e.kind == "end"],
        "usage": (state.usage.calls, state.usage.prompt_tokens, state.usage.completion_tokens),
    }


def test_killed_run_resumes_to_the_same_result(
    pool: KernelPool, runs_dir: Path, tmp_path: Path
) -> None:
    # the child process runs the same script but its debugger hangs: we kill -9 it there
    child = tmp_path / "child.py"
    child.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            sys.path[:0] = [{str(ROOT)!r}, {str(HERE)!r}]
            import scripted as s
            from test_checkpoint import SCRIPT
            from selfheal import Run, HealConfig, HealRequest
            from selfheal.llm.mock import MockProvider

            def hang(messages):
                print("HANGING", flush=True)
                time.sleep(600)
                return ""

            script = dict(SCRIPT, debugger=[hang])
            Run.start(HealRequest(s.SPEC, provider=MockProvider(script), config=s.chain())).run()
            """
        )
    )
    env = dict(os.environ, SELFHEAL_RUNS_DIR=str(runs_dir))
    proc = subprocess.Popen(
        [sys.executable, str(child)], stdout=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert b"HANGING" in line
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    logs = list_runs()
    assert len(logs) == 1
    saved = read_states(logs[0])
    assert (
        saved[-1].next == "diagnose" and saved[-1].iteration == 1
    )  # checkpoint before the hung node

    # resume with a provider whose script starts where the dead one stopped
    rest = {
        "oracle": [s.ORACLE_0],
        "debugger": [s.DIAG_CODE],
        "lessons": [s.LESSONS],
        "generator": [s.GOOD],
        "critic": [s.ACCEPT],
    }
    resumed = Run.load(logs[0], provider=MockProvider(rest), executor=pool).run()

    # a memory of its own: the run above remembered its verified solution, which would settle
    # a second run of the same spec in the first round
    fresh = s.chain(memory_path=str(tmp_path / "fresh-memory.sqlite3"))
    uninterrupted = Run.start(
        HealRequest(s.SPEC, provider=MockProvider(SCRIPT), config=fresh, executor=pool)
    ).run()
    assert resumed.status == "verified"
    assert comparable(resumed.state) == comparable(uninterrupted.state)
    # the log holds every state, old and new, in order
    states = read_states(logs[0])
    assert [st.step for st in states] == sorted(st.step for st in states)
    assert states[-1].status == "verified"


def test_torn_last_line_is_ignored(pool: KernelPool) -> None:
    run = Run.start(
        HealRequest(s.SPEC, provider=MockProvider(SCRIPT), config=s.chain(), executor=pool)
    )
    for _ in range(3):
        run.step()
    assert run.path is not None
    with open(run.path, "a", encoding="utf-8") as f:
        f.write('{"run_id": "half a line')
    loaded = Run.load(run.path, provider=MockProvider({}), executor=pool)
    assert loaded.state.step == 3


def test_fork_with_other_lessons_and_code_keeps_both_histories(pool: KernelPool) -> None:
    parent = Run.start(
        HealRequest(s.SPEC, provider=MockProvider(SCRIPT), config=s.chain(), executor=pool)
    )
    done = parent.run()
    assert done.status == "verified" and done.iterations == 2
    parent_log = parent.history()

    # fork at iteration 1 with human-edited code: it runs the edit instead of the buggy version
    fixed = "def clamp(x, lo, hi):\n    return min(max(x, lo), hi)\n"
    child = parent.fork(
        1,
        code=fixed,
        lessons=["Use min(max(x, lo), hi)."],
        provider=MockProvider({"critic": [s.ACCEPT]}),
    )
    assert child.state.parent is not None and child.state.parent.run_id == done.run_id
    assert child.state.parent.changes == ("lessons", "code")
    out = child.run()
    assert out.status == "verified" and out.iterations == 1 and out.code == fixed
    assert out.lessons == ("Use min(max(x, lo), hi).",)

    # the parent's log is untouched; both logs exist
    assert [st.model_dump() for st in parent.history()] == [st.model_dump() for st in parent_log]
    assert child.path != parent.path and child.path is not None and child.path.exists()
    assert len(list_runs()) == 2


def test_fork_at_zero_with_another_model(pool: KernelPool) -> None:
    from selfheal.llm.mock import DEMO_SPEC

    parent = Run.start(HealRequest(DEMO_SPEC, provider="mock", executor=pool))
    assert parent.run().status == "verified"
    child = parent.fork(0, model="mock")
    assert child.state.iteration == 0 and child.state.next == "generate"
    assert child.state.config.calls.model == "mock" and child.state.parent is not None
    assert child.state.parent.changes == ("model",)
    assert child.run().status == "verified"  # a fresh demo script replays from generation


def test_run_log_is_json_lines(pool: KernelPool) -> None:
    run = Run.start(
        HealRequest(s.SPEC, provider=MockProvider(SCRIPT), config=s.chain(), executor=pool)
    )
    run.run()
    assert run.path is not None
    lines = run.path.read_text().splitlines()
    assert len(lines) == run.state.step + 1  # the initial state, then one per node
    assert json.loads(lines[-1])["status"] == "verified"


def test_a_run_whose_model_came_from_the_environment_reopens_with_it(
    pool: KernelPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from selfheal import HealConfig
    from selfheal.demo import DEMO_SPEC

    monkeypatch.setenv("SELFHEAL_MODEL", "mock")
    config = HealConfig(autonomy="review_repairs", memory=False)
    paused = Run.start(HealRequest(DEMO_SPEC, config=config, executor=pool)).run()
    assert paused.status == "awaiting_approval"
    # the log names the model the environment chose, not "whatever SELFHEAL_MODEL says later"
    saved = read_states(list_runs()[0])[-1]
    assert saved.config.calls.model == "mock:demo" and not saved.config.calls.models
    monkeypatch.delenv("SELFHEAL_MODEL")
    reopened = Run.load(paused.run_id, executor=pool)
    assert reopened.state.status == "awaiting_approval"
    assert reopened.state.config.calls.model == "mock:demo"


def test_a_run_given_a_provider_object_must_be_given_it_again(
    pool: KernelPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from selfheal.errors import ConfigError

    done = Run.start(
        HealRequest(
            s.SPEC, provider=MockProvider(s.repair_script()), config=s.chain(), executor=pool
        )
    ).run()
    assert done.state.config.calls.model is None  # the object is not saved in the log
    with pytest.raises(ConfigError, match="provider object"):
        Run.load(done.run_id, executor=pool)


def test_an_xz_compressed_log_reads_like_the_plain_one(pool: KernelPool, tmp_path: Path) -> None:
    run = Run.start(
        HealRequest(s.SPEC, provider=MockProvider(SCRIPT), config=s.chain(), executor=pool)
    )
    run.run()
    assert run.path is not None
    packed = tmp_path / f"{run.path.stem}.jsonl.xz"
    packed.write_bytes(lzma.compress(run.path.read_bytes()))
    assert read_states(packed) == read_states(run.path)
    broken = tmp_path / "broken.jsonl.xz"
    broken.write_bytes(b"not xz at all")
    with pytest.raises(ConfigError, match="not a readable xz archive"):
        read_states(broken)
