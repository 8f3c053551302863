"""The notebook view's model: pure functions from a ``HealState`` to rows.

Everything the live view shows is computed here, without ipywidgets, so it is testable
without a frontend and shared by the widget view and the text/markdown fallback.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Literal

from selfheal._record import Record
from selfheal.agreement import canonical_literal
from selfheal.llm.base import Message
from selfheal.state import Attempt, Candidate, Event, HealState, ProbeInput, TestCase

RowState = Literal["running", "done", "error", "waiting"]
"""``running``: the node is executing now; ``waiting``: the run waits for a human decision."""

Trust = Literal["trusted", "untrusted", "quarantined"]

ICONS: dict[str, str] = {
    "running": "▶",
    "done": "✓",
    "error": "✗",
    "waiting": "●",
    "passed": "✓",
    "failed": "✗",
    "timeout": "⏱",
    "crashed": "☠",
    "not run": "·",
}
"""Status and outcome icons (an ``error`` outcome shares the ✗ of a failed node)."""

OUTCOME_ICONS: dict[str, str] = {**ICONS, "error": "!"}
"""Icons for test outcomes (``error``: the test raised something other than AssertionError)."""


class TimelineRow(Record):
    """One node run (or one human decision) on the timeline."""

    index: int
    """Position on the timeline, from 0."""
    node: str
    """The node name (``plan_tests``, ``generate``, ...), or ``approval`` for a human decision."""
    state: RowState
    """Where the node stands."""
    icon: str
    """The status icon."""
    iteration: int
    """The iteration the node ran in."""
    duration: float = 0.0
    """Seconds (0 while running)."""
    tokens: int = 0
    """Prompt + completion tokens spent by the node."""
    model: str = ""
    """Model id(s) the node used."""
    detail: str = ""
    """A one-line summary."""
    events: tuple[int, ...] = ()
    """Indices into ``state.events`` of the events that belong to this row."""


class TestRow(Record):
    """One test and its outcome on every executed attempt."""

    __test__ = False

    id: str
    """The test id."""
    origin: str
    """Who wrote it (``example``, ``user``, ``spec_blind``, ``adversarial``, ``critic``)."""
    trust: Trust
    """Whether it can overturn code."""
    source: str
    """The test's first source line."""
    outcomes: tuple[str, ...]
    """Outcome per executed attempt, oldest first (``not run`` when it did not exist yet)."""
    quarantine_reason: str = ""
    """Why it was quarantined, if it was."""


class CodeView(Record):
    """The current candidate and its diff against the previous attempt."""

    iteration: int
    """The candidate's iteration (0: no code yet)."""
    code: str
    """The candidate source (the pending proposal while one waits)."""
    diff: str
    """Unified diff from the previous attempt (empty for the first)."""
    label: str
    """What the code is: ``attempt 2``, ``proposed repair``, ``final``..."""


class LessonsView(Record):
    """The rolling lessons."""

    current: tuple[str, ...]
    """The lessons the run holds now (at most five)."""
    carried: tuple[str, ...]
    """Lessons the run started with (written before its first attempt, e.g. given to a fork)."""


class ApprovalView(Record):
    """What the approval panel shows for a pending proposal."""

    kind: Literal["initial", "repair"]
    """First version or a repair."""
    iteration: int
    """The iteration the proposal would become."""
    diagnosis: str
    """The diagnosis the repair answers (empty for a first version)."""
    diff: str
    """The proposed change as a unified diff."""
    code: str
    """The proposed code (the editable area starts from it)."""
    candidates: tuple[str, ...] = ()
    """The round's candidates, ``c5 patch from c1``..., the one shown first: approving runs
    them all, an edit replaces the first."""


class RowDetail(Record):
    """What clicking a timeline row reveals."""

    title: str
    """Heading line."""
    lines: tuple[str, ...]
    """Plain-text body lines."""
    code: str = ""
    """Code or a diff shown in a monospace block."""
    calls: tuple[CallTranscript, ...] = ()
    """The row's model calls with their exact messages and raw replies (when kept)."""


