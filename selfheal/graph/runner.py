"""The runner: ``Run`` executes the table one node at a time on selfheal's process loop,
checkpointing every state (``step``, ``run``, ``resume`` are the blocking twins; a time
budget is an ``asyncio.timeout`` around each node): docs/architecture.md."""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from pathlib import Path

from selfheal._sync import entered, sync_twin
from selfheal.approval import Approver
from selfheal.asking import Asker
from selfheal.context import Context, EventSink, TokenSink
from selfheal.errors import ApprovalRequired, ConfigError, SelfHealError
from selfheal.graph.build import make_context, new_run
from selfheal.graph.checkpoint import RunLog, find_run, read_states
from selfheal.graph.events import event, record
from selfheal.graph.fork import fork
from selfheal.graph.gate import apply_decision
from selfheal.graph.table import AFTER_DECISION, GRAPH, after_decision
from selfheal.kernel_sandbox.types import Executor
from selfheal.request import HealRequest, ProviderArg
from selfheal.result import HealResult
from selfheal.state import Decision, HealState


def over_budget(s: HealState) -> str:
    """Why ``s`` may not run another node (its token or time budget is spent), or ""."""
    cfg = s.config
    if cfg.budgets.token_budget is not None and s.usage.total_tokens >= cfg.budgets.token_budget:
        return f"token budget spent ({s.usage.total_tokens} >= {cfg.budgets.token_budget})"
    if cfg.budgets.time_budget is not None and s.elapsed >= cfg.budgets.time_budget:
        return f"time budget spent ({s.elapsed:.1f}s >= {cfg.budgets.time_budget:.1f}s)"
    return ""


