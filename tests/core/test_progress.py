"""Progress while the model writes (``selfheal.progress``): the node in flight with its
seconds and tokens so far, an estimate once the same node has run before, a live line on a
terminal and plain lines otherwise; the CLI and the notebook view feed it from the run."""

from __future__ import annotations

import io

import pytest
from cli_harness import run_cli

from selfheal import progress
from selfheal.llm.stream import ReplyStream
from selfheal.progress import _DONE, TerminalLine, TokenMeter, history_path, progress_only
from selfheal.state import Event


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _event(kind: str, node: str = "generate", **fields: float | int) -> Event:
    return Event(time=0.0, node=node, kind=kind, detail="", **fields)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def nothing_measured() -> None:
    """Each test starts with no speed measured (the earlier tests' runs measured some)."""
    _DONE.clear()
    progress._LAST["model"] = ""
    progress._LOADED.set()


def test_the_meter_shows_the_node_in_flight_and_estimates_from_its_last_run() -> None:
    clock = Clock()
    meter = TokenMeter(clock)
    assert meter.now() is None
    meter.on_event(_event("start", "repair"))
    clock.t += 3
    flight = meter.now()
    assert flight is not None and flight.node == "repair" and flight.tokens == 0
    assert "waiting for the first token" in flight.text() and flight.left is None
    for _ in range(40):
        meter.on_token("generator", "x")
        clock.t += 0.1
    flight = meter.now()
    assert flight is not None and flight.tokens == 40 and flight.rate is not None
    assert "40 tok" in flight.text() and "tok/s" in flight.text()
    meter.on_event(_event("end", "repair", completion_tokens=100, duration=7.0))
    assert meter.now() is None
    # the next repair: 100 tokens expected, at the speed seen so far
    meter.on_event(_event("start", "repair"))
    clock.t += 1
    assert meter.now() is not None and meter.now().left == 6.0  # type: ignore[union-attr]
    for _ in range(20):
        meter.on_token("generator", "x")
        clock.t += 0.1  # 10 tokens a second
    flight = meter.now()
    assert flight is not None and flight.left is not None
    assert 7.0 <= flight.left <= 9.0  # (100 - 20) tokens at about 10/s
    assert "left" in flight.text()


def test_the_estimate_comes_from_the_same_models_runs_also_from_an_earlier_process() -> None:
    """A CLI run is one process: its first ``generate`` is estimated from what ``generate``
    wrote with the same model in earlier processes (``speeds.json`` beside the runs folder),
    and another model's runs are not used once a call shows which model runs."""
    meter = TokenMeter(Clock())
    meter.on_event(_event("start", "critic"))
    meter.on_event(_event("end", "critic", completion_tokens=300, duration=9.0, model="m:big"))
    assert history_path().is_file()
    _DONE.clear()  # a new process: nothing measured in it yet
    progress._LOADED.clear()
    progress._LAST["model"] = ""
    clock = Clock()
    fresh = TokenMeter(clock)
    fresh.on_event(_event("start", "critic"))
    clock.t += 2
    assert fresh.now() is not None and fresh.now().left == 7.0  # type: ignore[union-attr]
    fresh.on_event(_event("llm", "critic", model="m:small"))  # another model answers
    assert fresh.now() is not None and fresh.now().left is None  # type: ignore[union-attr]


def test_tokens_between_nodes_are_not_counted() -> None:
    meter = TokenMeter(Clock())
    meter.on_token("generator", "x")
    meter.on_event(_event("start"))
    assert meter.now() is not None and meter.now().tokens == 0  # type: ignore[union-attr]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_live_line_cleared_before_each_finished_line() -> None:
    clock = Clock()
    meter = TokenMeter(clock)
    stream = Tty()
    line = TerminalLine(stream, meter)
    meter.on_event(_event("start"))
    clock.t += 2
    meter.on_token("generator", "x")
    line.tick()
    assert stream.getvalue().startswith("\r\x1b[2K  … generate 2s")
    line.print("  ✓ generate")
    assert stream.getvalue().endswith("\r\x1b[2K  ✓ generate\n")


