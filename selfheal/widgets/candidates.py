"""The population panel of the notebook view: every candidate, the clusters, which one won
and why (pure functions from a ``HealState``, like ``viewmodel``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from selfheal.records import Record
from selfheal.state import Candidate, HealState, ProbeInput
from selfheal.state.candidates import CandidateCost
from selfheal.widgets.viewmodel import awaits_human

CandidateState = Literal["proposed", "not run", "no load", "fails trusted", "passes trusted"]
"""Where a candidate stands: ``proposed`` (in a proposal waiting for your approval), ``not run``
yet, its code does ``no load``, it ``fails trusted`` tests, or it ``passes trusted`` tests
(then it belongs to a behaviour cluster)."""

CANDIDATE_ICONS: dict[str, str] = {
    "proposed": "●",
    "not run": "·",
    "no load": "☠",
    "fails trusted": "✗",
    "passes trusted": "✓",
}


class CandidateRow(Record):
    """One candidate of the population and where it stands."""

    id: str
    """``c1``, ``c2``, ..."""
    origin: str
    """``greedy``, ``sample``, ``patch``, ``rewrite``, ``regenerate``, ``human_edit``..."""
    round: int
    """The round (iteration) that produced it."""
    parent: str | None = None
    """The candidate it was patched from, or the remembered solution (``S2``) a ``memory``
    candidate is."""
    temperature: float = 0.0
    """Sampling temperature of its request."""
    state: CandidateState
    """Where it stands."""
    icon: str
    """The state's icon."""
    loads: bool | None = None
    """Its code loaded in the sandbox (None: not run)."""
    load_error: str = ""
    """Why it did not load."""
    trusted_passed: int = 0
    """Trusted tests (spec examples, yours) it passes."""
    trusted_total: int = 0
    """Trusted tests in all."""
    tests_passed: int = 0
    """Active tests (not quarantined) it passes."""
    tests_total: int = 0
    """Active tests in all."""
    failing: tuple[str, ...] = ()
    """Active tests it does not pass."""
    cluster: int | None = None
    """Its behaviour cluster (0: the winning one) among candidates passing every trusted test."""
    chosen: bool = False
    """The latest selection chose it (its code is the round's attempt)."""
    outputs: tuple[str, ...] = ()
    """What it returned on :attr:`CandidatesView.probes`, in that order (``""``: not run)."""
    code: str = ""
    """Its source."""
    cost: CandidateCost = Field(default_factory=CandidateCost)
    """What it cost: tokens and seconds of the call that wrote it, seconds in the sandbox."""


class ClusterRow(Record):
    """Candidates that pass every trusted test and behave the same on every probe."""

    index: int
    """0 is the winning cluster (standing order)."""
    members: tuple[str, ...]
    """Candidate ids."""
    won: bool
    """The chosen candidate is in it."""
    outputs: tuple[str, ...] = ()
    """What its members return on :attr:`CandidatesView.probes`."""


class CandidatesView(Record):
    """The population panel: every candidate, the clusters, which one won and why."""

    rows: tuple[CandidateRow, ...]
    """Every candidate, in order (a waiting proposal's candidates last, ``proposed``)."""
    probes: tuple[str, ...]
    """The probe calls shown as columns: where the candidates disagree first."""
    total_probes: int
    """Probe inputs in all."""
    clusters: tuple[ClusterRow, ...]
    """The latest selection's clusters, winner first."""
    chosen: str | None
    """Id of the chosen candidate (None before the first selection)."""
    verdict: str
    """Which candidate and cluster won, in one line."""
    evidence: str
    """The evidence summary the status rests on (``result.evidence.summary``)."""
    disputed: tuple[str, ...] = ()
    """Model-written tests the agreeing candidates dispute, with why."""
    oracle: tuple[str, ...] = ()
    """The spec oracle's answers: ``call -> value``."""


def chosen_id(state: HealState) -> str | None:
    """The candidate the latest selection chose (the latest attempt's)."""
    return next((a.candidate for a in reversed(state.attempts) if a.candidate), None)


def short(value: str, width: int = 28) -> str:
    """``value`` on one line, cut to ``width`` characters with an ellipsis."""
    value = " ".join(value.split())
    return value if len(value) <= width else value[: width - 1] + "…"


def shown_probes(state: HealState, limit: int = 3) -> list[ProbeInput]:
    """The probes worth a column: those the oracle was asked about, then those on which the
    run candidates disagree, then the first others; at most ``limit``."""
    ran = [c for c in state.candidates if c.report is not None and c.report.load.ok]
    asked = [p for p in state.probes if p.call in state.oracle]
    split = [p for p in state.probes if len({c.behaviour.get(p.id) for c in ran}) > 1]
    return list(dict.fromkeys([*asked, *split, *state.probes]))[:limit]


