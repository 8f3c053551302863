"""The public entry points: ``heal``, ``aheal`` and ``resume``.

``heal`` and ``aheal`` gather their keywords into one ``HealRequest``; ``Run.start`` builds the
run's services from it (``graph.build``) and the runner steps through the table. Inside a
Jupyter kernel a *frontend* shows the run: ``selfheal.notebook`` registers one with
``use_frontend`` when selfheal is imported in a kernel, so this module never imports the UI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from selfheal.approval import Approver
from selfheal.config import HealConfig
from selfheal.context import EventSink, TokenSink
from selfheal.graph.runner import Run
from selfheal.kernel_sandbox.types import Executor
from selfheal.request import HealRequest, ProviderArg
from selfheal.result import HealResult
from selfheal.state import Decision, TestCase

if TYPE_CHECKING:
    from selfheal.notebook import LiveHeal

__all__ = ["Frontend", "aheal", "heal", "resume", "use_frontend"]


class Frontend(Protocol):
    """Shows a run where it happens and decides how it runs there (the notebook view)."""

    def active(self) -> bool:
        """Whether this frontend applies to the current call (e.g. inside a kernel)."""
        ...

    def heal(self, request: HealRequest) -> HealResult | LiveHeal:
        """Run ``request`` here (may return a live handle instead of blocking)."""
        ...

    async def aheal(self, request: HealRequest) -> HealResult:
        """Run ``request`` here, awaited."""
        ...


_frontend: Frontend | None = None


def use_frontend(frontend: Frontend | None) -> None:
    """Route ``heal``/``aheal`` calls through ``frontend`` whenever it is ``active()``."""
    global _frontend
    _frontend = frontend


def _here() -> Frontend | None:
    return _frontend if _frontend is not None and _frontend.active() else None


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
    ``awaiting_approval`` and ``selfheal.resume(result, Approve())`` continues it. The other
    keywords are those of ``HealRequest``.

    In a Jupyter kernel (see ``selfheal.notebook``) the live view is shown. If a human must
    approve and no ``approver`` is given, a live notebook gets a ``LiveHeal`` handle at once
    (the run goes on in the kernel's event loop; ``await handle`` gives the result; its
    ``.code``/``.status``/... reflect the latest state), and a headless one (nbclient,
    papermill) raises ``ApprovalRequired`` unless ``config.on_headless`` decides.
    """
    request = HealRequest(
        spec,
        provider=provider,
        config=config or HealConfig(),
        entry_point=entry_point,
        tests=tests or (),
        approver=approver,
        executor=executor,
        on_event=on_event,
        on_token=on_token,
    )
    frontend = _here()
    if frontend is not None:
        return frontend.heal(request)
    return Run.start(request).run(request.approver)


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
    request = HealRequest(
        spec,
        provider=provider,
        config=config or HealConfig(),
        entry_point=entry_point,
        tests=tests or (),
        approver=approver,
        executor=executor,
        on_event=on_event,
        on_token=on_token,
    )
    frontend = _here()
    if frontend is not None:
        return await frontend.aheal(request)
    run = await asyncio.to_thread(Run.start, request)
    return await run.arun(request.approver)


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
