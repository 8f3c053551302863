"""Running inside Jupyter: where we are (``notebook_mode()``: ``none``, ``headless`` or
``live``; ``SELFHEAL_HEADLESS`` forces one) and ``start``, the live handle of a run whose
approvals the view's buttons answer (docs/notebook.md)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Literal

from selfheal.approval import Approve, Approver, Edit, Reject
from selfheal.errors import ApprovalRequired, ConfigError
from selfheal.graph.runner import Run
from selfheal.request import HealRequest
from selfheal.result import HealResult
from selfheal.state import Answer, Decision, HealState, Proposal
from selfheal.widgets.approver import FutureApprover
from selfheal.widgets.asker import FutureAsker
from selfheal.widgets.text import render_markdown, render_text

if TYPE_CHECKING:
    from selfheal.widgets.view import HealView

NotebookMode = Literal["none", "headless", "live"]


def kernel_shell() -> Any | None:
    """The IPython shell when running inside an IPython kernel, else None."""
    if "ipykernel" not in sys.modules or "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    return shell


def notebook_mode() -> NotebookMode:
    """``none`` outside a kernel; inside one, ``live`` when the current request allows stdin
    (a frontend a human watches), else ``headless`` (``SELFHEAL_HEADLESS=1``/``0`` forces
    either)."""
    shell = kernel_shell()
    if shell is None:
        return "none"
    forced = os.environ.get("SELFHEAL_HEADLESS", "").strip().lower()
    if forced in ("1", "true", "yes"):
        return "headless"
    if forced in ("0", "false", "no"):
        return "live"
    return "live" if bool(getattr(shell.kernel, "_allow_stdin", False)) else "headless"


def _display_static(state: HealState) -> None:
    """The view without widgets (headless kernels: nbclient, nbconvert, papermill)."""
    from IPython.display import display

    bundle = {"text/plain": render_text(state), "text/markdown": render_markdown(state)}
    display(bundle, raw=True)


class _Relay:
    """A sink that forwards to several sinks (the view, the caller's ``on_event`` or
    ``on_token``)."""

    def __init__(self, *sinks: Callable[..., None] | None) -> None:
        self.sinks = [s for s in sinks if s is not None]

    def __call__(self, *args: Any) -> None:
        for s in self.sinks:
            with contextlib.suppress(Exception):  # a broken sink must not break the run
                s(*args)

    @property
    def progress_only(self) -> bool:
        """True when every sink only counts tokens (``selfheal.progress.progress_only``)."""
        return all(getattr(s, "progress_only", False) for s in self.sinks)


_HEADLESS_WHY = (
    "this notebook runs headless (nbclient, nbconvert, nbmake or papermill), so nothing can answer"
)
_BUSY_WHY = (
    "a running cell holds the kernel, so the view's buttons cannot answer (use "
    "`handle = selfheal.notebook.start(...)` in a live notebook: its buttons resume the run)"
)


def _approval_required(state: HealState, why: str = _HEADLESS_WHY) -> ApprovalRequired:
    p = state.pending
    what = "a repair" if p is not None and p.kind == "repair" else "the first version"
    return ApprovalRequired(
        f"Run {state.run_id} needs a human to approve {what} (autonomy "
        f"{state.config.approval.autonomy!r}), but {why}. Pass `config=HealConfig(on_headless="
        "'approve')` (or 'reject') to decide automatically, use autonomy 'full_auto', or "
        f"answer later with selfheal.resume({state.run_id!r}, selfheal.Approve()).",
        state=state,
    )


def _finish_headless(result: HealResult, why: str = _HEADLESS_WHY) -> HealResult:
    if result.status == "awaiting_approval" and result.config.approval.on_headless == "error":
        raise _approval_required(result.state, why)
    return result


class LiveHeal:
    """A heal run going on in the kernel's event loop, with its live view: ``await handle``,
    ``handle.result()``, any ``HealResult`` field of the latest state, and ``approve()``,
    ``edit(code)``, ``reject(reason)`` as the buttons do (docs/notebook.md)."""

    def __init__(
        self,
        run: Run,
        task: asyncio.Task[HealResult],
        approver: FutureApprover,
        view: HealView | None = None,
        *,
        asker: FutureAsker | None = None,
    ) -> None:
        self.run = run
        self.approver = approver
        self.asker = asker
        """Answers the run's questions (the view's question panel), when it asks here."""
        self.view = view
        self._task = task
        self._callbacks: list[Callable[[HealResult], None]] = []
        task.add_done_callback(self._on_done)

    @property
    def state(self) -> HealState:
        return self.run.state

    def snapshot(self) -> HealResult:
        """The result as it stands now (status ``running`` or ``awaiting_approval`` until done)."""
        return self.run.result

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.snapshot(), name)

    def done(self) -> bool:
        return self._task.done()

    def result(self) -> HealResult:
        """The final result. Raises ``ConfigError`` while the run is still going (waiting in a
        cell would deadlock the kernel: use ``await handle`` or check ``handle.done()``)."""
        if not self._task.done():
            raise ConfigError(
                f"Run {self.run.state.run_id} is still going (status {self.run.state.status!r}). "
                "Answer its approval in the view (or handle.approve()), then use "
                "`result = await handle` in a later cell."
            )
        return self._task.result()

    def __await__(self) -> Generator[Any, None, HealResult]:
        return self._wait().__await__()

    async def _wait(self) -> HealResult:
        # An awaiting cell holds the kernel: a click cannot arrive while it waits. So waiting
        # on a run that needs a decision would hang forever; say so instead.
        while not self._task.done():
            if self.approver.waiting or (self.asker is not None and self.asker.waiting):
                raise ApprovalRequired(
                    f"Run {self.run.state.run_id} waits for your decision, and a cell that "
                    "awaits it holds the kernel, so the view's buttons cannot answer. Decide "
                    "first (the buttons, or handle.approve() / handle.edit(code) / "
                    "handle.reject(reason); a question: its buttons, or handle.answer("
                    "selfheal.Pick(...))), then `await handle` in a later cell.",
                    state=self.run.state,
                )
            await asyncio.wait({self._task}, timeout=0.1)
        return self._task.result()

    def add_done_callback(self, fn: Callable[[HealResult], None]) -> None:
        """Call ``fn(result)`` when the run ends successfully (at once if it already has)."""
        if self._task.done() and not self._task.cancelled() and self._task.exception() is None:
            fn(self._task.result())
        else:
            self._callbacks.append(fn)

    def _on_done(self, task: asyncio.Task[HealResult]) -> None:
        if self.view is not None:
            self.view.finish(self.run.state)
        if task.cancelled() or task.exception() is not None:
            return
        for fn in self._callbacks:
            try:
                fn(task.result())
            except Exception as exc:  # report, but never lose the run's result
                print(f"selfheal: a completion callback failed: {exc!r}", file=sys.stderr)

    def approve(self, reason: str = "") -> None:
        """Run the proposed code."""
        self.approver.decide(Approve(reason))

    def edit(self, code: str, reason: str = "") -> None:
        """Run ``code`` instead of the proposal."""
        self.approver.decide(Edit(code, reason))

    def reject(self, reason: str = "") -> None:
        """Refuse the proposal; ``reason`` goes to the next generation."""
        self.approver.decide(Reject(reason))

    def answer(self, answer: Answer) -> None:
        """Answer the waiting question (``selfheal.Pick(output)``, ``NoneOfThese(value)``,
        ``Skip()``), as the question panel's buttons do."""
        if self.asker is None:
            raise ConfigError("This run asks no questions here (an asker= answers them).")
        self.asker.answer(answer)

    def cancel(self) -> None:
        """Stop the run (its log keeps every state; ``selfheal.resume`` continues it)."""
        self.approver.cancel()
        if self.asker is not None:
            self.asker.cancel()
        self._task.cancel()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.view is not None:
            bundle: dict[str, Any] = self.view._repr_mimebundle_(**kwargs)
            return bundle
        state = self.run.state
        return {
            "text/plain": render_text(state, live=not self._task.done()),
            "text/markdown": render_markdown(state, live=not self._task.done()),
        }

    def __repr__(self) -> str:
        s = self.run.state
        return (
            f"LiveHeal(run_id={s.run_id!r}, status={s.status!r}, iteration={s.iteration}, "
            f"done={self._task.done()})"
        )


