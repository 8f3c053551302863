"""The runner: executes the table one node at a time, checkpointing every state.

``Run`` is a run in progress: ``step()`` executes one node, ``run()``/``arun()`` go until the
run is done or waits for a human, ``resume(decision)`` applies a human decision and goes on,
``Run.load(path)`` picks up a run after a crash, ``fork(at_iteration=k, ...)`` starts a new run
from the state of iteration ``k`` with changes (other lessons, edited code, another model).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from selfheal.approval import Approver
from selfheal.config import HealConfig
from selfheal.context import Context, EventSink, FixedRouter, ModelRouter, TokenSink
from selfheal.errors import ConfigError, ProviderError, SandboxError
from selfheal.graph.checkpoint import RunLog, find_run, read_states
from selfheal.graph.gate import apply_decision
from selfheal.graph.table import GRAPH, after_decision
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import Provider
from selfheal.result import HealResult
from selfheal.spec import parse_spec
from selfheal.state import (
    Candidate,
    Decision,
    Event,
    ForkInfo,
    HealState,
    Lesson,
    TestCase,
    new_run_id,
)

ProviderArg = str | Provider | None


def make_router(config: HealConfig, provider: ProviderArg) -> ModelRouter:
    """The router for a run: ``provider`` (a string or an object) or ``config.model``, with
    ``config.models`` and ``SELFHEAL_MODEL_<ROLE>`` per-role overrides."""
    from selfheal.llm.router import Router

    if provider is not None and not isinstance(provider, str):
        if config.models:
            return Router(default=provider, per_role=config.models)
        return FixedRouter(provider)
    return Router(default=provider or config.model, per_role=config.models)


def make_context(
    config: HealConfig,
    provider: ProviderArg = None,
    *,
    executor: Executor | None = None,
    sink: EventSink | None = None,
    on_token: TokenSink | None = None,
) -> Context:
    if executor is None:
        from selfheal.kernel_sandbox import get_default_pool

        executor = get_default_pool()
    return Context(
        llm=make_router(config, provider), executor=executor, sink=sink, on_token=on_token
    )


def _over_budget(s: HealState) -> str:
    cfg = s.config
    if cfg.token_budget is not None and s.usage.total_tokens >= cfg.token_budget:
        return f"token budget spent ({s.usage.total_tokens} >= {cfg.token_budget})"
    if cfg.time_budget is not None and s.elapsed >= cfg.time_budget:
        return f"time budget spent ({s.elapsed:.1f}s >= {cfg.time_budget:.1f}s)"
    return ""


class Run:
    """A heal run: its current state, the services it uses and its log on disk."""

    def __init__(
        self, state: HealState, ctx: Context, *, log: RunLog | None = None, persist: bool = True
    ) -> None:
        self._state = state
        self.ctx = ctx
        self.log = log if log is not None else (RunLog.for_state(state) if persist else None)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        spec: str,
        *,
        provider: ProviderArg = None,
        config: HealConfig | None = None,
        entry_point: str | None = None,
        tests: Sequence[str | TestCase] | None = None,
        executor: Executor | None = None,
        sink: EventSink | None = None,
        on_token: TokenSink | None = None,
        persist: bool = True,
    ) -> Run:
        """A new run for ``spec``. ``tests`` are the user's own (trusted) assertion tests."""
        config = config or HealConfig()
        if isinstance(provider, str) and config.model is None:
            config = config.model_copy(update={"model": provider})
        parsed = parse_spec(spec, entry_point=entry_point)
        user_tests: list[TestCase] = []
        for i, t in enumerate(tests or (), start=1):
            if isinstance(t, TestCase):
                user_tests.append(t.model_copy(update={"trusted": True, "origin": "user"}))
            else:
                user_tests.append(
                    TestCase(
                        id=f"u{i}",
                        origin="user",
                        code=str(t),
                        trusted=True,
                        rationale="given by the user",
                    )
                )
        state = HealState(spec=parsed, config=config, tests=tuple(user_tests))
        ctx = make_context(config, provider, executor=executor, sink=sink, on_token=on_token)
        run = cls(state, ctx, persist=persist)
        if run.log is not None:
            run.log.append(state)
        return run

    @classmethod
    def load(
        cls,
        run: str | os.PathLike[str],
        *,
        provider: ProviderArg = None,
        executor: Executor | None = None,
        sink: EventSink | None = None,
        on_token: TokenSink | None = None,
        runs_dir: str | None = None,
    ) -> Run:
        """Reopen a run from its log (a path, a run id or an id prefix), at its last checkpoint."""
        path = find_run(run, runs_dir)
        state = read_states(path)[-1]
        if provider is None and state.config.model is None and not state.config.models:
            raise ConfigError(
                f"Run {state.run_id} used a provider object, which is not saved in the log. "
                "Pass it again: Run.load(path, provider=...)."
            )
        ctx = make_context(state.config, provider, executor=executor, sink=sink, on_token=on_token)
        return cls(state, ctx, log=RunLog(path))

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> HealState:
        return self._state

    @property
    def path(self) -> Path | None:
        return self.log.path if self.log else None

    @property
    def result(self) -> HealResult:
        return HealResult.from_state(self._state, path=self.path)

    def history(self) -> list[HealState]:
        """Every state of this run, oldest first (from the log)."""
        if self.log is None:
            return [self._state]
        return self.log.states()

    def _commit(self, state: HealState) -> HealState:
        self._state = state
        if self.log is not None:
            self.log.append(state)
        return state

    # -- stepping ---------------------------------------------------------------------------

    def step(self) -> HealState:
        """Execute the next node and checkpoint the new state. A no-op when done or waiting."""
        s = self._state
        if s.finished or s.status == "awaiting_approval":
            return s
        ctx = self.ctx
        name = s.next
        reason = _over_budget(s) if name not in ("finish", "done") else ""
        if reason:
            ev = Event(
                time=ctx.clock(), node=name, kind="info", iteration=s.iteration, detail=reason
            )
            ctx.emit(ev)
            s = s.model_copy(
                update={"next": "finish", "stop_reason": reason, "events": s.events + (ev,)}
            )
            name = "finish"
        row = GRAPH[name]
        start = Event(time=ctx.clock(), node=name, kind="start", iteration=s.iteration)
        ctx.emit(start)
        before = s.usage
        t0 = time.perf_counter()
        try:
            new = row.run(s, ctx)
        except (ProviderError, SandboxError) as exc:
            ev = Event(
                time=ctx.clock(),
                node=name,
                kind="error",
                iteration=s.iteration,
                duration=time.perf_counter() - t0,
                detail=f"{type(exc).__name__}: {exc}"[:500],
            )
            ctx.emit(ev)
            self._commit(s.model_copy(update={"events": s.events + (ev,)}))
            if self.path is not None:
                exc.add_note(
                    f"Nothing is lost: the run is checkpointed at {self.path}; fix the cause and "
                    f"continue with `selfheal runs resume {s.run_id}` or Run.load(...).run()."
                )
            raise
        dur = time.perf_counter() - t0
        end = Event(
            time=ctx.clock(),
            node=name,
            kind="end",
            iteration=new.iteration,
            duration=dur,
            prompt_tokens=new.usage.prompt_tokens - before.prompt_tokens,
            completion_tokens=new.usage.completion_tokens - before.completion_tokens,
            model=", ".join(
                sorted(
                    {e.model for e in new.events[len(s.events) :] if e.kind == "llm" and e.model}
                )
            ),
            detail=_end_detail(new, name, len(s.events)),
        )
        ctx.emit(end)
        new = new.model_copy(
            update={"events": new.events + (end,), "step": s.step + 1, "elapsed": s.elapsed + dur}
        )
        new = new.model_copy(update={"next": row.route(new)})
        return self._commit(new)

    def _headless_decision(self) -> Decision | None:
        policy = self._state.config.on_headless
        if policy == "approve":
            return Decision(kind="approve", reason="on_headless=approve")
        if policy == "reject":
            return Decision(kind="reject", reason="on_headless=reject")
        return None

    def run(self, approver: Approver | None = None) -> HealResult:
        """Step until the run is done, or waits for approval with no approver to ask."""
        while not self._state.finished:
            if self._state.status == "awaiting_approval":
                decision = self._ask_sync(approver)
                if decision is None:
                    break
                self._apply(decision)
                continue
            self.step()
        return self.result

    async def arun(self, approver: Approver | None = None) -> HealResult:
        """Async twin of ``run``: nodes run in a worker thread, so the event loop stays free."""
        while not self._state.finished:
            if self._state.status == "awaiting_approval":
                decision = await self._ask_async(approver)
                if decision is None:
                    break
                self._apply(decision)
                continue
            await asyncio.to_thread(self.step)
        return self.result

    def _ask_sync(self, approver: Approver | None) -> Decision | None:
        pending = self._state.pending
        if approver is None or pending is None:
            return self._headless_decision()
        answer = approver(pending, self._state)
        if inspect.isawaitable(answer):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return _run_coro(answer)
            raise ConfigError(
                "An async approver needs an async run: use `await run.arun(approver)`."
            )
        return answer

    async def _ask_async(self, approver: Approver | None) -> Decision | None:
        pending = self._state.pending
        if approver is None or pending is None:
            return self._headless_decision()
        answer = approver(pending, self._state)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    def _apply(self, decision: Decision) -> HealState:
        s = apply_decision(self._state, decision, clock=self.ctx.clock())
        self.ctx.emit(s.events[-1])
        return self._commit(s.model_copy(update={"next": after_decision(s)}))

    def resume(self, decision: Decision, approver: Approver | None = None) -> HealResult:
        """Answer the pending proposal (``Approve()``, ``Edit(code)``, ``Reject(reason)``) and go on."""
        self._apply(decision)
        return self.run(approver)

    async def aresume(self, decision: Decision, approver: Approver | None = None) -> HealResult:
        self._apply(decision)
        return await self.arun(approver)

    # -- time travel ------------------------------------------------------------------------

    def fork(
        self,
        at_iteration: int,
        *,
        lessons: Sequence[str] | None = None,
        code: str | None = None,
        model: str | None = None,
        models: Mapping[str, str] | None = None,
        config: HealConfig | None = None,
        provider: ProviderArg = None,
        executor: Executor | None = None,
        sink: EventSink | None = None,
    ) -> Run:
        """A new run starting from this run's state at iteration ``at_iteration`` (0 = before
        any code), with changes. Both runs keep their own logs."""
        history = self.history()
        base = _state_at(history, at_iteration)
        changes: list[str] = []
        update: dict[str, Any] = {}
        cfg = config or base.config
        if model is not None:
            cfg = cfg.model_copy(update={"model": model})
            changes.append("model")
        if models is not None:
            cfg = cfg.model_copy(update={"models": dict(models)})
            changes.append("models")
        if config is not None:
            changes.append("config")
        update["config"] = cfg
        if lessons is not None:
            update["lessons"] = tuple(Lesson(text=t, iteration=at_iteration) for t in lessons)
            changes.append("lessons")
        if code is not None:
            if at_iteration < 1:
                raise ConfigError("fork(code=...) needs at_iteration >= 1 (there is no code at 0).")
            kept = tuple(c for c in base.candidates if c.round < at_iteration)
            edit = Candidate(
                id=f"c{len(base.candidates) + 1}",
                code=code,
                origin="human_edit",
                round=at_iteration,
            )
            update["candidates"] = (*kept, edit)
            update["attempts"] = tuple(a for a in base.attempts if a.iteration < at_iteration)
            update["next"] = "execute"
            changes.append("code")
        update["run_id"] = new_run_id()
        update["parent"] = ForkInfo(
            run_id=base.run_id, at_iteration=at_iteration, changes=tuple(changes)
        )
        update["status"] = "running"
        forked = base.model_copy(update=update)
        if (
            provider is None
            and isinstance(self.ctx.llm, FixedRouter)
            and model is None
            and models is None
        ):
            ctx = Context(
                llm=self.ctx.llm, executor=executor or self.ctx.executor, sink=sink or self.ctx.sink
            )
        else:
            ctx = make_context(
                cfg, provider, executor=executor or self.ctx.executor, sink=sink or self.ctx.sink
            )
        run = Run(forked, ctx, persist=self.log is not None)
        if run.log is not None:
            run.log.append(forked)
        return run


