"""Model limits: a gate holds a model to its concurrency and its requests per minute, for
every provider of that model in the process; limits come from code, the environment or a
file, and a bad one is a clear ConfigError. Rates are checked on a fake clock (no waiting,
no timed assertion); concurrency on a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from scale_fakes import OracleServer

from evaluation.suites import BuiltinSuite
from selfheal.errors import ConfigError
from selfheal.llm import Message, OpenAICompatible
from selfheal.llm.limits import (
    LimitedProvider,
    LocalGate,
    ModelLimits,
    apply_limits,
    configure_limits,
    parse_limits,
)
from selfheal.llm.router import Router, build_provider


class FakeTime:
    """A clock that only moves when someone sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def _grant_times(gate: LocalGate, fake: FakeTime, n: int) -> list[float]:
    times = []
    for _ in range(n):
        async with gate.slot():
            times.append(fake.now)
    return times


async def test_rate_limit_grants_at_most_the_rate_in_any_minute() -> None:
    fake = FakeTime()
    gate = LocalGate(ModelLimits(requests_per_minute=2), clock=fake.clock, sleep=fake.sleep)
    assert await _grant_times(gate, fake, 5) == [0.0, 0.0, 60.0, 60.0, 120.0]


async def test_a_rate_below_one_a_minute_spaces_requests_out() -> None:
    fake = FakeTime()
    gate = LocalGate(ModelLimits(requests_per_minute=0.5), clock=fake.clock, sleep=fake.sleep)
    assert await _grant_times(gate, fake, 3) == [0.0, 120.0, 240.0]


async def test_concurrency_limit_holds_and_every_waiter_gets_a_slot() -> None:
    gate = LocalGate(ModelLimits(max_concurrency=2))
    peak = 0
    release = asyncio.Event()

    async def request() -> None:
        nonlocal peak
        async with gate.slot():
            peak = max(peak, gate.in_flight)
            await release.wait()

    tasks = [asyncio.create_task(request()) for _ in range(5)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert gate.in_flight == 2  # three wait
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2 and gate.in_flight == 0


async def test_a_cancelled_waiter_takes_no_slot() -> None:
    gate = LocalGate(ModelLimits(max_concurrency=1))
    await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.release()
    assert gate.in_flight == 0
    await asyncio.wait_for(gate.acquire(), timeout=30)  # the slot is free again
    assert gate.in_flight == 1


def test_gates_hold_across_providers_threads_and_event_loops() -> None:
    """Two providers of one model (two heals), called from two threads with their own
    event loops, share one gate: the server never sees more than the limit."""
    server = OracleServer(BuiltinSuite().tasks()[:1], delay=0.2)
    try:
        configure_limits({"openai:fake": ModelLimits(max_concurrency=2)})
        env = {"OPENAI_BASE_URL": server.url}
        one, two = build_provider("openai:fake", env=env), build_provider("openai:fake", env=env)
        assert isinstance(one, LimitedProvider) and one.gate is two.gate
        assert one.max_concurrency == 2
        prompt = [Message(role="user", content="Write `dedupe(items)`.")]

        def burst(p: object) -> Callable[[], Awaitable[object]]:
            return lambda: p.acomplete_many(prompt, n=3, max_tokens=32)  # type: ignore[attr-defined]

        async def both() -> None:
            await asyncio.gather(
                asyncio.to_thread(asyncio.run, burst(one)()),
                asyncio.to_thread(asyncio.run, burst(two)()),
            )

        asyncio.run(both())
        assert server.answered == 6
        assert 1 <= server.peak <= 2
    finally:
        server.close()


def test_limits_come_from_the_environment_and_apply_to_built_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "SELFHEAL_MODEL_LIMITS", "openai:m: {max_concurrency: 3, requests_per_minute: 90}"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = build_provider("openai:m")
    assert isinstance(provider, LimitedProvider)
    assert provider.limits == ModelLimits(max_concurrency=3, requests_per_minute=90)
    assert isinstance(provider.inner, OpenAICompatible)
    other = build_provider("openai:other")
    assert isinstance(other, OpenAICompatible)  # no limits for it: untouched
    # the variable is not mistaken for a role's model
    router = Router(default="mock", env={"SELFHEAL_MODEL_LIMITS": "{}"})
    assert "limits" not in router.describe()


def test_a_provider_object_gets_its_models_gate() -> None:
    inner = OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", max_concurrency=8)
    assert apply_limits(inner) is inner
    configure_limits({"openai:m": ModelLimits(max_concurrency=2)})
    limited = apply_limits(inner)
    assert isinstance(limited, LimitedProvider) and limited.max_concurrency == 2
    assert apply_limits(limited) is limited


def test_limits_parse_from_json_yaml_and_files(tmp_path: Path) -> None:
    expected = {"openai:a": ModelLimits(max_concurrency=4), "openai:b": ModelLimits()}
    assert parse_limits('{"openai:a": {"max_concurrency": 4}, "openai:b": {}}') == expected
    path = tmp_path / "limits.yaml"
    path.write_text("openai:a:\n  max_concurrency: 4\nopenai:b:\n")
    assert parse_limits(str(path)) == expected
    assert parse_limits("") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"openai:a": {"max_concurrency": 0}}', "max_concurrency"),
        ('{"openai:a": {"requests_per_minute": -1}}', "requests_per_minute"),
        ('{"openai:a": {"concurrency": 2}}', "concurrency"),
        ("[1, 2]", "must map model ids"),
        ("{not: [valid", "not valid YAML/JSON"),
    ],
)
def test_bad_limits_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_limits(text, source="--model-limits")
    assert says in str(info.value) and "--model-limits" in str(info.value)
    assert "Example" in str(info.value)
