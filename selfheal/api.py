"""The public entry points: ``heal`` and ``aheal``."""

from __future__ import annotations

from collections.abc import Sequence

from selfheal.approval import Approver
from selfheal.config import HealConfig
from selfheal.graph.context import EventSink, TokenSink
from selfheal.graph.runner import ProviderArg, Run
from selfheal.kernel_sandbox.types import Executor
from selfheal.result import HealResult
from selfheal.state import Decision, TestCase


def heal(
    spec: str,
    *,
    provider: ProviderArg = None,
    config: HealConfig | None = None,
    entry_point: str | None = None,
    tests: Sequence[str | TestCase] | None = None,
    approver: Approver | None = None,
    executor: Executor | None = None,
    on_event: EventSink | None = None,
    on_token: TokenSink | None = None,
) -> HealResult:
    """Turn ``spec`` into tested code, repairing it until it passes or the budget is spent.

    ``provider``: ``"local"``, ``"mock"``, ``"ollama:<model>"``, ``"anthropic:<model>"``,
    ``"hf:<model>"``, ``"auto"`` (default: ``$SELFHEAL_MODEL`` or auto-detection), or a Provider
    object. ``tests``: your own assertions (trusted). ``approver``: answers repair proposals
    when ``config.autonomy`` asks for review; without one the result comes back with status
    ``awaiting_approval`` and ``selfheal.resume(result, Approve())`` continues it.
    """
    run = Run.start(
        spec,
        provider=provider,
        config=config,
        entry_point=entry_point,
        tests=tests,
        executor=executor,
        sink=on_event,
        on_token=on_token,
    )
    return run.run(approver)


async def aheal(
    spec: str,
    *,
    provider: ProviderArg = None,
    config: HealConfig | None = None,
    entry_point: str | None = None,
    tests: Sequence[str | TestCase] | None = None,
    approver: Approver | None = None,
    executor: Executor | None = None,
    on_event: EventSink | None = None,
    on_token: TokenSink | None = None,
) -> HealResult:
    """Async twin of ``heal``; model calls and sandbox runs never block the event loop."""
    import asyncio

    run = await asyncio.to_thread(
        Run.start,
        spec,
        provider=provider,
        config=config,
        entry_point=entry_point,
        tests=tests,
        executor=executor,
        sink=on_event,
        on_token=on_token,
    )
    return await run.arun(approver)


def resume(
    run: HealResult | str,
    decision: Decision | None = None,
    *,
    provider: ProviderArg = None,
    approver: Approver | None = None,
    executor: Executor | None = None,
) -> HealResult:
    """Continue a run from its log: answer its pending proposal with ``decision`` (if any)
    and run it to the end. ``run`` is a result, a run id or a log path."""
    ref = (run.path or run.run_id) if isinstance(run, HealResult) else run
    r = Run.load(ref, provider=provider, executor=executor)
    if decision is not None:
        return r.resume(decision, approver)
    return r.run(approver)