def _make_view(run: Run, relay: _Relay, tokens: _Relay, *, show: bool) -> HealView:
    """The run's live view, fed by its events and streamed tokens (shown at once with
    ``show``)."""
    from selfheal.widgets.view import HealView

    view = HealView(run.state, state_getter=lambda: run.state, live=True)
    relay.sinks.insert(0, view.on_event)
    tokens.sinks.insert(0, view.on_token)
    if show:
        from IPython.display import display

        # its id lets the end of the run replace the output's text and markdown (a saved
        # notebook shows them when its widget state is not saved) by the finished run's
        view.display_handle = display(view, display_id=True)
    return view


def _showing_the_wait(view: HealView, approver: Approver) -> Approver:
    """``approver``, after the view has redrawn the run as waiting for it (no event marks the
    start of the wait: the header would still say ``starting`` while, e.g., ``%selfheal``'s
    input box waits under it)."""

    def ask(proposal: Proposal, state: HealState) -> Decision | Awaitable[Decision]:
        view.refresh()
        return approver(proposal, state)

    return ask


def heal_in_notebook(mode: NotebookMode, request: HealRequest, *, show: bool = True) -> HealResult:
    """``heal`` inside a kernel: runs to the end, the view updating live (``live``) or shown
    once done (``headless``); an approval no ``approver`` answers follows ``on_headless``
    (``error``: ``ApprovalRequired``), since a running cell holds the kernel (``start``
    returns a handle whose buttons answer instead)."""
    relay, tokens = _Relay(request.on_event), _Relay(request.on_token)
    run = Run.start(request, sink=relay, on_token=tokens)
    view = _make_view(run, relay, tokens, show=show) if mode == "live" else None
    approver = request.approver
    if view is not None and approver is not None:
        approver = _showing_the_wait(view, approver)
    try:
        result = run.run(approver)
    finally:
        if view is not None:
            view.finish(run.state)
        elif show:
            _display_static(run.state)
    return _finish_headless(result, _BUSY_WHY if mode == "live" else _HEADLESS_WHY)