class Run:
    """A heal run: its current state, the services it uses and its log on disk."""

    def __init__(
        self, state: HealState, ctx: Context, *, log: RunLog | None = None, persist: bool = True
    ) -> None:
        self._state = state
        self.ctx = ctx
        self.log = log if log is not None else (RunLog.for_state(state) if persist else None)

    @classmethod
    def new(cls, state: HealState, ctx: Context, *, persist: bool = True) -> Run:
        """A run from ``state`` with built services; its log starts with ``state``."""
        run = cls(state, ctx, persist=persist)
        if run.log is not None:
            run.log.append(state)
        return run

    @classmethod
    @entered
    async def astart(
        cls,
        request: HealRequest,
        *,
        persist: bool = True,
        sink: EventSink | None = None,
        on_token: TokenSink | None = None,
        asker: Asker | None = None,
    ) -> Run:
        """A new run for ``request``, with the services it asks for (``graph.build``; ``sink``,
        ``on_token`` and ``asker`` stand in for the request's)."""
        ctx, state = await new_run(request, sink=sink, on_token=on_token, asker=asker)
        return cls.new(state, ctx, persist=persist)

    start = classmethod(sync_twin(astart))

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
        asker: Asker | None = None,
    ) -> Run:
        """Reopen a run from its log (a path, a run id or an id prefix), at its last checkpoint
        (``asker``: who answers its questions from now on; none asks none)."""
        path = find_run(run, runs_dir)
        state = read_states(path)[-1]
        if provider is None and state.config.calls.model is None and not state.config.calls.models:
            raise ConfigError(
                f"Run {state.run_id} used a provider object, which is not saved in the log. "
                "Pass it again: Run.load(path, provider=...)."
            )
        ctx = make_context(
            state.config,
            provider,
            spec=state.spec.text,
            executor=executor,
            sink=sink,
            on_token=on_token,
            asker=asker,
        )
        state = state.model_copy(update={"can_ask": asker is not None})
        return cls(state, ctx, log=RunLog(path))

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

    @entered
    async def astep(self) -> HealState:
        """Execute the next node and checkpoint the new state. A no-op when done or waiting.
        The node runs within what is left of the time budget; cancelling the caller stops it
        (the run ends, saying so, and the cancellation goes on)."""
        s = self._state
        if s.finished or s.status == "awaiting_approval":
            return s
        ctx = self.ctx
        name = s.next
        reason = over_budget(s) if name not in ("finish", "done") else ""
        if reason:
            s = record(
                ctx, s, name, detail=reason, update={"next": "finish", "stop_reason": reason}
            )
            name = "finish"
        row = GRAPH[name]
        event(ctx, s, name, "start")
        before = s.usage
        t0 = time.perf_counter()
        budget = s.config.budgets.time_budget
        timer = asyncio.timeout(None if budget is None or name == "finish" else budget - s.elapsed)
        try:
            async with timer:
                new = await row.run(s, ctx)
        except ApprovalRequired:
            raise
        except TimeoutError:
            if not timer.expired():
                raise
            self._stop(s, name, t0, f"time budget spent ({budget:g}s)")
            return self._state
        except asyncio.CancelledError:
            self._stop(s, name, t0, "the run was stopped by its caller")
            raise
        except SelfHealError as exc:
            detail = f"{type(exc).__name__}: {exc}"[:500]
            failed = record(ctx, s, name, "error", detail, duration=time.perf_counter() - t0)
            note = (
                f"Nothing is lost: the run is checkpointed at {self.path}; fix the cause and "
                f"continue with `selfheal runs resume {s.run_id}` or Run.load(...).run()."
            )
            # no candidate and no model-written test yet: nothing a resume would keep, so the
            # run is over, not left "running"
            if not s.candidates and all(t.origin in ("example", "user") for t in s.tests):
                failed = failed.model_copy(
                    update={"status": "failed", "next": "done", "error": detail}
                )
                note = (
                    f"The run {s.run_id} stopped before any work and is marked failed; fix the "
                    "cause and start it again."
                )
            self._commit(failed)
            if self.path is not None:
                exc.add_note(note)
            raise
        dur = time.perf_counter() - t0
        fresh = new.events[len(s.events) :]
        new = record(
            ctx,
            new,
            name,
            "end",
            _end_detail(new, name, len(s.events)),
            update={"step": s.step + 1, "elapsed": s.elapsed + dur},
            duration=dur,
            prompt_tokens=new.usage.prompt_tokens - before.prompt_tokens,
            completion_tokens=new.usage.completion_tokens - before.completion_tokens,
            model=", ".join(sorted({e.model for e in fresh if e.kind == "llm" and e.model})),
        )
        return self._commit(new.model_copy(update={"next": row.go(new)}))

    def _stop(self, s: HealState, name: str, t0: float, why: str) -> None:
        """The node in flight was cancelled (``why``): the run ends here, saying so."""
        dur = time.perf_counter() - t0
        reason = f"{why} ({s.elapsed + dur:.1f}s): the {name} node in flight was stopped"
        stopped = record(
            self.ctx,
            s,
            name,
            "error",
            f"stopped: {reason}"[:500],
            duration=dur,
            update={"next": "finish", "stop_reason": reason, "elapsed": s.elapsed + dur},
        )
        self._commit(stopped)

    @entered
    async def arun(self, approver: Approver | None = None) -> HealResult:
        """Step until the run is done, or waits for approval with no approver to ask (an async
        approver is awaited, a sync one called). Cancelling it (Ctrl-C on ``run``, an
        interrupted cell) stops the work in flight."""
        while not self._state.finished:
            if self._state.status == "awaiting_approval":
                decision = await self._ask(approver)
                if decision is None:
                    break
                self._apply(decision)
                continue
            await self.astep()
        return self.result

    async def _ask(self, approver: Approver | None) -> Decision | None:
        pending = self._state.pending
        if approver is None or pending is None:
            policy = self._state.config.approval.on_headless
            if policy == "error":
                return None
            return Decision(kind=policy, reason=f"on_headless={policy}")
        answer = approver(pending, self._state)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    def _apply(self, decision: Decision) -> HealState:
        s = apply_decision(self._state, decision, clock=self.ctx.clock())
        self.ctx.emit(s.events[-1])
        nxt = after_decision(s)
        if nxt not in AFTER_DECISION:
            raise RuntimeError(
                f"after_decision answered {nxt!r}, not among {AFTER_DECISION} in graph/table.py."
            )
        return self._commit(s.model_copy(update={"next": nxt}))

    @entered
    async def aresume(self, decision: Decision, approver: Approver | None = None) -> HealResult:
        """Answer the pending proposal (``Approve()``, ``Edit(code)``, ``Reject(reason)``) and go on."""
        self._apply(decision)
        return await self.arun(approver)

    step = sync_twin(astep)
    run = sync_twin(arun)
    resume = sync_twin(aresume)

    fork = fork
    """``run.fork(at_iteration, lessons=..., code=..., model=...)``: see ``graph.fork.fork``."""


def _end_detail(state: HealState, node: str, first_new_event: int) -> str:
    infos = [
        e.detail
        for e in state.events[first_new_event:]
        if e.kind in ("info", "error", "decision") and e.detail
    ]
    if node == "finish":
        return f"status {state.status}" + (f"; {infos[-1]}" if infos else "")
    if node == "plan_tests":  # the examples read as trusted tests, then the probes
        return "; ".join(infos)
    if node in ("generate", "repair") and state.pending is not None:
        lines = state.pending.code.count("\n") + 1
        return f"proposed {lines} line(s)" + (f"; {infos[-1]}" if infos else "")
    if node == "gate":
        if state.status == "awaiting_approval":
            return "awaiting approval"
        fresh = sum(1 for c in state.candidates if c.report is None)
        return f"accepted {fresh} candidate(s) for round {state.iteration}"
    return infos[-1] if infos else ""