class CallTranscript(Record):
    """One model call as the model saw it."""

    label: str
    """Role, prompt file and model, e.g. ``generator via generator.yaml v1 · local:...``."""
    messages: tuple[Message, ...]
    """The messages sent."""
    reply: str
    """The raw reply."""


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
    """The candidate it was patched from."""
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


# -- timeline ---------------------------------------------------------------------------------


def timeline_rows(state: HealState, *, live: bool = False) -> list[TimelineRow]:
    """One row per node run, in order. A node that started but has not ended is ``running``
    when ``live`` (the run is executing) and ``error`` otherwise (it was interrupted). A run
    waiting for a human gets a final ``waiting`` row; each human decision gets its own row."""
    return _rows(state.events, waiting=_waiting(state), live=live)


def _waiting(state: HealState) -> bool:
    return state.status == "awaiting_approval" and state.pending is not None


def _rows(events: tuple[Event, ...], *, waiting: bool, live: bool) -> list[TimelineRow]:
    # The log keeps a node's events (``llm``, ``info``...) followed by its ``end`` (or
    # ``error``); ``start`` events exist only live. A human decision sits between nodes.
    rows: list[TimelineRow] = []
    group: list[int] = []
    node: str | None = None

    def close(state: RowState, last: Event | None) -> None:
        nonlocal group, node
        members = [events[i] for i in group]
        llm = [e for e in members if e.kind == "llm"]
        ended = last is not None and last.kind == "end"
        tokens = (
            last.prompt_tokens + last.completion_tokens
            if last is not None and ended
            else sum(e.prompt_tokens + e.completion_tokens for e in llm)
        )
        model = (last.model if last is not None and ended else "") or ", ".join(
            sorted({e.model for e in llm if e.model})
        )
        details = [e.detail for e in members if e.detail and e.kind != "llm"]
        detail = (last.detail if last is not None else "") or (details[-1] if details else "")
        if state == "error" and last is None and not detail:
            detail = "interrupted"
        rows.append(
            TimelineRow(
                index=len(rows),
                node=(last.node if last is not None else node) or "?",
                state=state,
                icon=ICONS[state],
                iteration=(last if last is not None else members[-1]).iteration,
                duration=last.duration if last is not None else 0.0,
                tokens=tokens,
                model=model,
                detail=detail,
                events=tuple(group),
            )
        )
        group, node = [], None

    for i, e in enumerate(events):
        nxt = events[i + 1] if i + 1 < len(events) else None
        inside_node = nxt is not None and nxt.kind in ("end", "error") and nxt.node == e.node
        if e.kind == "decision" and not group and not inside_node:
            rows.append(
                TimelineRow(
                    index=len(rows),
                    node="approval",
                    state="done",
                    icon="◆",
                    iteration=e.iteration,
                    detail=e.detail,
                    events=(i,),
                )
            )
            continue
        if e.kind == "start":
            if group and node is not None and node != e.node:
                close("error", None)  # the previous node never ended
            node = e.node
        elif node is None:
            node = e.node
        group.append(i)
        if e.kind == "end":
            close("done", e)
        elif e.kind == "error":
            close("error", e)
    if group:
        close("running" if live else "error", None)
    if waiting:
        last = events[-1].iteration if events else 0
        rows.append(
            TimelineRow(
                index=len(rows),
                node="approval",
                state="waiting",
                icon=ICONS["waiting"],
                iteration=last,
                detail="waiting for your decision",
            )
        )
    return rows


_CANDIDATE_ID = re.compile(r"\bc\d+\b")
_RAN = re.compile(r"\bran (\d+) candidate")


class RowCandidates(Record):
    """Which candidates a timeline row is about (read from the run's own events)."""

    ids: tuple[str, ...] = ()
    """``generate`` / ``repair``: the candidates it proposed; ``execute``: the new candidates it
    ran; ``select``: every candidate that had run by then."""
    reran: int = 0
    """``execute``: earlier candidates it ran again (on tests or probes added since)."""
    replaced: bool = False
    """``generate`` / ``repair``: its proposal was rejected and a later one took its place."""


