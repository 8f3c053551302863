"""The boundary a run's candidates ran inside is on their reports (the run's record), and the
evidence line names it when it is weaker than Landlock (issue 29)."""

from __future__ import annotations

import pytest
import scripted as s

from selfheal import HealConfig, heal
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.boundary import landlock_abi
from selfheal.llm.mock import MockProvider

GOOD_DOC = s.block(
    'def clamp(x, lo, hi):\n    """Limit x to [lo, hi]."""\n    return max(lo, min(x, hi))'
)


def _heal(pool: KernelPool) -> tuple[list[str], str]:
    script = {"generator": [s.GOOD, GOOD_DOC], "test_writer": [s.NO_TESTS]}
    mock = MockProvider(script)  # type: ignore[arg-type]
    config = HealConfig(lessons=False, memory=False)
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    reports = [c.report.boundary for c in result.candidates if c.report is not None]
    return reports, result.evidence.summary


def test_a_weaker_boundary_is_named_in_the_evidence() -> None:
    with KernelPool(size=1, boundary="fallback") as pool:
        boundaries, summary = _heal(pool)
    assert boundaries and all(b.startswith("fallback (") for b in boundaries)
    assert f"candidates ran inside a boundary weaker than Landlock: {boundaries[0]}" in summary


def test_landlock_is_recorded_and_not_flagged(pool: KernelPool) -> None:
    boundaries, summary = _heal(pool)
    if landlock_abi() < 1:
        assert boundaries and all(b.startswith("fallback") for b in boundaries)
        return
    assert boundaries and all(b.startswith("landlock (ABI ") for b in boundaries)
    assert "weaker than Landlock" not in summary


def test_the_config_asks_the_shared_pool_for_its_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    from selfheal.graph.build import make_context

    asked: list[object] = []
    monkeypatch.setattr(
        "selfheal.kernel_sandbox.get_default_pool", lambda *mode: asked.append(mode) or "pool"
    )
    make_context(HealConfig(sandbox="strict"), "mock")
    make_context(HealConfig(), "mock")
    assert asked == [("strict",), ()]  # the second: $SELFHEAL_SANDBOX, else auto
    with pytest.raises(ConfigError, match="sandbox='loose'"):
        HealConfig(sandbox="loose")  # type: ignore[arg-type]
