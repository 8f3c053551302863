"""Agreement as evidence: cluster candidates by behaviour, dispute model-written tests the
agreeing candidates fail (kept and shown, no longer blocking), and choose by standing
(docs/loop.md, "The tournament"). Pure functions over the state."""

from __future__ import annotations

import ast
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from selfheal._parse import literal, parse_or_none
from selfheal.example_hints import no_trusted_test
from selfheal.kernel_sandbox.boundary import weaker_than_landlock
from selfheal.kernel_sandbox.types import ExecutionReport
from selfheal.state import Candidate, Evidence, HealState, ProbeInput, TestCase


def behaviour_of(candidate: Candidate, probes: Sequence[ProbeInput]) -> dict[str, str]:
    """Probe id -> canonical output (``raise Type``, ``<timeout>``) from the candidate's report."""
    rep = candidate.report
    if rep is None:
        return {}
    return outputs_of(rep, {p.id for p in probes})


def outputs_of(rep: ExecutionReport, ids: Collection[str]) -> dict[str, str]:
    """Probe id -> canonical output (``raise Type``, ``<timeout>``) of the probes ``ids`` in a
    sandbox report; empty when the code did not load."""
    if not rep.load.ok:
        return {}
    out: dict[str, str] = {}
    for r in rep.results:
        if r.test_id not in ids:
            continue
        value = getattr(r, "value", None)
        if value is not None and r.outcome in ("passed", "error"):
            out[r.test_id] = value
        elif r.outcome == "error":
            out[r.test_id] = f"raise {r.exc_type or 'Exception'}"
        else:
            out[r.test_id] = f"<{r.outcome}>"
    return out