def _proposed_ids(state: HealState, row: TimelineRow, known: set[str]) -> list[str]:
    ids: list[str] = []
    for i in row.events:
        e = state.events[i]
        if e.kind == "info" and "candidate(s):" in e.detail:
            named = e.detail.split("candidate(s):", 1)[1]
            ids = [m for m in _CANDIDATE_ID.findall(named) if m in known]
    return ids


def row_candidates(state: HealState, rows: Sequence[TimelineRow]) -> dict[int, RowCandidates]:
    """Row index -> the candidates it is about, for ``generate``, ``repair``, ``execute`` and
    ``select`` rows. Read from the events the generator and the executor write ("2
    candidate(s): c1 greedy, c2 sample", "ran 2 candidate(s)"); a row whose events do not say
    is left out."""
    known = {c.id for c in state.candidates}
    if state.pending is not None:
        known |= {c.id for c in state.pending.candidates}
    proposed: dict[int, list[str]] = {}
    owner: dict[str, int] = {}
    for r in rows:
        if r.node in ("generate", "repair"):
            ids = _proposed_ids(state, r, known)
            proposed[r.index] = ids
            for cid in ids:
                owner[cid] = r.index  # a rejected proposal's ids are reused by the next one
    out: dict[int, RowCandidates] = {}
    waiting: list[str] = []
    ran: list[str] = []
    for r in rows:
        if r.index in proposed:
            ids = [cid for cid in proposed[r.index] if owner.get(cid) == r.index]
            out[r.index] = RowCandidates(
                ids=tuple(ids), replaced=bool(proposed[r.index]) and not ids
            )
            waiting += [cid for cid in ids if cid not in waiting]
        elif r.node == "execute":
            new = [cid for cid in waiting if cid not in ran]
            m = _RAN.search(" ".join(state.events[i].detail for i in r.events))
            count = int(m.group(1)) if m else len(new)
            out[r.index] = RowCandidates(ids=tuple(new), reran=max(0, count - len(new)))
            ran += new
            waiting = []
        elif r.node == "select" and ran:
            out[r.index] = RowCandidates(ids=tuple(ran))
    return out


def _candidate_line(row: CandidateRow, *, cluster: bool = True) -> str:
    head = f"{row.icon} {row.id} {row.origin}, round {row.round}" + (
        f" (from {row.parent})" if row.parent else ""
    )
    if row.state in ("proposed", "not run"):
        return f"{head}: {row.state}"
    if row.state == "no load":
        return f"{head}: does not load ({row.load_error[:100]})"
    text = (
        f"{head}: trusted {row.trusted_passed}/{row.trusted_total}, "
        f"tests {row.tests_passed}/{row.tests_total}"
    )
    if cluster and row.cluster is not None:
        text += f", cluster {row.cluster}"
    if row.failing:
        text += ", fails " + ", ".join(row.failing[:5]) + (" …" if len(row.failing) > 5 else "")
    return text + (" ◀ chosen" if row.chosen else "")


def _by_id(state: HealState) -> dict[str, Candidate]:
    found = {c.id: c for c in state.candidates}
    if state.pending is not None:
        for c in state.pending.candidates:
            found.setdefault(c.id, c)
    return found