def candidate_row(
    state: HealState,
    c: Candidate,
    probes: Sequence[ProbeInput] = (),
    *,
    chosen: str | None = None,
    proposed: bool = False,
) -> CandidateRow:
    """One candidate's standing, from its latest run."""
    trusted = [t for t in state.tests if t.trusted]
    active = [t for t in state.tests if not t.quarantined]
    rep = c.report
    base = CandidateRow(
        id=c.id,
        origin=c.origin,
        round=c.round,
        parent=c.parent or c.memory_id,
        temperature=c.temperature,
        state="proposed" if proposed else "not run",
        icon=CANDIDATE_ICONS["proposed" if proposed else "not run"],
        trusted_total=len(trusted),
        tests_total=len(active),
        code=c.code,
        cost=c.cost,
    )
    if proposed or rep is None:
        return base
    if not rep.load.ok:
        why = f"{rep.load.exc_type or 'error'}: {rep.load.message}".strip()
        return base.model_copy(
            update={
                "state": "no load",
                "icon": CANDIDATE_ICONS["no load"],
                "loads": False,
                "load_error": why,
                "failing": tuple(t.id for t in active),
                "chosen": c.id == chosen,
            }
        )
    out = {r.test_id: r.outcome for r in rep.results}
    t_pass = sum(1 for t in trusted if out.get(t.id) == "passed")
    st: CandidateState = "passes trusted" if t_pass == len(trusted) else "fails trusted"
    return base.model_copy(
        update={
            "state": st,
            "icon": CANDIDATE_ICONS[st],
            "loads": True,
            "trusted_passed": t_pass,
            "tests_passed": sum(1 for t in active if out.get(t.id) == "passed"),
            "failing": tuple(t.id for t in active if out.get(t.id) != "passed"),
            "cluster": c.cluster,
            "chosen": c.id == chosen,
            "outputs": tuple(short(c.behaviour.get(p.id, "")) for p in probes),
        }
    )


def _verdict(state: HealState, rows: Sequence[CandidateRow], clusters: Sequence[ClusterRow]) -> str:
    chosen = next((r for r in rows if r.chosen), None)
    if chosen is None:
        if any(r.state not in ("proposed", "not run") for r in rows):
            return "no candidate chosen yet"
        return "no candidate has run yet" if rows else "no candidate yet"
    who = f"{chosen.id} ({chosen.origin}, round {chosen.round})"
    if chosen.cluster is not None and clusters:
        won = next((k for k in clusters if k.won), clusters[0])
        passing = sum(len(k.members) for k in clusters)
        text = (
            f"{who} chosen: cluster {won.index} won with {len(won.members)} of {passing} "
            f"candidate(s) that pass every trusted test"
        )
        if len(clusters) > 1:
            text += f" ({len(clusters)} clusters)"
        ev = state.evidence
        if ev is not None and ev.oracle:
            text += f"; the spec oracle agrees with it on {ev.oracle} input(s)"
        return text
    if chosen.trusted_total and chosen.trusted_passed < chosen.trusted_total:
        return (
            f"{who} chosen: no candidate passes every trusted test; it passes the most "
            f"({chosen.trusted_passed}/{chosen.trusted_total})"
        )
    if not chosen.trusted_total:
        return f"{who} chosen by agreement alone: there is no trusted test"
    return f"{who} chosen"


def evidence_summary(state: HealState) -> str:
    """The one-line evidence the status rests on ("" before any selection)."""
    if state.evidence is not None:
        return state.evidence.summary
    if state.finished and state.attempts:
        from selfheal.result import HealResult

        return HealResult.from_state(state).evidence.summary
    return ""


def candidates_view(state: HealState, *, probes: int = 3) -> CandidatesView:
    """Every candidate with its origin, lineage, cluster, trusted tests and a few probe outputs;
    the clusters; the chosen one; and why (the evidence)."""
    shown = shown_probes(state, probes)
    chosen = chosen_id(state)
    known = {c.id for c in state.candidates}
    if chosen not in known:
        chosen = None  # a run from before the population
    rows = [candidate_row(state, c, shown, chosen=chosen) for c in state.candidates]
    if awaits_human(state) and state.pending is not None:
        rows += [
            candidate_row(state, c, shown, proposed=True)
            for c in state.pending.candidates
            if c.id not in known
        ]
    members: dict[int, list[CandidateRow]] = {}
    for r in rows:
        if r.cluster is not None and r.state == "passes trusted":
            members.setdefault(r.cluster, []).append(r)
    clusters = tuple(
        ClusterRow(
            index=k,
            members=tuple(r.id for r in members[k]),
            won=any(r.chosen for r in members[k]),
            outputs=members[k][0].outputs,
        )
        for k in sorted(members)
    )
    disputed = tuple(
        f"{t.id}: {t.quarantine_reason}"
        for t in state.tests
        if t.quarantined and t.quarantine_reason.startswith("disputed")
    )
    oracle = tuple(f"{call} -> {v or '(no usable answer)'}" for call, v in state.oracle.items())
    return CandidatesView(
        rows=tuple(rows),
        probes=tuple(p.call for p in shown),
        total_probes=len(state.probes),
        clusters=clusters,
        chosen=chosen,
        verdict=_verdict(state, rows, clusters),
        evidence=evidence_summary(state),
        disputed=disputed,
        oracle=oracle,
    )