def canonical_literal(source: str) -> str | None:
    """The canonical text of a Python literal (the spec oracle's answer), comparable with a
    probe's output; None when it is not a literal."""
    from selfheal.kernel_sandbox import canonical

    try:
        value = literal(source.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return canonical(value)


def _trusted(tests: Sequence[TestCase]) -> list[TestCase]:
    return [t for t in tests if t.trusted]


def _outcomes(c: Candidate) -> dict[str, str]:
    return {r.test_id: r.outcome for r in c.report.results} if c.report is not None else {}


def ignores_input(code: str, entry_point: str | None) -> bool:
    """The function never reads any of its parameters: it can only have passed the examples
    by returning them (a 1.5B model sometimes hardcodes an example's expected output)."""
    if not entry_point:
        return False
    tree = parse_or_none(code)
    body = tree.body if tree else []
    defs = [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    fn = next((n for n in defs if n.name == entry_point), None)
    if fn is None:
        return False
    a = fn.args
    params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    if not params:
        return False
    used = {n.id for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return not (params & used)


def passes_trusted(c: Candidate, tests: Sequence[TestCase]) -> bool:
    if c.report is None or not c.report.load.ok:
        return False
    out = _outcomes(c)
    return all(out.get(t.id) == "passed" for t in _trusted(tests))


@dataclass(frozen=True)
class Selection:
    """The outcome of one selection: who stands first, the clusters, what is disputed."""

    chosen: Candidate | None
    """The candidate to keep (None when no candidate has run)."""
    clusters: list[list[Candidate]]
    """Clusters of candidates passing every trusted test, in standing order."""
    passing: list[Candidate]
    """Candidates that load and pass every trusted test."""
    disputed: dict[str, str] = field(default_factory=dict)
    """Model-written test id -> why it is disputed."""
    failing: tuple[str, ...] = ()
    """Active tests the chosen candidate fails that are not disputed."""
    valid_probes: tuple[str, ...] = ()
    """Probe ids the clustering used (inputs most passing candidates reject are dropped)."""
    oracle_votes: int = 0
    """Oracle answers the chosen cluster matches."""
    scores: tuple[tuple[int, int], ...] = ()
    """Per cluster: (size + oracle votes, credible model-written tests passed)."""

    @property
    def tied(self) -> bool:
        """The two leading clusters stand equal (the spec oracle's question)."""
        return len(self.scores) > 1 and self.scores[0] == self.scores[1]


def _valid_probes(passing: Sequence[Candidate], probes: Sequence[ProbeInput]) -> list[str]:
    """Probes on which at most half of the passing candidates raise or time out: an input most
    correct-looking candidates reject is probably outside the spec's domain."""
    valid = []
    for p in probes:
        bad = 0
        for c in passing:
            v = c.behaviour.get(p.id)
            if v is None or v.startswith(("raise ", "<")):
                bad += 1
        if passing and 2 * bad <= len(passing):
            valid.append(p.id)
    return valid


def _key(c: Candidate, valid: Sequence[str]) -> tuple[str, ...]:
    return tuple(c.behaviour.get(pid, "<not run>") for pid in valid)


def distinguishing_probes(sel: Selection, probes: Sequence[ProbeInput]) -> list[ProbeInput]:
    """Probes on which the leading clusters return different values (the oracle's questions),
    most informative first (where the two largest clusters differ)."""
    if len(sel.clusters) < 2:
        return []
    a, b = sel.clusters[0][0], sel.clusters[1][0]
    by_id = {p.id: p for p in probes}
    out = []
    for pid in sel.valid_probes:
        va, vb = a.behaviour.get(pid), b.behaviour.get(pid)
        if va != vb and pid in by_id:
            out.append(by_id[pid])
    return out


def select(state: HealState) -> Selection:
    """Rank every run candidate of the state; see the module docstring for the order."""
    ran = [c for c in state.candidates if c.report is not None]
    if not ran:
        return Selection(chosen=None, clusters=[], passing=[])
    tests = state.tests
    passing = [c for c in ran if passes_trusted(c, tests)]
    # a candidate that ignores its input passed the examples by returning them: it stands
    # behind every candidate that passes them honestly
    honest = [c for c in passing if not ignores_input(c.code, state.spec.entry_point)]
    if honest:
        passing = honest
    valid = _valid_probes(passing, state.probes)
    groups: dict[tuple[str, ...], list[Candidate]] = {}
    for c in passing:
        groups.setdefault(_key(c, valid), []).append(c)
    probe_call = {p.id: p.call for p in state.probes}
    oracle = {call: canonical_literal(v) for call, v in state.oracle.items()}
    # a critic's counterexample that the spec oracle confirms outweighs agreement: the cluster
    # that returns the confirmed value on it leads
    critic_calls = {r.counterexample for r in state.reviews if r.counterexample}

    def votes(group: list[Candidate]) -> int:
        c = group[0]
        return sum(
            len(passing) if probe_call.get(pid) in critic_calls else 1
            for pid in valid
            if (want := oracle.get(probe_call.get(pid, ""))) is not None
            and c.behaviour.get(pid) == want
        )

    order = {c.id: i for i, c in enumerate(state.candidates)}

    def standing(group: list[Candidate]) -> tuple[int, int, int, int]:
        greedy = any(c.origin == "greedy" for c in group)
        first = min(order[c.id] for c in group)
        return (len(group) + votes(group), _credible_passed(group[0], tests), greedy, -first)

    clusters = sorted(groups.values(), key=standing, reverse=True)
    clusters = [sorted(g, key=lambda c: (c.origin != "greedy", order[c.id])) for g in clusters]
    disputed: dict[str, str] = {}
    if clusters and len(clusters[0]) >= 2:
        top = clusters[0]
        for t in tests:
            if t.trusted or t.quarantined:
                continue
            if all(_outcomes(c).get(t.id) not in (None, "passed") for c in top):
                disputed[t.id] = (
                    f"disputed: {len(top)} candidates that pass every trusted test and agree on "
                    f"every probe all fail it"
                )
    if clusters:
        chosen = clusters[0][0]
    else:
        chosen = max(ran, key=lambda c: (_failing_rank(c, tests), -order[c.id]))
    out = _outcomes(chosen)
    failing = tuple(
        t.id
        for t in tests
        if not t.quarantined and t.id not in disputed and out.get(t.id) != "passed"
    )
    return Selection(
        chosen=chosen,
        clusters=clusters,
        passing=passing,
        disputed=disputed,
        failing=failing,
        valid_probes=tuple(valid),
        oracle_votes=votes(clusters[0]) if clusters else 0,
        scores=tuple(standing(g)[:2] for g in clusters),
    )


def _credible_passed(c: Candidate, tests: Sequence[TestCase]) -> int:
    out = _outcomes(c)
    return sum(
        1 for t in tests if not t.trusted and not t.quarantined and out.get(t.id) == "passed"
    )


def _failing_rank(c: Candidate, tests: Sequence[TestCase]) -> tuple[int, int, int]:
    """Loads, trusted tests passed, credible model-written tests passed."""
    if c.report is None or not c.report.load.ok:
        return (0, 0, 0)
    out = _outcomes(c)
    trusted = sum(1 for t in tests if t.trusted and out.get(t.id) == "passed")
    return (1, trusted, _credible_passed(c, tests))


def evidence_for(state: HealState, sel: Selection) -> Evidence:
    """The one-record summary of a selection."""
    trusted = _trusted(state.tests)
    chosen = sel.chosen
    out = _outcomes(chosen) if chosen is not None else {}
    t_pass = sum(1 for t in trusted if out.get(t.id) == "passed")
    sizes = tuple(len(g) for g in sel.clusters)
    chosen_size = sizes[0] if sizes and chosen is not None and chosen in sel.clusters[0] else 0
    ran = sum(1 for c in state.candidates if c.report is not None)
    active = [t.id for t in state.tests if not t.quarantined and t.id not in sel.disputed]

    def contends(c: Candidate) -> bool:
        out = _outcomes(c)
        return all(out.get(t) in (None, "passed") for t in active)

    contenders = sum(1 for c in sel.passing if contends(c))
    agreeing = sum(1 for c in sel.clusters[0] if contends(c)) if chosen_size else 0
    majority = contenders < 2 or 2 * agreeing > contenders
    need = state.config.selection.agreement
    # a remembered solution was verified (by agreement) in an earlier run: it brings that along
    # your own code (``heal(code=...)``) is not a model's guess either: it counts twice too
    remembered = (
        sum(1 for c in sel.clusters[0] if c.origin in ("memory", "user")) if chosen_size else 0
    )
    agreed = chosen_size + remembered >= need
    head = f"{t_pass}/{len(trusted)} trusted tests pass" if trusted else no_trusted_test(state.spec)
    answers = sum(1 for t in trusted if t.answer)
    if answers:
        head += f" ({answers} of them your answer(s) to a question)"
    if answers and not any(t.verifies for t in trusted):
        head += (
            " (answers steer the choice but verify only beside an example or a test of "
            "yours: add one to verify)"
        )
    smoke = tuple(t.id for t in trusted if t.smoke)
    if smoke and len(smoke) == len(trusted):
        head += (
            f" (smoke test(s) only: {', '.join(smoke[:3])} check(s) no value, so they cannot "
            "verify; add an assert that checks a result)"
        )
    elif smoke:
        head += f" ({len(smoke)} of them smoke test(s) that check no value: {', '.join(smoke[:3])})"
    if ran > 1:
        if chosen_size:
            agree = (
                f"{chosen_size} of {len(sel.passing)} candidates that pass them agree on "
                f"{len(sel.valid_probes)} probe inputs"
            )
            if len(sizes) > 1:
                agree += f" (clusters {'/'.join(map(str, sizes))})"
            if remembered and chosen_size == 1:
                # the agreement is the earlier run's: say so instead of "1 of 1 agree"
                others = len(sel.passing) - 1
                agree = (
                    "the chosen code is the solution remembered from a verified earlier run "
                    "(it counts twice); "
                    + (
                        f"none of the {others} other candidate(s) that pass them behaves alike "
                        f"on {len(sel.valid_probes)} probe inputs"
                        if others
                        else f"no other candidate passes them ({len(sel.valid_probes)} probe "
                        "inputs)"
                    )
                )
            elif remembered:
                agree += ", one of them the solution remembered from a verified earlier run"
            if not majority:
                agree += ", no behaviour holds a majority"
            elif not agreed:
                agree += f" ({need} must agree to verify)"
            if ran > len(sel.passing):
                agree += f"; {ran - len(sel.passing)} of {ran} candidates fail a trusted test"
        else:
            agree = f"no candidate of {ran} passes every trusted test"
    elif chosen is not None and chosen.origin == "user" and chosen_size:
        agree = f"your code ({chosen.id}) passes them: nothing to repair"
    else:
        agree = "one candidate" + (
            f" (verifying needs {need} that agree: ask for more candidates)" if not agreed else ""
        )
    parts = [head, agree]
    if sel.oracle_votes:
        parts.append(f"the spec oracle agrees on {sel.oracle_votes} input(s)")
    if sel.disputed:
        parts.append(f"{len(sel.disputed)} model-written test(s) disputed")
    if sel.failing:
        parts.append(f"still failing: {', '.join(sel.failing[:4])}")
    boundaries = {c.report.boundary for c in state.candidates if c.report is not None}
    weak = sorted(b for b in boundaries if weaker_than_landlock(b))
    if weak:
        parts.append(f"candidates ran inside a boundary weaker than Landlock: {', '.join(weak)}")
    return Evidence(
        trusted_passed=t_pass,
        trusted_total=len(trusted),
        candidates=ran,
        passing=len(sel.passing),
        clusters=sizes,
        chosen_cluster=chosen_size,
        probes=len(sel.valid_probes),
        disputed=tuple(sorted(sel.disputed)),
        failing=sel.failing,
        oracle=sel.oracle_votes,
        smoke=smoke,
        majority=majority,
        agreed=agreed,
        summary="; ".join(parts),
    )