def row_detail(
    state: HealState, row: TimelineRow, rows: Sequence[TimelineRow] | None = None
) -> RowDetail:
    """The detail of a timeline row: its model calls and what the node produced (``rows``:
    the timeline the row comes from, default ``timeline_rows(state)``)."""
    lines: list[str] = [
        f"iteration {row.iteration} · {row.duration:.2f}s · {row.tokens} tokens"
        + (f" · {row.model}" if row.model else "")
    ]
    for i in row.events:
        e = state.events[i]
        if e.kind == "llm":
            lines.append(
                f"model call: {e.model or '?'} · {e.prompt_tokens} prompt + "
                f"{e.completion_tokens} completion tokens · {e.duration:.2f}s · {e.detail}"
            )
        elif e.kind in ("info", "degraded", "error", "decision") and e.detail:
            lines.append(f"{e.kind}: {e.detail}")
    code = ""
    it = row.iteration
    about = RowCandidates()
    if row.node in ("generate", "repair", "execute", "select"):
        about = row_candidates(state, rows if rows is not None else timeline_rows(state)).get(
            row.index, RowCandidates()
        )
    if row.node in ("generate", "repair"):
        code = _detail_proposal(state, row, about, lines)
    elif row.node == "execute":
        code = _detail_execute(state, row, about, lines)
    elif row.node == "select":
        code = _detail_select(state, row, about, rows, lines)
    elif row.node == "consult":
        _detail_consult(state, row, lines)
    elif row.node == "diagnose":
        for d in state.diagnoses:
            if d.iteration == it:
                lines.append(
                    f"diagnosis ({d.source}, {d.category}, blame {d.blame}, "
                    f"{d.confidence:.0%}): {d.root_cause}"
                )
                if d.repair_strategy:
                    lines.append(f"strategy: {d.repair_strategy}")
                if d.suspect_tests:
                    lines.append("suspect tests: " + ", ".join(d.suspect_tests))
                for p in d.probes:
                    lines.append(f"probe: {p.code.splitlines()[0][:100]} -> {p.observation}")
    elif row.node in ("plan_tests", "adversarial", "critic"):
        origin = {"plan_tests": ("example",), "adversarial": ("adversarial",)}.get(
            row.node, ("critic",)
        )
        for t in state.tests:
            if t.origin in origin and t.added_at == it:
                lines.append(f"+ {t.id} ({t.origin}): {_first_line(t)}")
        if row.node == "plan_tests":
            lines.extend(
                f"+ probe {p.id} ({p.origin}): {p.call}"
                for p in state.probes
                if p.added_at == it and p.origin not in ("model_test", "critic")
            )
        if row.node == "critic":
            for rv in state.reviews:
                if rv.iteration == it:
                    lines.append(f"verdict: {rv.verdict}")
                    lines.extend(f"concern: {c}" for c in rv.concerns)
    elif row.node == "lessons":
        lines.extend(f"lesson: {x.text}" for x in state.lessons)
    elif row.node == "approval" and row.state == "waiting" and state.pending is not None:
        prop = state.pending
        code = unified_diff(prop.previous_code, prop.code) if prop.previous_code else prop.code
        if len(prop.candidates) > 1:
            lines.append(
                f"approving runs all {len(prop.candidates)} candidates of the round: "
                + ", ".join(f"{c.id} {c.origin}" for c in prop.candidates)
                + "; an edit replaces the first"
            )
    calls = tuple(
        CallTranscript(label=f"{e.detail} · {e.model or '?'}", messages=e.messages, reply=e.reply)
        for e in (state.events[i] for i in row.events)
        if e.kind == "llm" and (e.messages or e.reply)
    )
    return RowDetail(title=f"{row.icon} {row.node}", lines=tuple(lines), code=code, calls=calls)


def _detail_proposal(
    state: HealState, row: TimelineRow, about: RowCandidates, lines: list[str]
) -> str:
    """A generate or repair row: the tests it added, the candidates it proposed."""
    if row.node == "generate":
        lines.extend(
            f"+ {t.id} ({t.origin}): {_first_line(t)}"
            for t in state.tests
            if t.origin == "spec_blind" and t.added_at == row.iteration
        )
    if about.replaced:
        lines.append("this proposal was not accepted; a later one took its place")
    found = _by_id(state)
    cands = [found[cid] for cid in about.ids if cid in found]
    for c in cands:
        lines.append(
            f"proposed {c.id}: {c.origin}, round {c.round}, temperature {c.temperature:g}"
            + (f", from {c.parent}" if c.parent else "")
        )
    if cands:
        if cands[0].rationale:
            lines.append(f"rationale ({cands[0].id}): {cands[0].rationale}")
        return cands[0].code
    if about.replaced:
        return ""
    # a run from before the population (no candidate named): the attempt it became
    attempt = _attempt(state, row.iteration + 1)
    if attempt is not None:
        if attempt.rationale:
            lines.append(f"rationale: {attempt.rationale}")
        return attempt.code
    return state.pending.code if state.pending is not None else ""