def _state_at(history: Sequence[HealState], k: int) -> HealState:
    """The state right after attempt ``k`` was accepted (before it ran); k=0: before generation."""
    for s in history:
        if k == 0 and s.next == "generate" and s.iteration == 0:
            return s
        if (
            k >= 1
            and s.iteration == k
            and s.next in ("adversarial", "execute")
            and s.pending is None
            and s.status == "running"
        ):
            return s
    have = sorted({s.iteration for s in history})
    raise ConfigError(f"No state at iteration {k} in this run; it has iterations {have}.")


def _end_detail(state: HealState, node: str, first_new_event: int) -> str:
    infos = [
        e.detail
        for e in state.events[first_new_event:]
        if e.kind in ("info", "error", "decision") and e.detail
    ]
    if node == "finish":
        return f"status {state.status}"
    if node in ("generate", "repair") and state.pending is not None:
        lines = state.pending.code.count("\n") + 1
        return f"proposed {lines} line(s)" + (f"; {infos[-1]}" if infos else "")
    if node == "gate":
        if state.status == "awaiting_approval":
            return "awaiting approval"
        fresh = sum(1 for c in state.candidates if c.report is None)
        return f"accepted {fresh} candidate(s) for round {state.iteration}"
    return infos[-1] if infos else ""


def _run_coro(coro: Awaitable[Decision]) -> Decision:
    async def wrap() -> Decision:
        return await coro

    return asyncio.run(wrap())


ApproverFn = Callable[..., Any]
