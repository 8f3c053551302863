"""``record``: one helper for the timeline events the engine writes itself (the roles write
theirs through ``selfheal.roles._calls``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selfheal.context import Context
from selfheal.state import Event, HealState
from selfheal.state.timeline import EventKind


def event(
    ctx: Context, state: HealState, node: str, kind: EventKind, detail: str = "", **fields: Any
) -> Event:
    """A timeline event of ``state``'s iteration at ``ctx``'s clock, sent to the live sink."""
    fields.setdefault("iteration", state.iteration)
    ev = Event(time=ctx.clock(), node=node, kind=kind, detail=detail, **fields)
    ctx.emit(ev)
    return ev


def record(
    ctx: Context,
    state: HealState,
    node: str,
    kind: EventKind = "info",
    detail: str = "",
    *,
    update: Mapping[str, Any] | None = None,
    **fields: Any,
) -> HealState:
    """``state`` with one more event on its timeline (see ``event``), and ``update`` applied."""
    ev = event(ctx, state, node, kind, detail, **fields)
    return state.model_copy(update={**(update or {}), "events": state.events + (ev,)})