def _report_lines(state: HealState, c: Candidate, *, probes: int = 6) -> list[str]:
    """A candidate's run: one line per test, then what it returned on the first probes."""
    rep = c.report
    if rep is None:
        return []
    if not rep.load.ok:
        return [f"load failed: {rep.load.exc_type}: {rep.load.message}"]
    probe_ids = {p.id for p in state.probes}
    out = []
    for r in rep.results:
        if r.test_id in probe_ids:
            continue
        msg = f" {r.exc_type}: {r.message}" if r.exc_type else ""
        out.append(f"{OUTCOME_ICONS.get(r.outcome, '?')} {r.test_id} {r.outcome}{msg}")
    seen = [f"{p.call} -> {_short(c.behaviour[p.id])}" for p in state.probes if p.id in c.behaviour]
    if seen:
        more = f" (+{len(seen) - probes} more)" if len(seen) > probes else ""
        out.append("probe outputs: " + "; ".join(seen[:probes]) + more)
    return out


def _detail_execute(
    state: HealState, row: TimelineRow, about: RowCandidates, lines: list[str]
) -> str:
    """An execute row: every candidate it ran, then the lead one's run test by test."""
    found = _by_id(state)
    cands = [found[cid] for cid in about.ids if cid in found]
    if not cands:  # a run from before the population: the attempt's report
        attempt = _attempt(state, row.iteration)
        if attempt is None or attempt.report is None:
            return ""
        c = Candidate(id="c0", code=attempt.code, origin="greedy", round=row.iteration)
        lines.extend(_report_lines(state, c.model_copy(update={"report": attempt.report})))
        return attempt.code
    chosen = chosen_id(state)
    probes = [p for p in state.probes if p.added_at == row.iteration and p.origin == "model_test"]
    if probes and any("probe input" in state.events[i].detail for i in row.events):
        lines.append(
            "new probe inputs from the model-written tests: "
            + ", ".join(f"{p.id} {p.call}" for p in probes)[:300]
        )
    lines.append(f"ran {len(cands)} new candidate(s) on every test and probe:")
    lines.extend("  " + _candidate_line(candidate_row(state, c, chosen=chosen)) for c in cands)
    if about.reran:
        lines.append(f"ran {about.reran} earlier candidate(s) again on new tests or probes")
    round_pick = next(
        (a.candidate for a in state.attempts if a.iteration == row.iteration and a.candidate),
        None,
    )
    lead = next((c for c in cands if c.id == round_pick), cands[0])
    lines.append(f"test by test, {lead.id}:")
    lines.extend(_report_lines(state, lead))
    return lead.code


def _detail_select(
    state: HealState,
    row: TimelineRow,
    about: RowCandidates,
    rows: Sequence[TimelineRow] | None,
    lines: list[str],
) -> str:
    """A select row: the candidates it ranked; for the latest selection, the clusters."""
    found = _by_id(state)
    text = " ".join(state.events[i].detail for i in row.events)
    picked = re.search(r"\bchose (c\d+)\b", text)
    pick = found.get(picked.group(1)) if picked else None
    all_rows = rows if rows is not None else timeline_rows(state)
    latest = not any(r.node == "select" and r.index > row.index for r in all_rows)
    if latest:
        view = candidates_view(state)
        lines.append(f"ranked {len(about.ids) or len(view.rows)} candidate(s)")
        lines.append(view.verdict)
        for k in view.clusters:
            out = "; ".join(
                f"{call} -> {v}" for call, v in zip(view.probes, k.outputs, strict=False) if v
            )
            lines.append(
                f"cluster {k.index}{' (won)' if k.won else ''}: {', '.join(k.members)}"
                + (f" · {out}" if out else "")
            )
        failing = [r.id for r in view.rows if r.state in ("fails trusted", "no load")]
        if failing:
            lines.append("fail a trusted test or do not load: " + ", ".join(failing))
        lines.extend(f"disputed {d}" for d in view.disputed)
    else:
        chosen = pick.id if pick else None
        lines.append(f"ranked {len(about.ids)} candidate(s):")
        lines.extend(
            "  " + _candidate_line(candidate_row(state, found[cid], chosen=chosen), cluster=False)
            for cid in about.ids
            if cid in found
        )
    return pick.code if pick is not None else ""


