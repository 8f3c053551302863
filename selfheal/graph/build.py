"""Building a run's services: the model router and the sandbox, from a request or a config.

The one place that turns a model string or a Provider object into a router and picks the
default kernel pool; ``Run.start``, ``Run.load`` and ``fork`` get their context from here, and
the nodes only ever see the finished ``Context``. Before the sandbox starts, ``check_models``
makes sure every role's model can be had for the spec, so a wrong model fails before the run
has a log, a kernel or a model call.
"""

from __future__ import annotations

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
    """The services of a run: the router for ``provider``/``config`` (checked against
    ``spec`` when given, before anything starts), ``executor`` (default: the shared kernel
    pool), the memory across runs (when ``config.storage.memory``; a memory that cannot be
    opened is a ``MemoryUnavailable`` here, before any model call) and the live sinks."""
    llm = make_router(config, provider)
    if spec is not None:
        check_models(llm, spec)
    memory = open_memory(config)
    if executor is None:
        from selfheal.kernel_sandbox import get_default_pool

        executor = (
            get_default_pool()
            if config.limits.sandbox is None
            else get_default_pool(config.limits.sandbox)
        )
    return Context(
        llm=llm,
        executor=executor,
        sink=sink,
        on_token=on_token,
        memory_store=memory,
        asker=asker,
    )


def context_for(request: HealRequest) -> Context:
    """The services ``request`` asks for."""
    return make_context(
        request.config,
        request.provider,
        spec=request.spec,
        executor=request.executor,
        sink=request.on_event,
        on_token=request.on_token,
        asker=request.asker,
    )


def with_population(state: HealState, router: ModelRouter) -> HealState:
    """``state`` with ``candidates="auto"`` resolved from the generator's backend
    (:func:`selfheal.config.population_size` of its ``batch_hint``) and, on a backend whose
    batch costs about one answer (``batch_free``: transformers on a GPU), a ``first_sample``
    the config does not set raised to the whole population (the first round asks every
    candidate at once); both written into the config (so the run log and the result say what
    ran) and onto the timeline. A backend that can warm up its batch sizes (``warm_up``) is
    asked for the first round's, off the run's path (docs/gpu.md)."""
    config = state.config
    provider = router.for_role("generator")
    hint = batch_hint(provider)
    update: dict[str, int] = {}
    notes: list[str] = []
    if config.generation.candidates == "auto":
        update["candidates"] = population_size(hint)
        said = f"its batch_hint {hint}" if hint is not None else "no batch_hint"
        notes.append(
            f"candidates=auto: {update['candidates']} ({provider.model_id} gives {said}; "
            "at least 4, at most 16)"
        )
    n = update.get("candidates", candidates_of(config))
    chosen = "first_sample" in config.generation.model_fields_set
    if batch_free(provider) and not chosen and config.generation.first_sample < n:
        update["first_sample"] = n
        notes.append(
            f"first_sample={n}: {provider.model_id} decodes a batch for about the cost of "
            "one answer, so the first round asks the whole population at once"
        )
    if update:
        config = config.changed(**update)
        events = [
            Event(time=time.time(), node="generate", kind="info", model=provider.model_id, detail=d)
            for d in notes
        ]
        state = state.model_copy(update={"config": config, "events": (*state.events, *events)})
    warm = getattr(innermost(provider), "warm_up", None)
    if callable(warm):
        warm(first_round_batches(state))
    return state


def with_resolved_models(state: HealState, router: ModelRouter, provider: ProviderArg) -> HealState:
    """``state`` with the model strings its router chose (``auto``, ``$SELFHEAL_MODEL``,
    ``$SELFHEAL_MODEL_<ROLE>``) written into its config, so the run log says which models ran
    and reopening the run (``Run.load``, ``selfheal runs resume``) uses them again. A run given a
    provider object keeps its config as it is: the object is not saved, and must be passed
    again to reopen the run."""
    from selfheal.llm.router import Router

    config = state.config
    if config.calls.model is not None or not isinstance(router, Router):
        return state  # the model is named already (a string keeps its own spelling)
    if provider is not None and not isinstance(provider, str):
        return state
    chosen = {role: router.model_string(role) for role in ROLES}
    values = list(chosen.values())
    model = max(set(values), key=values.count)
    models = dict(config.calls.models)
    for role, value in chosen.items():
        if value != model and role not in models:
            models[role] = value
    if (model, models) == (config.calls.model, dict(config.calls.models)):
        return state
    return state.model_copy(update={"config": config.changed(model=model, models=models)})
