"""The public entry points ``heal``, ``aheal`` and ``resume``: one ``HealRequest`` each, run on
selfheal's process loop; inside a Jupyter kernel a frontend (``use_frontend``) may take over."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from selfheal._sync import enter, run_sync
from selfheal.approval import Approver
from selfheal.asking import Asker
from selfheal.graph.runner import Run
from selfheal.kernel_sandbox.types import Executor
from selfheal.request import HealRequest, ProviderArg
from selfheal.result import HealResult
from selfheal.state import Decision

P = ParamSpec("P")
R = TypeVar("R")


class Frontend(Protocol):
    """Shows a run where it happens and decides how it runs there (the notebook view)."""

    def active(self) -> bool:
        """Whether this frontend applies to the current call (e.g. inside a kernel)."""
        ...

    def heal(self, request: HealRequest) -> HealResult:
        """Run ``request`` here."""
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


def _keywords_of(
    make: Callable[P, HealRequest],
) -> Callable[[Callable[[HealRequest], R]], Callable[P, R]]:
    """Give a function of a ``HealRequest`` the request's own signature: ``heal(spec,
    provider=..., config=...)`` builds the request and passes it on, so the keyword list is
    written once, in ``HealRequest`` (``help(heal)`` and type checkers see it)."""

    def wrap(run: Callable[[HealRequest], R]) -> Callable[P, R]:
        if inspect.iscoroutinefunction(run):

            @functools.wraps(run)
            async def acall(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await run(make(*args, **kwargs))

            call: Callable[P, R] = cast("Callable[P, R]", acall)
        else:

            @functools.wraps(run)
            def call(*args: P.args, **kwargs: P.kwargs) -> R:
                return run(make(*args, **kwargs))

        call.__signature__ = inspect.signature(make).replace(  # type: ignore[attr-defined]
            return_annotation=inspect.signature(run).return_annotation
        )
        return call

    return wrap


async def _heal(request: HealRequest) -> HealResult:
    """(On the process loop.) The run for ``request``, from start to end."""
    run = await Run.astart(request)
    return await run.arun(request.approver)


@_keywords_of(HealRequest)
def heal(request: HealRequest) -> HealResult:
    """Turn ``spec`` into tested code, repairing it until it passes or the budget is spent.

    Called as ``heal(spec, provider=..., config=..., tests=[...], ...)``: the keywords are the
    fields of ``HealRequest``. ``provider``: ``"local"``, ``"mock"``, ``"ollama:<model>"``,
    ``"anthropic:<model>"``, ``"hf:<model>"``, ``"auto"`` (default: ``$SELFHEAL_MODEL`` or
    auto-detection), or a Provider object. ``tests``: your own assertions (trusted).
    ``approver``: answers repair proposals when ``config.approval.autonomy`` asks for review;
    without one the result comes back with status ``awaiting_approval`` and
    ``selfheal.resume(result, Approve())`` continues it. In a Jupyter kernel the notebook's
    frontend takes the call and shows the live view (docs/notebook.md: approvals there)."""
    frontend = _here()
    if frontend is not None:
        return frontend.heal(request)
    return run_sync(_heal(request))


@_keywords_of(HealRequest)
async def aheal(request: HealRequest) -> HealResult:
    """Async twin of ``heal`` (the same keywords): awaited on any loop, the run goes on the
    process loop, entered here once (cancelling the caller cancels it there).

    In a Jupyter kernel it shows the live view; an approval with no ``approver`` follows
    ``config.approval.on_headless`` there (an awaited cell holds the kernel, so buttons cannot answer:
    use ``handle = selfheal.notebook.start(...)`` for button approvals)."""
    frontend = _here()  # (in the caller's thread: a frontend shows the run there)
    if frontend is not None:
        return await frontend.aheal(request)
    return await enter(_heal(request))


def resume(
    run: HealResult | str,
    decision: Decision | None = None,
    *,
    provider: ProviderArg = None,
    approver: Approver | None = None,
    executor: Executor | None = None,
    asker: Asker | None = None,
) -> HealResult:
    """Continue a run from its log: answer its pending proposal with ``decision`` (if any)
    and run it to the end. ``run`` is a result, a run id or a log path; ``asker`` answers its
    questions from now on (none: it asks none)."""
    ref = (run.path or run.run_id) if isinstance(run, HealResult) else run
    r = Run.load(ref, provider=provider, executor=executor, asker=asker)
    if decision is not None:
        return r.resume(decision, approver)
    return r.run(approver)
