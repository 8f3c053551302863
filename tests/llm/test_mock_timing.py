"""The scripted mock as a slow model: ``latency`` before a reply, ``token_delay`` before each
streamed word, so a progress display sees the count grow while a call runs (the browser test of
the live token counter uses it through a ``mock:script.yaml``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfheal.errors import ConfigError
from selfheal.llm import Message
from selfheal.llm import mock as mock_module
from selfheal.llm.mock import MockProvider

HI = (Message(role="user", content="hi"),)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Every ``asyncio.sleep`` the mock makes, in order with the pieces it streams (no real
    waiting: the test checks where the waits go, not how long they took)."""
    seen: list[tuple[str, float]] = []

    async def sleep(seconds: float) -> None:
        seen.append(("sleep", seconds))

    monkeypatch.setattr(mock_module.asyncio, "sleep", sleep)
    return seen


def test_each_streamed_word_waits_token_delay(sleeps: list[tuple[str, float]]) -> None:
    mock = MockProvider({"generator": ["def f(): return 1"]}, latency=0.5, token_delay=0.25)
    reply = mock.complete(
        HI, role="generator", on_token=lambda piece: sleeps.append(("token", len(piece)))
    )
    assert reply.text == "def f(): return 1"
    # the latency first, then a wait before each of the four words, each streamed after its wait
    assert sleeps == [
        ("sleep", 0.5),
        ("sleep", 0.25),
        ("token", len("def ")),
        ("sleep", 0.25),
        ("token", len("f(): ")),
        ("sleep", 0.25),
        ("token", len("return ")),
        ("sleep", 0.25),
        ("token", len("1")),
    ]
    assert reply.latency == 0.5 + 4 * 0.25  # what the call took, as a model's latency says


def test_a_reply_nobody_streams_takes_as_long(sleeps: list[tuple[str, float]]) -> None:
    mock = MockProvider({"generator": ["a b c"]}, token_delay=0.1)
    assert mock.complete(HI, role="generator").latency == pytest.approx(0.3)
    assert sleeps == [("sleep", 0.1)] * 3


def test_a_script_file_sets_the_speed(tmp_path: Path, sleeps: list[tuple[str, float]]) -> None:
    script = tmp_path / "slow.yaml"
    script.write_text("latency: 1\ntoken_delay: 0.2\ngenerator:\n- one two\n", encoding="utf-8")
    mock = MockProvider.from_string(str(script))
    assert mock.complete(HI, role="generator").text == "one two"
    assert sleeps == [("sleep", 1.0), ("sleep", 0.2), ("sleep", 0.2)]


@pytest.mark.parametrize("value", ["-1", "fast", "true"])
def test_a_bad_token_delay_is_a_clear_error(tmp_path: Path, value: str) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text(f"token_delay: {value}\ngenerator:\n- x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.yaml: token_delay must be a number of seconds"):
        MockProvider.from_file(script)
    with pytest.raises(ConfigError, match="token_delay are seconds >= 0"):
        MockProvider({}, token_delay=-1)
