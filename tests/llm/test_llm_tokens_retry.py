"""Token counting/trimming, and the retry policy's arithmetic."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from selfheal.errors import (
    AuthenticationFailed,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from selfheal.llm.base import Message
from selfheal.llm.retry import (
    Failure,
    RetryPolicy,
    acall_with_retry,
    backoff_delay,
    failure_for_status,
    parse_retry_after,
    retry_after_from_headers,
)
from selfheal.llm.tokens import (
    count_tokens,
    estimate_tokens,
    message_tokens,
    trim_history,
    trim_text,
    trim_traceback,
)


class WordCounter:
    """A 'tokenizer' that counts words, to check the real-count path is used."""

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_estimate_and_real_count() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcdefg") == 2
    assert count_tokens("one two three four five six seven") == 10  # 34 chars / 3.5
    assert count_tokens("one two three", WordCounter()) == 3
    assert count_tokens("one two three", object()) == 4  # no count_tokens: estimate


def test_trim_text_fits_unchanged() -> None:
    assert trim_text("short", 100) == "short"
    assert trim_text("anything", 0) == ""


LOG = "\n".join(f"line {i:03d} of the log" for i in range(200))


@pytest.mark.parametrize("keep", ["end", "start", "both"])
def test_trim_text_respects_budget_and_marks_cut(keep: str) -> None:
    trimmed = trim_text(LOG, 100, keep=keep)  # type: ignore[arg-type]
    assert count_tokens(trimmed) <= 110
    assert "characters cut" in trimmed
    if keep in {"end", "both"}:
        assert trimmed.endswith("line 199 of the log")
    if keep in {"start", "both"}:
        assert trimmed.startswith("line 000 of the log")
    if keep == "end":
        assert "line 000" not in trimmed
    if keep == "start":
        assert "line 199" not in trimmed


def test_trim_text_uses_provider_counts() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    trimmed = trim_text(text, 10, keep="end", provider=WordCounter())
    assert trimmed.endswith("w99")
    assert "w50" not in trimmed


TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(f'  File "/x/mod{i}.py", line {i}, in f{i}\n    g{i}()\n' for i in range(120))
    + '  File "<test>", line 3, in <module>\n'
    + "    assert median([1, 2, 3, 4]) == 2.5\n"
    + "AssertionError: got 2\n"
)


def test_trim_traceback_keeps_end_and_assertion() -> None:
    trimmed = trim_traceback(TRACEBACK, 80)
    assert count_tokens(trimmed) <= 100
    assert "assert median([1, 2, 3, 4]) == 2.5" in trimmed
    assert trimmed.rstrip().endswith("AssertionError: got 2")
    assert "mod0.py" not in trimmed
    assert trim_traceback("short", 100) == "short"


def test_trim_traceback_recovers_assert_line_from_far_above() -> None:
    tb = (
        '  File "<test>", line 1\n    assert f(3) == 9\n'
        + "".join(f"    frame {i} in a very deep helper chain\n" for i in range(200))
        + "ValueError: bad input\n"
    )
    trimmed = trim_traceback(tb, 60)
    assert trimmed.startswith("Failing line(s):\nassert f(3) == 9")
    assert trimmed.rstrip().endswith("ValueError: bad input")


def test_trim_history_drops_oldest_keeps_system_and_last() -> None:
    msgs = [Message(role="system", content="rules " * 10)]
    for i in range(10):
        msgs.append(Message(role="user", content=f"question {i} " * 20))
        msgs.append(Message(role="assistant", content=f"answer {i} " * 20))
    msgs.append(Message(role="user", content="final question"))
    kept = trim_history(msgs, 200)
    assert kept[0] == msgs[0]
    assert kept[-1] == msgs[-1]
    assert message_tokens(kept) <= 200
    assert len(kept) < len(msgs)
    assert kept[1:-1] == msgs[len(msgs) - len(kept) + 1 : -1]  # a suffix: oldest dropped


def test_trim_history_trims_a_huge_last_message() -> None:
    msgs = [Message(role="system", content="s"), Message(role="user", content=LOG)]
    kept = trim_history(msgs, 120)
    assert kept[0] == msgs[0]
    assert "characters cut" in kept[-1].content
    assert kept[-1].content.endswith("line 199 of the log")


# ------------------------------------------------------------------------------ retry


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = 1_800_000_000.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30)
    assert retry_after_from_headers({"Retry-After-Ms": "250"}) == 0.25


def test_backoff_grows_with_jitter_and_caps() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.25)
    rng = random.Random(1)
    delays = [backoff_delay(policy, n, None, rng) for n in range(6)]
    assert 0.75 <= delays[0] <= 1.25
    assert 1.5 <= delays[1] <= 2.5
    assert 3.0 <= delays[2] <= 5.0
    assert all(d <= 6.25 for d in delays)
    assert backoff_delay(policy, 0, 2.0) == 2.0  # Retry-After wins
    assert backoff_delay(RetryPolicy(max_retry_after=1.0), 0, 9.0) == 1.0


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (401, AuthenticationFailed, False),
        (403, AuthenticationFailed, False),
        (404, ModelNotFound, False),
        (429, ProviderUnavailable, True),
        (500, ProviderUnavailable, True),
        (529, ProviderUnavailable, True),
        (400, ProviderError, False),
    ],
)
def test_failure_for_status(status: int, kind: type, retryable: bool) -> None:
    failure = failure_for_status(status, "detail", provider="p", model="m")
    assert type(failure.error) is kind
    assert failure.retryable is retryable


async def test_call_with_retry_sleeps_between_tries() -> None:
    sleeps: list[float] = []
    attempts = [0]

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def flaky() -> str:
        attempts[0] += 1
        if attempts[0] < 3:
            raise ConnectionError("down")
        return "ok"

    def classify(exc: BaseException) -> Failure | None:
        if isinstance(exc, ConnectionError):
            return Failure(ProviderUnavailable("down"), retryable=True)
        return None

    policy = RetryPolicy(attempts=4, base_delay=0.1, jitter=0.0)
    assert await acall_with_retry(flaky, classify, policy, sleep=sleep) == "ok"
    assert sleeps == [0.1, 0.2]


async def test_call_with_retry_leaves_bugs_alone() -> None:
    async def buggy() -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await acall_with_retry(buggy, lambda exc: None, RetryPolicy())


async def test_timeouts_are_retried_only_when_asked() -> None:
    calls = [0]

    async def no_sleep(seconds: float) -> None:
        pass

    async def slow() -> str:
        calls[0] += 1
        raise TimeoutError

    def classify(exc: BaseException) -> Failure:
        return Failure(ProviderTimeout("late"))

    with pytest.raises(ProviderTimeout):
        await acall_with_retry(slow, classify, RetryPolicy(attempts=3), sleep=no_sleep)
    assert calls[0] == 1
    policy = RetryPolicy(attempts=3, retry_timeouts=True)
    with pytest.raises(ProviderTimeout):
        await acall_with_retry(slow, classify, policy, sleep=no_sleep)
    assert calls[0] == 4


async def test_acall_with_retry() -> None:
    attempts = [0]

    async def flaky() -> int:
        attempts[0] += 1
        if attempts[0] == 1:
            raise ConnectionError
        return 7

    def classify(exc: BaseException) -> Failure:
        return Failure(ProviderUnavailable("down"), retryable=True)

    assert await acall_with_retry(flaky, classify, RetryPolicy(base_delay=0.001)) == 7
