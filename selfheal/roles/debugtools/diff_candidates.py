"""``diff_candidates(a, b)``: the code diff between two candidates, the probe inputs on which
they return different things and the tests they do not agree on. Outputs come from the runs
of the population; probe inputs one of them lacks are run now in the sandbox."""

from __future__ import annotations

from selfheal.context import Context
from selfheal.diffs import unified_diff
from selfheal.kernel_sandbox.types import arun_many
from selfheal.probes import probe_call
from selfheal.roles.debugtools._common import current, cut
from selfheal.state import Candidate, HealState
from selfheal.testsuite import limits_for


def _by_id(state: HealState, ref: str) -> Candidate | None:
    ref = ref.strip().strip("`'\"")
    if ref.lower() in ("current", "this", "it"):
        ref = current(state)[0]
    return next((c for c in state.candidates if c.id == ref), None)


def _status(state: HealState, c: Candidate) -> str:
    rep = c.report
    if rep is None:
        return "not run"
    if not rep.load.ok:
        return f"does not load ({rep.load.exc_type})"
    active = {t.id: t for t in state.active_tests}
    failing = [r.test_id for r in rep.results if r.test_id in active and r.outcome != "passed"]
    if not failing:
        return "passes every test"
    shown = [f"{tid} (trusted)" if active[tid].trusted else tid for tid in failing[:4]]
    return f"fails {', '.join(shown)}" + (" …" if len(failing) > 4 else "")


def candidate_lines(state: HealState, limit: int = 8) -> list[str]:
    """One line per candidate (the latest ``limit``), for the debugger's prompt."""
    diagnosed = current(state)[0]
    out = []
    for c in state.candidates[-limit:]:
        mark = " ← the one being diagnosed" if c.id == diagnosed else ""
        out.append(f"{c.id} ({c.origin}, round {c.round}): {_status(state, c)}{mark}")
    return out


async def diff_candidates(
    a_ref: str, b_ref: str, state: HealState, ctx: Context
) -> tuple[str, int]:
    """The observation (see the module docstring) and the sandbox runs it made."""
    a, b = _by_id(state, a_ref), _by_id(state, b_ref)
    known = ", ".join(c.id for c in state.candidates) or "none"
    if a is None or b is None:
        missing = a_ref if a is None else b_ref
        return f"there is no candidate {missing!r}; the candidates are {known}", 0
    if a.id == b.id:
        return f"{a.id} is the same candidate; pick another one of {known}", 0
    out = [f"{a.id} ({a.origin}): {_status(state, a)}; {b.id} ({b.origin}): {_status(state, b)}"]
    diff = unified_diff(a.code, b.code, a=a.id, b=b.id).splitlines()
    if not diff:
        out.append("the code is the same")
    else:
        out += diff[:40] + ([f"… {len(diff) - 40} more diff line(s)"] if len(diff) > 40 else [])
    runs = 0
    loaded = all(c.report is not None and c.report.load.ok for c in (a, b))
    behaviour = {a.id: dict(a.behaviour), b.id: dict(b.behaviour)}
    lacking = [
        p for p in state.probes if p.id not in behaviour[a.id] or p.id not in behaviour[b.id]
    ]
    if loaded and lacking:
        probes = [probe_call(p.id, p.call) for p in lacking]
        reports = await arun_many(
            ctx.executor,
            [(a.code, probes), (b.code, probes)],
            timeout=state.config.limits.test_timeout,
            limits=limits_for(state),
        )
        runs = 2
        for c, rep in zip((a, b), reports, strict=True):
            for r in rep.results:
                behaviour[c.id][r.test_id] = r.value if r.value is not None else f"<{r.outcome}>"
    compared = [p for p in state.probes if p.id in behaviour[a.id] and p.id in behaviour[b.id]]
    split = [p for p in compared if behaviour[a.id][p.id] != behaviour[b.id][p.id]]
    if split:
        out.append(f"they return different things on {len(split)} of {len(compared)} probe inputs:")
        out += [
            f"  {p.call}: {a.id} -> {cut(behaviour[a.id][p.id], 80)} | "
            f"{b.id} -> {cut(behaviour[b.id][p.id], 80)}"
            for p in split[:8]
        ]
    elif compared:
        out.append(f"they return the same on all {len(compared)} probe inputs")
    if a.report is not None and b.report is not None:
        oa = {r.test_id: r.outcome for r in a.report.results}
        ob = {r.test_id: r.outcome for r in b.report.results}
        split_tests = [
            t.id for t in state.active_tests if t.id in oa and t.id in ob and oa[t.id] != ob[t.id]
        ]
        if split_tests:
            out.append(
                "tests they do not agree on: "
                + "; ".join(f"{t}: {a.id} {oa[t]}, {b.id} {ob[t]}" for t in split_tests[:8])
            )
    return "\n".join(out), runs
