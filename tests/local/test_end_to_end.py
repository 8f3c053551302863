"""selfheal.heal end to end with the offline default model, checked against hidden tests.

The agent never sees REFERENCE_TESTS; they run afterwards in a fresh sandbox kernel.
The config is slimmed (no critic, no adversarial round, two iterations) to keep CI short.
"""

from __future__ import annotations

import pytest
from required_components import local_model_missing

import selfheal
from selfheal.config import HealConfig
from selfheal.kernel_sandbox import KernelPool
from selfheal.result import HealResult

pytestmark = [pytest.mark.local_model, pytest.mark.slow, pytest.mark.timeout(900)]

SPEC = (
    "Write a function running_max(xs) that takes a list of numbers and returns a new list "
    "whose i-th element is the largest of xs[0..i]. An empty list gives an empty list."
)

REFERENCE_TESTS = [
    "assert running_max([]) == []",
    "assert running_max([7]) == [7]",
    "assert running_max([3, 1, 4, 1, 5]) == [3, 3, 4, 4, 5]",
    "assert running_max([-2, -5, -1]) == [-2, -2, -1]",
    "assert running_max([1.5, 0.5, 2.5]) == [1.5, 1.5, 2.5]",
    "xs = [5, 4, 3]\nrunning_max(xs)\nassert xs == [5, 4, 3]",
]


def test_heal_with_the_local_model_passes_hidden_tests() -> None:
    if why := local_model_missing():
        pytest.skip(why)
    config = HealConfig(
        max_iterations=2,
        critic=False,
        adversarial_tests=False,
        lessons=False,
        max_spec_tests=3,
        max_tokens=512,
    )
    result = selfheal.heal(SPEC, provider="local", config=config, entry_point="running_max")
    assert isinstance(result, HealResult)
    assert result.models and all(m.startswith("local:") for m in result.models.values())
    assert result.code, f"no code produced: status={result.status} error={result.error}"
    with KernelPool(size=1) as pool:
        report = pool.run(result.code, REFERENCE_TESTS, timeout=10)
    failures = [(r.test_id, r.outcome, r.message) for r in report.failures]
    assert report.passed, (
        f"hidden tests failed: load={report.load} failures={failures}\n{result.code}"
    )
