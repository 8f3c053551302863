"""Time travel: a new run from an earlier state of a run, with changes (other lessons, edited
code, another model). ``Run.fork`` is this module's ``fork``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self, TypeVar

from selfheal.config import HealConfig
from selfheal.context import Context, EventSink, FixedRouter
from selfheal.errors import ConfigError
from selfheal.graph.build import make_context
from selfheal.kernel_sandbox.types import Executor
from selfheal.request import ProviderArg
from selfheal.state import Candidate, ForkInfo, HealState, Lesson, new_run_id


class Forkable(Protocol):
    """What ``fork`` needs of a run (``graph.runner.Run``, which takes ``fork`` as its method;
    a protocol, so this module does not import the runner)."""

    ctx: Context

    @property
    def log(self) -> object: ...

    def history(self) -> list[HealState]: ...

    @classmethod
    def new(cls, state: HealState, ctx: Context, *, persist: bool = True) -> Self: ...


Run = TypeVar("Run", bound=Forkable)


def fork(
    run: Run,
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
    """A new run starting from ``run``'s state at iteration ``at_iteration`` (0 = before
    any code), with changes. Both runs keep their own logs."""
    base = state_at(run.history(), at_iteration)
    changes: list[str] = []
    cfg = config or base.config
    if model is not None:
        cfg = cfg.changed(model=model)
        changes.append("model")
    if models is not None:
        cfg = cfg.changed(models=dict(models))
        changes.append("models")
    if config is not None:
        changes.append("config")
    update: dict[str, Any] = {"config": cfg, "run_id": new_run_id(), "status": "running"}
    if lessons is not None:
        update["lessons"] = tuple(Lesson(text=t, iteration=at_iteration) for t in lessons)
        changes.append("lessons")
    if code is not None:
        if at_iteration < 1:
            raise ConfigError("fork(code=...) needs at_iteration >= 1 (there is no code at 0).")
        kept = tuple(c for c in base.candidates if c.round < at_iteration)
        edit = Candidate(
            id=f"c{len(base.candidates) + 1}", code=code, origin="human_edit", round=at_iteration
        )
        update["candidates"] = (*kept, edit)
        update["attempts"] = tuple(a for a in base.attempts if a.iteration < at_iteration)
        update["next"] = "execute"
        changes.append("code")
    update["parent"] = ForkInfo(
        run_id=base.run_id, at_iteration=at_iteration, changes=tuple(changes)
    )
    forked = base.model_copy(update=update)
    executor = executor or run.ctx.executor
    sink = sink or run.ctx.sink
    ctx: Context
    if (
        provider is None
        and isinstance(run.ctx.llm, FixedRouter)
        and model is None
        and models is None
    ):
        ctx = Context(
            llm=run.ctx.llm, executor=executor, sink=sink, memory_store=run.ctx.memory_store
        )
    else:
        ctx = make_context(cfg, provider, spec=forked.spec.text, executor=executor, sink=sink)
    # a fork has no one to ask (its context has no asker)
    forked = forked.model_copy(update={"can_ask": False})
    return type(run).new(forked, ctx, persist=run.log is not None)


def state_at(history: Sequence[HealState], k: int) -> HealState:
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
