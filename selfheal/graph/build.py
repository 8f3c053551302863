"""Building a run's services: the model router and the sandbox, from a request or a config.

The one place that turns a model string or a Provider object into a router and picks the
default kernel pool; ``Run.start``, ``Run.load`` and ``fork`` get their context from here, and
the nodes only ever see the finished ``Context``.
"""

from __future__ import annotations

from selfheal.config import HealConfig
from selfheal.context import Context, EventSink, FixedRouter, ModelRouter, TokenSink
from selfheal.kernel_sandbox.types import Executor
from selfheal.memory import open_memory
from selfheal.request import HealRequest, ProviderArg

__all__ = ["context_for", "make_context", "make_router"]


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
    """The services of a run: the router for ``provider``/``config``, ``executor`` (default:
    the shared kernel pool), the memory across runs (when ``config.memory``; a memory that
    cannot be opened is a ``MemoryUnavailable`` here, before any model call) and the live
    sinks."""
    llm = make_router(config, provider)
    memory = open_memory(config)
    if executor is None:
        from selfheal.kernel_sandbox import get_default_pool

        executor = get_default_pool()
    return Context(llm=llm, executor=executor, sink=sink, on_token=on_token, memory=memory)


def context_for(request: HealRequest) -> Context:
    """The services ``request`` asks for."""
    return make_context(
        request.config,
        request.provider,
        executor=request.executor,
        sink=request.on_event,
        on_token=request.on_token,
    )