def _detail_consult(state: HealState, row: TimelineRow, lines: list[str]) -> None:
    """A consult row: each answer of the spec oracle, and which candidates return it."""
    text = " ".join(state.events[i].detail for i in row.events)
    by_call = {p.call: p for p in state.probes}
    ran = [c for c in state.candidates if c.report is not None and c.report.load.ok]
    for call, answer in state.oracle.items():
        if f"{call} ->" not in text and not (not answer and call in text):
            continue
        if not answer:
            lines.append(f"oracle: {call} -> (no usable answer)")
            continue
        want = canonical_literal(answer)
        line = f"oracle: {call} -> {answer}"
        probe = by_call.get(call)
        if probe is not None and want is not None:
            agree = [c.id for c in ran if c.behaviour.get(probe.id) == want]
            other = [
                f"{c.id} ({_short(c.behaviour.get(probe.id, '?'), 20)})"
                for c in ran
                if c.behaviour.get(probe.id) != want
            ]
            line += f" · agree: {', '.join(agree) or 'none'}"
            if other:
                line += f" · differ: {', '.join(other)}"
        lines.append(line)


def _attempt(state: HealState, iteration: int) -> Attempt | None:
    for a in state.attempts:
        if a.iteration == iteration:
            return a
    return None


# -- tests ------------------------------------------------------------------------------------


def trust_of(t: TestCase) -> Trust:
    if t.quarantined:
        return "quarantined"
    return "trusted" if t.trusted else "untrusted"


