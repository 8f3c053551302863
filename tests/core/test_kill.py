"""kill -9 of the process running a heal, at the two moments test_checkpoint.py does not cover:
while a candidate is executing in the sandbox, and while the run waits for a human's approval.
Either way no sandbox process outlives the killed one, the run log ends at the last checkpoint,
and the run resumes from it to a verified result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import scripted as s

from selfheal import Approve, Run
from selfheal.graph.checkpoint import list_runs, read_states
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

SLOW = s.block(
    """
import time
time.sleep(60)

def clamp(x, lo, hi):
    return min(x, hi)
"""
)
"""A candidate that takes longer than the load limit to load."""

ADVERSARY = s.block("assert clamp(3, 0, 3) == 3")

REST = {
    "oracle": [s.ORACLE_0],
    "debugger": [s.DIAG_CODE],
    "lessons": [s.LESSONS],
    "generator": [s.GOOD],
    "critic": [s.ACCEPT],
    "adversary": [ADVERSARY],
}
"""The replies a resumed run still needs."""


def _start(tmp_path: Path, runs_dir: Path, body: str) -> subprocess.Popen[bytes]:
    """A child process running ``body`` (after the scripted chain's imports), its sandbox
    kernels under ``tmp_path/tmp``."""
    child = tmp_path / "child.py"
    child.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            sys.path[:0] = [{str(ROOT)!r}, {str(HERE)!r}]
            import scripted as s
            from selfheal import Run, HealRequest
            from selfheal.llm.mock import MockProvider
            """
        )
        + textwrap.dedent(body)
    )
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, SELFHEAL_RUNS_DIR=str(runs_dir), TMPDIR=str(tmp_path / "tmp"))
    return subprocess.Popen(
        [sys.executable, str(child)],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "child.err").open("wb"),
        env=env,
        start_new_session=True,
    )


def _until(what: str, ok: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not ok():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def _at_execute(runs_dir: Path) -> bool:
    """The run's last checkpoint is the one before its execute node."""
    logs = list(runs_dir.glob("*.jsonl"))
    if not logs:
        return False
    try:
        saved = read_states(logs[0])
    except Exception:  # a line the run is writing right now
        return False
    return bool(saved) and saved[-1].next == "execute"


def _sandbox_processes(under: Path) -> list[psutil.Process]:
    """Live processes whose command line or working directory is under ``under``."""
    found = []
    for p in psutil.process_iter(["cmdline", "cwd", "status"]):
        try:
            where = " ".join(p.info["cmdline"] or []) + " " + (p.info["cwd"] or "")
            if str(under) in where and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _none_left(under: Path) -> None:
    deadline = time.monotonic() + 30
    while (left := _sandbox_processes(under)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"sandbox processes outlived the killed run: {left}"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # the process alone, as the OOM killer would
    proc.wait()


def test_killed_while_a_candidate_runs(pool: KernelPool, runs_dir: Path, tmp_path: Path) -> None:
    script = {"test_writer": [s.TESTS], "generator": [SLOW], "adversary": [ADVERSARY]}
    proc = _start(
        tmp_path,
        runs_dir,
        f"Run.start(HealRequest(s.SPEC, provider=MockProvider({script!r}), config=s.chain())).run()\n",
    )
    tmp = tmp_path / "tmp"
    try:
        # the run's folder is a tmpfs only the kernel's mount namespace sees: the test waits
        # for the checkpoint before execute, then for the candidate to be loading
        _until("the candidate ran", lambda: _at_execute(runs_dir), proc)
        time.sleep(3)  # the candidate sleeps 60 s while it loads (the load limit is 10 s)
        assert proc.poll() is None, "the run ended before it was killed"
        assert _sandbox_processes(tmp), "no sandbox process to outlive the run"
    finally:
        _kill(proc)
    _none_left(tmp)
    (log,) = list_runs()
    saved = read_states(log)
    assert saved[-1].next == "execute" and saved[-1].status == "running"
    assert saved[-1].attempts == ()  # the interrupted execution left nothing half-recorded
    # resumed: the slow candidate runs again, hits the load limit, and the repair verifies
    resumed = Run.load(log, provider=MockProvider(REST), executor=pool).run()
    assert resumed.status == "verified"
    first = resumed.attempts[0].report
    assert first is not None and first.load.outcome == "timeout"
    assert [st.step for st in read_states(log)] == sorted(st.step for st in read_states(log))


def test_killed_while_awaiting_approval(pool: KernelPool, runs_dir: Path, tmp_path: Path) -> None:
    script = {
        "test_writer": [s.TESTS],
        "generator": [s.BUGGY, s.GOOD],
        "adversary": [ADVERSARY],
        "oracle": [s.ORACLE_0],
        "debugger": [s.DIAG_CODE],
        "lessons": [s.LESSONS],
    }
    proc = _start(
        tmp_path,
        runs_dir,
        f"""
        def waits(proposal, state):
            print("WAITING", proposal.kind, flush=True)
            time.sleep(600)

        config = s.chain(autonomy="review_repairs")
        request = HealRequest(s.SPEC, provider=MockProvider({script!r}), config=config)
        Run.start(request).run(waits)
        """,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == [b"WAITING", b"repair"]
    finally:
        _kill(proc)
    _none_left(tmp_path / "tmp")
    (log,) = list_runs()
    saved = read_states(log)
    assert saved[-1].status == "awaiting_approval" and saved[-1].pending is not None
    # the decision the killed process never got, given to the saved run
    resumed = Run.load(log, provider=MockProvider(REST), executor=pool).resume(Approve())
    assert resumed.status == "verified"
    assert [d.kind for d in resumed.state.decisions] == ["approve"]
