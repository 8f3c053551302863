"""What clicking a timeline row reveals: its model calls, and what the node produced (the
tests it added, the candidates it proposed, ran or ranked, the oracle's answers, the
diagnosis). Pure functions from a ``HealState``, like ``viewmodel``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from selfheal.agreement import canonical_literal
from selfheal.diffs import unified_diff
from selfheal.llm.base import Message
from selfheal.records import Record
from selfheal.state import Candidate, HealState
from selfheal.texts import remembered_lines
from selfheal.widgets.candidates import (
    CandidateRow,
    candidate_row,
    candidates_view,
    chosen_id,
    short,
)
from selfheal.widgets.viewmodel import (
    OUTCOME_ICONS,
    TimelineRow,
    first_line,
    timeline_rows,
)


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
    rows = rows if rows is not None else timeline_rows(state)
    about = row_candidates(state, rows).get(row.index, RowCandidates())
    if row.node in ("generate", "repair"):
        code = _detail_proposal(state, row, about, lines)
    elif row.node == "execute":
        code = _detail_execute(state, row, about, lines)
    elif row.node == "select":
        code = _detail_select(state, row, about, rows, lines)
    elif row.node == "consult":
        _detail_consult(state, row, lines)
    elif row.node == "diagnose":
        code = _detail_diagnose(state, it, lines)
    elif row.node in ("plan_tests", "adversarial", "critic"):
        origin = {"plan_tests": ("example",), "adversarial": ("adversarial",)}.get(
            row.node, ("critic",)
        )
        for t in state.tests:
            if t.origin in origin and t.added_at == it:
                lines.append(f"+ {t.id} ({t.origin}): {first_line(t)}")
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
    elif row.node == "recall":
        lines.extend(f"remembered: {x}" for x in remembered_lines(state))
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


def _detail_diagnose(state: HealState, iteration: int, lines: list[str]) -> str:
    """A diagnose row: the diagnosis, then the investigation's tool calls, each with what it
    cost; the code block holds every call with its whole observation."""
    shown: list[str] = []
    for d in (d for d in state.diagnoses if d.iteration == iteration):
        lines.append(
            f"diagnosis ({d.source}, {d.category}, blame {d.blame}, "
            f"{d.confidence:.0%}): {d.root_cause}"
        )
        if d.repair_strategy:
            lines.append(f"strategy: {d.repair_strategy}")
        if d.suspect_tests:
            lines.append("suspect tests: " + ", ".join(d.suspect_tests))
        for n, p in enumerate(d.probes, 1):
            call = p.code.splitlines()[0][:100] if p.code else p.tool
            first = p.observation.splitlines()[0][:160] if p.observation else ""
            lines.append(
                f"tool {n}: {call} -> {first} · {p.seconds:.2f}s in the sandbox · {p.prompt_tokens}"
                f"+{p.completion_tokens} tokens ({'native tool call' if p.native else 'structured reply'})"
            )
            head = f"# tool {n}: {p.tool}" + (f" — {p.thought}" if p.thought else "")
            shown += [head, *(f"#   {x}" for x in p.code.splitlines()), p.observation, ""]
    return "\n".join(shown).rstrip()


def _detail_proposal(
    state: HealState, row: TimelineRow, about: RowCandidates, lines: list[str]
) -> str:
    """A generate or repair row: the tests it added, the candidates it proposed."""
    if row.node == "generate":
        lines.extend(
            f"+ {t.id} ({t.origin}): {first_line(t)}"
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
    attempt = state.attempt(row.iteration + 1)
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
    seen = [f"{p.call} -> {short(c.behaviour[p.id])}" for p in state.probes if p.id in c.behaviour]
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
        attempt = state.attempt(row.iteration)
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
    rows: Sequence[TimelineRow],
    lines: list[str],
) -> str:
    """A select row: the candidates it ranked; for the latest selection, the clusters."""
    found = _by_id(state)
    text = " ".join(state.events[i].detail for i in row.events)
    picked = re.search(r"\bchose (c\d+)\b", text)
    pick = found.get(picked.group(1)) if picked else None
    latest = not any(r.node == "select" and r.index > row.index for r in rows)
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
                f"{c.id} ({short(c.behaviour.get(probe.id, '?'), 20)})"
                for c in ran
                if c.behaviour.get(probe.id) != want
            ]
            line += f" · agree: {', '.join(agree) or 'none'}"
            if other:
                line += f" · differ: {', '.join(other)}"
        lines.append(line)