def _first_line(t: TestCase, width: int = 80) -> str:
    lines = [ln for ln in t.source.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if len(lines) > 1:
        first += " …"
    return first[:width]


def executed_iterations(state: HealState) -> list[int]:
    """Iterations whose attempt has an execution report, in order."""
    return [a.iteration for a in state.attempts if a.report is not None]


def test_rows(state: HealState) -> list[TestRow]:
    """Every test with its origin, trust and outcome per executed attempt."""
    executed = [a for a in state.attempts if a.report is not None]
    per_attempt = [state.outcomes(a) for a in executed]
    return [
        TestRow(
            id=t.id,
            origin=t.origin,
            trust=trust_of(t),
            source=_first_line(t),
            outcomes=tuple(str(o.get(t.id, "not run")) for o in per_attempt),
            quarantine_reason=t.quarantine_reason,
        )
        for t in state.tests
    ]


# -- the population ---------------------------------------------------------------------------


def chosen_id(state: HealState) -> str | None:
    """The candidate the latest selection chose (the latest attempt's)."""
    for a in reversed(state.attempts):
        if a.candidate:
            return a.candidate
    return None


def _outcomes_of(c: Candidate) -> dict[str, str]:
    return {r.test_id: r.outcome for r in c.report.results} if c.report is not None else {}


def _short(value: str, width: int = 28) -> str:
    value = " ".join(value.split())
    return value if len(value) <= width else value[: width - 1] + "…"


def shown_probes(state: HealState, limit: int = 3) -> list[ProbeInput]:
    """The probes worth a column: those the oracle was asked about, then those on which the
    run candidates disagree, then the first others; at most ``limit``."""
    ran = [c for c in state.candidates if c.report is not None and c.report.load.ok]
    asked = [p for p in state.probes if p.call in state.oracle]
    split = [p for p in state.probes if len({c.behaviour.get(p.id) for c in ran}) > 1]
    out: list[ProbeInput] = []
    for p in [*asked, *split, *state.probes]:
        if p not in out:
            out.append(p)
    return out[:limit]


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
        parent=c.parent,
        temperature=c.temperature,
        state="proposed" if proposed else "not run",
        icon=CANDIDATE_ICONS["proposed" if proposed else "not run"],
        trusted_total=len(trusted),
        tests_total=len(active),
        code=c.code,
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
    out = _outcomes_of(c)
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
            "outputs": tuple(_short(c.behaviour.get(p.id, "")) for p in probes),
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
    if chosen not in {c.id for c in state.candidates}:
        chosen = None  # a run from before the population
    rows = [candidate_row(state, c, shown, chosen=chosen) for c in state.candidates]
    if _waiting(state) and state.pending is not None:
        known = {c.id for c in state.candidates}
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


# -- code, lessons, approval ------------------------------------------------------------------


def _lines(src: str) -> list[str]:
    if not src:
        return []
    return (src if src.endswith("\n") else src + "\n").splitlines(keepends=True)


def unified_diff(before: str, after: str, *, a: str = "before.py", b: str = "after.py") -> str:
    """A unified diff of two sources (empty when they are equal)."""
    return "".join(difflib.unified_diff(_lines(before), _lines(after), fromfile=a, tofile=b))


def code_view(state: HealState) -> CodeView:
    """The code to show: the pending proposal while one waits, else the final or latest code,
    with its diff against the attempt before it."""
    if _waiting(state) and state.pending is not None:
        p = state.pending
        diff = unified_diff(p.previous_code, p.code) if p.previous_code else p.diff
        return CodeView(
            iteration=state.iteration + 1,
            code=p.code,
            diff=diff if p.previous_code else "",
            label=f"proposed {'repair' if p.kind == 'repair' else 'first version'}",
        )
    if not state.attempts:
        return CodeView(iteration=0, code="", diff="", label="no code yet")
    cur = state.attempts[-1]
    if state.final_code is not None and state.finished:
        for a in state.attempts:
            if a.code == state.final_code:
                cur = a
                break
    prev = _attempt(state, cur.iteration - 1)
    diff = (
        unified_diff(
            prev.code, cur.code, a=f"attempt{prev.iteration}.py", b=f"attempt{cur.iteration}.py"
        )
        if prev is not None
        else ""
    )
    label = f"attempt {cur.iteration}" + (" (final)" if state.finished else "")
    return CodeView(iteration=cur.iteration, code=cur.code, diff=diff, label=label)


def lessons_view(state: HealState) -> LessonsView:
    """The rolling lessons, and those the run started with: written at iteration 0, or given
    to a fork (``Run.fork(lessons=...)``) at its starting iteration."""
    start = 0
    if state.parent is not None and "lessons" in state.parent.changes:
        start = state.parent.at_iteration
    carried = tuple(x.text for x in state.lessons if x.iteration <= start)
    return LessonsView(current=tuple(x.text for x in state.lessons), carried=carried)


def approval_view(state: HealState) -> ApprovalView | None:
    """The pending proposal, when the run waits for a human; else None."""
    if not _waiting(state) or state.pending is None:
        return None
    p = state.pending
    d = p.diagnosis
    diagnosis = ""
    if d is not None:
        diagnosis = f"{d.root_cause}" + (
            f"\nStrategy: {d.repair_strategy}" if d.repair_strategy else ""
        )
    return ApprovalView(
        kind=p.kind,
        iteration=state.iteration + 1,
        diagnosis=diagnosis,
        diff=unified_diff(p.previous_code, p.code) if p.previous_code else p.diff,
        code=p.code,
        candidates=tuple(
            f"{c.id} {c.origin}" + (f" from {c.parent}" if c.parent else "") for c in p.candidates
        ),
    )


def approval_note(av: ApprovalView) -> str:
    """What approving a round of several candidates does ("" for a single one)."""
    if len(av.candidates) < 2:
        return ""
    first = av.candidates[0].split()[0]
    return (
        f"The round proposes {len(av.candidates)} candidates ({', '.join(av.candidates)}); the "
        f"code shown is {first}. Approving runs them all; an edit replaces {first}."
    )


def summary_line(state: HealState, *, live: bool = False) -> str:
    """``median: running generate (iteration 1) · 3 model calls · 640 tokens``."""
    name = state.spec.entry_point or "?"
    rows = timeline_rows(state, live=live)
    running = [r for r in rows if r.state == "running"]
    if _waiting(state):
        where = "waiting for your approval"
    elif running:
        where = f"running {running[-1].node}"
    elif state.finished:
        where = state.status
    elif live:
        where = "starting"
    else:
        where = state.status
    return (
        f"{name}: {where} · iteration {state.iteration}/{state.config.max_iterations} · "
        f"{state.usage.calls} model call(s) · {state.usage.total_tokens} tokens"
    )
