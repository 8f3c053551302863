"""Building a run's services (the model router, checked against the spec, the memory and the
sandbox) and its first state: docs/architecture.md, "The route of one ``heal()`` call"."""

from __future__ import annotations

import asyncio
import time

from selfheal.asking import Asker
from selfheal.config import ROLES, HealConfig, candidates_of, population_size
from selfheal.context import Context, EventSink, FixedRouter, ModelRouter, TokenSink
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import batch_free, batch_hint, innermost
from selfheal.memory import open_memory
from selfheal.request import HealRequest, ProviderArg
from selfheal.roles.requests import first_round_batches
from selfheal.state import Event, HealState


def make_router(config: HealConfig, provider: ProviderArg) -> ModelRouter:
    """The router for a run: ``provider`` (a string or an object) or ``config.calls.model``, with
    ``config.calls.models`` and ``SELFHEAL_MODEL_<ROLE>`` per-role overrides."""
    from selfheal.llm.router import Router

    if provider is not None and not isinstance(provider, str):
        if config.calls.models:
            return Router(default=provider, per_role=config.calls.models)
        return FixedRouter(provider)
    return Router(default=provider or config.calls.model, per_role=config.calls.models)


def check_models(router: ModelRouter, spec: str) -> None:
    """Before the run starts: every role's model string resolves (``auto`` included: with no
    model anywhere this is the ``ConfigError`` that says how to get one), and a provider that
    knows only some specs (the scripted demo) accepts this one. Real models are built on first
    use, as before."""
    from selfheal.llm.router import Router

    for role in ROLES:
        if isinstance(router, Router) and router.model_string(role).partition(":")[0] != "mock":
            continue  # resolved; built (and connected to) on first use
        check = getattr(router.for_role(role), "check_spec", None)
        if callable(check):
            check(spec)


def make_context(
    config: HealConfig,
    provider: ProviderArg = None,
    *,
    spec: str | None = None,
    executor: Executor | None = None,
    sink: EventSink | None = None,
    on_token: TokenSink | None = None,
    asker: Asker | None = None,
) -> Context:
    """The services of a run reopened (``Run.load``, ``fork``): the router for
    ``provider``/``config`` (checked against ``spec`` when given, before anything starts) and
    the rest as :func:`services` gives them."""
    llm = make_router(config, provider)
    if spec is not None:
        check_models(llm, spec)
    return services(config, llm, executor=executor, sink=sink, on_token=on_token, asker=asker)


def services(
    config: HealConfig,
    llm: ModelRouter,
    *,
    executor: Executor | None = None,
    sink: EventSink | None = None,
    on_token: TokenSink | None = None,
    asker: Asker | None = None,
) -> Context:
    """The ``Context`` of a run with router ``llm``: ``executor`` (default: the shared kernel
    pool), the memory across runs (when ``config.storage.memory``; a memory that cannot be opened is a
    ``MemoryUnavailable`` here, before any model call) and the live sinks."""
    memory = open_memory(config)
    if executor is None:
        from selfheal.kernel_sandbox import get_default_pool

        mode = config.limits.sandbox
        executor = get_default_pool() if mode is None else get_default_pool(mode)
    return Context(
        llm=llm, executor=executor, sink=sink, on_token=on_token, memory_store=memory, asker=asker
    )


async def new_run(
    request: HealRequest,
    *,
    sink: EventSink | None = None,
    on_token: TokenSink | None = None,
    asker: Asker | None = None,
) -> tuple[Context, HealState]:
    """The services and the first state of a new run for ``request`` (``Run.astart``'s one
    call here; docs/architecture.md, step 2). ``sink``/``on_token``/``asker`` stand in for the
    request's (the notebook's). What blocks runs in a worker thread, off the loop."""

    def prepare() -> tuple[Context, HealConfig, tuple[Event, ...]]:
        llm = make_router(request.config, request.provider)
        check_models(llm, request.spec)
        config, events = settled_config(request.config, llm, request.provider)
        ctx = services(
            config,
            llm,
            executor=request.executor,
            sink=sink or request.on_event,
            on_token=on_token or request.on_token,
            asker=asker,
        )
        return ctx, config, events

    asker = asker or request.asker
    ctx, config, events = await asyncio.to_thread(prepare)
    state = await request.ainitial_state(
        ctx.executor, config=config, events=events, can_ask=asker is not None
    )
    warm_up(state, ctx.llm)
    return ctx, state


def settled_config(
    config: HealConfig, router: ModelRouter, provider: ProviderArg
) -> tuple[HealConfig, tuple[Event, ...]]:
    """The config a run records, settled once before its first state, and the timeline notes
    that say why: the model strings its router chose (so reopening the run uses them again),
    ``candidates="auto"`` from the generator's ``batch_hint``, and on a ``batch_free`` backend
    an unset ``first_sample`` raised to the whole population."""
    update: dict[str, object] = _resolved_models(config, router, provider)
    generator = router.for_role("generator")
    hint = batch_hint(generator)
    notes: list[str] = []
    if config.generation.candidates == "auto":
        update["candidates"] = population_size(hint)
        said = f"its batch_hint {hint}" if hint is not None else "no batch_hint"
        notes.append(
            f"candidates=auto: {update['candidates']} ({generator.model_id} gives {said}; "
            "at least 4, at most 16)"
        )
    n = update.get("candidates", candidates_of(config))
    assert isinstance(n, int)
    chosen = "first_sample" in config.generation.model_fields_set
    if batch_free(generator) and not chosen and config.generation.first_sample < n:
        update["first_sample"] = n
        notes.append(
            f"first_sample={n}: {generator.model_id} decodes a batch for about the cost of "
            "one answer, so the first round asks the whole population at once"
        )
    events = tuple(
        Event(time=time.time(), node="generate", kind="info", model=generator.model_id, detail=d)
        for d in notes
    )
    return (config.changed(**update) if update else config), events


def warm_up(state: HealState, router: ModelRouter) -> None:
    """Ask a generator that can warm up its batch sizes (``warm_up``) for the first round's."""
    warm = getattr(innermost(router.for_role("generator")), "warm_up", None)
    if callable(warm):
        warm(first_round_batches(state))


def _resolved_models(
    config: HealConfig, router: ModelRouter, provider: ProviderArg
) -> dict[str, object]:
    """The ``model``/``models`` update that names the models the router chose (none when the
    config names its model, or the run was given a provider object)."""
    from selfheal.llm.router import Router

    if config.calls.model is not None or not isinstance(router, Router):
        return {}  # the model is named already (a string keeps its own spelling)
    if provider is not None and not isinstance(provider, str):
        return {}
    chosen = {role: router.model_string(role) for role in ROLES}
    values = list(chosen.values())
    model = max(set(values), key=values.count)
    models = dict(config.calls.models)
    for role, value in chosen.items():
        if value != model and role not in models:
            models[role] = value
    if (model, models) == (config.calls.model, dict(config.calls.models)):
        return {}
    return {"model": model, "models": models}
