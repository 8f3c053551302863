"""The public entry points: ``heal`` and ``aheal``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from selfheal.approval import Approver
from selfheal.config import HealConfig
from selfheal.context import EventSink, TokenSink
from selfheal.graph.runner import ProviderArg, Run
from selfheal.kernel_sandbox.types import Executor
from selfheal.result import HealResult
from selfheal.state import Decision, TestCase

if TYPE_CHECKING:
    from selfheal.notebook import LiveHeal


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
) -> HealResult | LiveHeal:
    """Turn ``spec`` into tested code, repairing it until it passes or the budget is spent.

    ``provider``: ``"local"``, ``"mock"``, ``"ollama:<model>"``, ``"anthropic:<model>"``,
    ``"hf:<model>"``, ``"auto"`` (default: ``$SELFHEAL_MODEL`` or auto-detection), or a Provider
    object. ``tests``: your own assertions (trusted). ``approver``: answers repair proposals
    when ``config.autonomy`` asks for review; without one the result comes back with status
    ``awaiting_approval`` and ``selfheal.resume(result, Approve())`` continues it.

    In a Jupyter kernel (see ``selfheal.notebook``) the live view is shown. If a human must
    approve and no ``approver`` is given, a live notebook gets a ``LiveHeal`` handle at once
    (the run goes on in the kernel's event loop; ``await handle`` gives the result; its
    ``.code``/``.status``/... reflect the latest state), and a headless one (nbclient,
    papermill) raises ``ApprovalRequired`` unless ``config.on_headless`` decides.
    """
    from selfheal.notebook import heal_in_notebook, notebook_mode

    mode = notebook_mode()
    if mode != "none":
        return heal_in_notebook(
            mode,
            spec,
            provider=provider,
            config=config,
            entry_point=entry_point,
            tests=tests,
            approver=approver,
            executor=executor,
            on_event=on_event,
            on_token=on_token,
        )
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
    """Async twin of ``heal``; model calls and sandbox runs never block the event loop.

    In a Jupyter kernel it shows the live view; an approval with no ``approver`` follows
    ``config.on_headless`` there (an awaited cell holds the kernel, so buttons cannot answer:
    use ``handle = selfheal.heal(...)`` for button approvals)."""
    import asyncio

    from selfheal.notebook import aheal_in_notebook, notebook_mode

    mode = notebook_mode()
    if mode != "none":
        return await aheal_in_notebook(
            mode,
            spec,
            provider=provider,
            config=config,
            entry_point=entry_point,
            tests=tests,
            approver=approver,
            executor=executor,
            on_event=on_event,
            on_token=on_token,
        )

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
