"""The memory across runs in the pipeline: ``recall`` (the first node) and ``remember`` (the end
of ``finish``). Both go through ``ctx.memory_store``; a memory that fails mid-run is a ``degraded``
event on the timeline (with what to do), never the end of the run."""

from __future__ import annotations

import asyncio

from selfheal.context import Context
from selfheal.errors import MemoryUnavailable
from selfheal.graph.events import record
from selfheal.state import HealState, Remembered

NODE = "recall"


def recalled_text(remembered: tuple[Remembered, ...]) -> str:
    """One line: what a run recalled, and from which runs."""
    lessons = [r for r in remembered if r.kind == "lesson"]
    solutions = [r for r in remembered if r.kind == "solution"]
    parts = []
    if lessons:
        runs = sorted({r.run_id for r in lessons})
        parts.append(
            f"{len(lessons)} lesson(s) ({', '.join(r.id for r in lessons)}) remembered from "
            f"run {', '.join(runs)}"
        )
    parts += [
        f"a verified solution ({s.id}, spec {s.score:.0%} alike) remembered from run "
        f"{s.run_id} joins the first round"
        for s in solutions
    ]
    return "; ".join(parts)


async def recall(state: HealState, ctx: Context) -> HealState:
    """Recall what the memory holds for this spec: a few lessons (they go into the generator's
    prompts) and at most one verified solution of a very similar spec (a ``memory``
    candidate in the first round, run and ranked like any other)."""
    memory = ctx.memory_store
    if not state.config.storage.memory or memory is None:
        return record(ctx, state, NODE, detail="memory off")
    try:
        remembered = await asyncio.to_thread(memory.recall, state)  # (SQLite: off the loop)
    except MemoryUnavailable as exc:
        state = record(ctx, state, NODE, "degraded", str(exc))
        return record(ctx, state, NODE, detail="memory unavailable: the run goes on without it")
    if not remembered:
        return record(ctx, state, NODE, detail=f"nothing remembered for this spec ({memory.path})")
    return record(
        ctx, state, NODE, detail=recalled_text(remembered), update={"remembered": remembered}
    )


async def remember(state: HealState, ctx: Context) -> HealState:
    """Write down what the finished run teaches (its lessons; its solution when verified;
    which remembered lessons led to a worse result)."""
    memory = ctx.memory_store
    if not state.config.storage.memory or memory is None:
        return state
    try:
        learning = await asyncio.to_thread(memory.learn, state)  # (SQLite: off the loop)
    except MemoryUnavailable as exc:
        state = record(ctx, state, "finish", "degraded", str(exc))
        return record(ctx, state, "finish", detail="memory unavailable: nothing was remembered")
    return record(ctx, state, "finish", detail=learning.summary(memory.path))
