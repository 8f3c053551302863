"""Executor: run every candidate that has not yet run on every test and probe input, in the
kernel sandbox, and record how each behaves."""

from __future__ import annotations

import time
from collections import Counter

from selfheal._parse import normalized
from selfheal.agreement import behaviour_of
from selfheal.context import Context
from selfheal.graph.events import record
from selfheal.kernel_sandbox.types import ExecutionReport, SandboxTest, arun_many
from selfheal.probes import probe_call
from selfheal.roles.test_writer import probes_added
from selfheal.state import Candidate, HealState
from selfheal.testsuite import limits_for

NODE = "execute"


def _workload(state: HealState) -> list[SandboxTest]:
    """Every test (old ones too: a test is never silently dropped), then every probe."""
    items: list[SandboxTest] = [t.to_sandbox() for t in state.tests]
    items += [probe_call(p.id, p.call) for p in state.probes]
    return items


def _needs_run(c: Candidate, ids: set[str]) -> bool:
    if c.report is None:
        return True
    if not c.report.load.ok:
        return False  # it will not load on new tests either
    return not ids <= {r.test_id for r in c.report.results}


async def execute(state: HealState, ctx: Context) -> HealState:
    """Run the candidates that lack a result for some test or probe (identical code runs once)."""
    state = probes_added(state, ctx, node=NODE)
    started = time.perf_counter()
    workload = _workload(state)
    ids = {w.id for w in workload}
    todo = [c for c in state.candidates if _needs_run(c, ids)]
    distinct: dict[str, str] = {}  # normalized code -> code, identical candidates run once
    for c in todo:
        distinct.setdefault(normalized(c.code), c.code)
    ran = await arun_many(
        ctx.executor,
        [(code, workload) for code in distinct.values()],
        timeout=state.config.limits.test_timeout,
        limits=limits_for(state),
    )
    by_code: dict[str, ExecutionReport] = dict(zip(distinct, ran, strict=True))
    reports = {c.id: by_code[normalized(c.code)] for c in todo}
    sharing = Counter(normalized(c.code) for c in todo)  # identical candidates share a run
    runs = len(ran)

    def with_run(c: Candidate) -> Candidate:
        report = reports[c.id]
        seconds = c.cost.sandbox_seconds + report.duration / sharing[normalized(c.code)]
        cost = c.cost.model_copy(update={"sandbox_seconds": seconds})
        c = c.model_copy(update={"report": report, "cost": cost})
        return c.model_copy(update={"behaviour": behaviour_of(c, state.probes)})

    candidates = tuple(with_run(c) if c.id in reports else c for c in state.candidates)
    usage = state.usage.model_copy(update={"executions": state.usage.executions + runs})
    state = state.model_copy(update={"candidates": candidates, "usage": usage})
    loaded = sum(1 for c in candidates if c.id in reports and c.report and c.report.load.ok)
    return record(
        ctx,
        state,
        NODE,
        "info",
        f"ran {len(todo)} candidate(s) ({runs} distinct) on {len(state.tests)} test(s) and "
        f"{len(state.probes)} probe(s); {loaded} loaded",
        duration=time.perf_counter() - started,
    )