def start(spec: str, **keywords: Any) -> LiveHeal:
    """Start a heal in a live notebook and return its ``LiveHeal`` handle at once
    (``keywords``: those of ``selfheal.heal``): the run goes on as a task on the kernel's event
    loop, the view shows it, and its buttons (or ``handle.approve()`` ...) answer its
    approvals."""
    request = HealRequest(spec, **keywords)
    if notebook_mode() != "live":
        raise ConfigError(
            "selfheal.notebook.start needs a live notebook (JupyterLab, Notebook 7, VS Code, "
            "Colab), whose buttons answer the run's approvals; use selfheal.heal(...) here."
        )
    if request.approver is not None:
        raise ConfigError(
            "start's handle answers approvals through the view's buttons; to answer them with "
            "an approver=, call selfheal.heal(...)."
        )
    relay, tokens = _Relay(request.on_event), _Relay(request.on_token)
    # its questions are asked in the view (an asker= given answers them instead)
    asker = FutureAsker() if request.asker is None else None
    run = Run.start(request, sink=relay, on_token=tokens, asker=asker)
    view = _make_view(run, relay, tokens, show=True)
    loop = asyncio.get_event_loop()
    future_approver = FutureApprover()
    view.attach_loop(loop)
    view.bind(future_approver)
    if asker is not None:
        view.bind_asker(asker)
    task = loop.create_task(run.arun(future_approver))
    return LiveHeal(run, task, future_approver, view, asker=asker)


async def aheal_in_notebook(
    mode: NotebookMode, request: HealRequest, *, show: bool = True
) -> HealResult:
    """``aheal`` inside a kernel: shows the live view (``live``) and awaits the run; an
    approval no ``approver`` answers follows ``on_headless``, as with ``heal``."""
    relay, tokens = _Relay(request.on_event), _Relay(request.on_token)
    run = await Run.astart(request, sink=relay, on_token=tokens)
    view = None
    if mode == "live":
        view = _make_view(run, relay, tokens, show=show)
        view.attach_loop(asyncio.get_running_loop())
    try:
        result = await run.arun(request.approver)
    finally:
        if view is not None:
            view.finish(run.state)
    return _finish_headless(result, _BUSY_WHY if mode == "live" else _HEADLESS_WHY)


class NotebookFrontend:
    """The frontend ``selfheal.heal`` uses inside a Jupyter kernel (``api.use_frontend``)."""

    def active(self) -> bool:
        return notebook_mode() != "none"

    def heal(self, request: HealRequest) -> HealResult:
        return heal_in_notebook(notebook_mode(), request)

    async def aheal(self, request: HealRequest) -> HealResult:
        return await aheal_in_notebook(notebook_mode(), request)