def test_a_pipe_gets_a_plain_line_every_15_seconds() -> None:
    _DONE.pop("generate", None)  # no estimate: this node has not run before
    clock = Clock()
    meter = TokenMeter(clock)
    stream = io.StringIO()
    line = TerminalLine(stream, meter)
    meter.on_event(_event("start"))
    for _ in range(40):  # 20 s, ticked every half second
        clock.t += 0.5
        line.tick()
    lines = stream.getvalue().splitlines()
    assert lines == ["  … generate 15s · waiting for the first token"]
    assert "\r" not in stream.getvalue()


def test_a_counting_sink_does_not_stop_a_retry() -> None:
    """A provider's stream sees the role's one-argument sink; ``roles._calls`` marks it as
    counting when the run's sink is (``progress_only``)."""

    def counting(text: str) -> None:
        pass

    counting.progress_only = progress_only(lambda role, text: None).progress_only  # type: ignore[attr-defined]
    shown, counted = ReplyStream(lambda piece: None), ReplyStream(counting)
    for r in (shown, counted):
        r.add("def")
    assert shown.streamed and not counted.streamed


def test_the_cli_feeds_the_meter_from_the_run(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path))
    _DONE.clear()
    ran = run_cli("heal", "--provider", "mock")
    assert ran.code in (0, 1), ran.err
    # the generate node's streamed tokens reached the meter, which kept its length, with the
    # model that wrote them, and for the next process too
    [(model, done)] = [(m, d) for (m, n), d in _DONE.items() if n == "generate"]
    assert model.startswith("mock") and done and done[-1][0] > 0
    assert f"{model}|generate" in history_path().read_text()


SLOW_SCRIPT = """token_delay: 0.05
test_writer:
- |-
  ```python
  assert mean_of_positive([4]) == 4
  ```
generator:
- |-
  ```python
  def mean_of_positive(xs):
      pos = [x for x in xs if x > 0]
      return sum(pos) / len(pos) if pos else 0.0
  ```
- |-
  ```python
  def mean_of_positive(xs):
      pos = [x for x in xs if x > 0]
      if not pos:
          return 0.0
      return sum(pos) / len(pos)
  ```
"""


def test_a_terminal_sees_the_count_grow_while_generate_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``selfheal heal`` on a terminal (a pseudo-terminal) with a model that writes slowly
    (the scripted mock, ``token_delay``): the live line shows generate's tokens so far, and
    the count grows while it runs."""
    import fcntl
    import os
    import pty
    import re
    import struct
    import subprocess
    import sys
    import termios

    from cli_harness import ROOT

    script = tmp_path / "slow.yaml"
    script.write_text(SLOW_SCRIPT, encoding="utf-8")
    spec = (
        "Write mean_of_positive(xs): the mean of the positive numbers in xs, 0.0 if there "
        "are none. Example: mean_of_positive([1, 2, -3]) -> 1.5"
    )
    env = dict(os.environ, SELFHEAL_RUNS_DIR=str(tmp_path / "runs"), PYTHONPATH=str(ROOT))
    env.pop("SELFHEAL_MODEL", None)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns
    argv = [sys.executable, "-m", "selfheal", "heal", "--provider", f"mock:{script}"]
    proc = subprocess.Popen(
        [*argv, "--no-memory", spec], stdout=follower, stderr=follower, env=env, cwd=tmp_path
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=240) == 0
    os.close(leader)
    shown = b"".join(chunks).decode("utf-8", "replace")
    counts = [int(n) for n in re.findall(r"\r\x1b\[2K  … generate \d+s · (\d+) tok", shown)]
    assert len(set(counts)) >= 2, shown  # drawn more than once, with different counts
    assert counts == sorted(counts), counts  # and it only grows
    assert "✓ generate" in shown  # then the node's finished line
