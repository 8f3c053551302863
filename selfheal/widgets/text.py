"""The view without a widget frontend: the same panels as plain text and markdown (plain
IPython, nbconvert/nbclient outputs, terminals, and the live view's text parts)."""

from __future__ import annotations

from selfheal.state import HealState
from selfheal.texts import cut
from selfheal.widgets.candidates import CandidatesView, candidates_view, evidence_summary
from selfheal.widgets.viewmodel import (
    OUTCOME_ICONS,
    approval_note,
    approval_view,
    code_view,
    lessons_view,
    summary_line,
    test_rows,
    timeline_rows,
)


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def candidates_text(cv: CandidatesView) -> list[str]:
    """The population panel as text lines (empty before the first candidate)."""
    if not cv.rows:
        return []
    cols = " | ".join(cv.probes)
    out = [
        f"Candidates ({len(cv.rows)}; ▶ chosen"
        + (f"; returns on {cols}" if cols else "")
        + f"; {cv.total_probes} probe input(s) in all):"
    ]
    for r in cv.rows:
        mark = "▶" if r.chosen else " "
        trusted = f"trusted {r.trusted_passed}/{r.trusted_total}"
        what: str
        if r.state in ("proposed", "not run"):
            what = r.state
        elif r.state == "no load":
            what = f"does not load ({r.load_error[:60]})"
        else:
            cluster = "-" if r.cluster is None else str(r.cluster)
            what = f"{trusted:<12} cluster {cluster:<2} " + " | ".join(x or "·" for x in r.outputs)
        out.append(
            f"  {mark} {r.icon} {r.id:<4} {r.origin:<10} round {r.round} "
            f"{f'from {r.parent}' if r.parent else '':<8} {what}".rstrip()
        )
    out.append(f"  {cv.verdict}")
    out += [f"  disputed {d}" for d in cv.disputed]
    out += [f"  spec oracle: {o}" for o in cv.oracle]
    return out


def render_text(state: HealState, *, live: bool = False) -> str:
    """Every panel as plain text (a terminal, ``print(view)``)."""
    out = ["selfheal · " + summary_line(state, live=live)]
    evidence = evidence_summary(state)
    if state.finished and evidence:
        out.append("Evidence: " + evidence)
    out += ["", "Timeline:"]
    for r in timeline_rows(state, live=live):
        model = f" [{r.model}]" if r.model else ""
        out.append(
            f"  {r.icon} {r.node:<11} it{r.iteration} {r.duration:6.2f}s {r.tokens:6d} tok"
            f"{model}  {cut(r.detail, 100)}"
        )
    population = candidates_text(candidates_view(state))
    if population:
        out += ["", *population]
    rows = test_rows(state)
    if rows:
        out += ["", "Tests (outcome per attempt):"]
        for t in rows:
            marks = " ".join(OUTCOME_ICONS.get(o, "?") for o in t.outcomes) or "-"
            out.append(f"  {t.id:<6} {t.origin:<11} {t.trust:<11} {marks:<12} {t.source[:70]}")
    cv = code_view(state)
    if cv.code:
        out += ["", f"Code ({cv.label}):", cv.code.rstrip()]
        if cv.diff:
            out += ["", "Diff against the previous attempt:", cv.diff.rstrip()]
    lv = lessons_view(state)
    if lv.current:
        out += ["", "Lessons:"] + [f"  - {x}" for x in lv.current]
    if lv.carried:
        out += ["Carried in from earlier:"] + [f"  - {x}" for x in lv.carried]
    if lv.remembered:
        out += ["", "Remembered from earlier runs:"] + [f"  - {x}" for x in lv.remembered]
    av = approval_view(state)
    if av is not None:
        out += ["", f"Approval needed ({av.kind}, would be attempt {av.iteration}):"]
        if av.diagnosis:
            out.append("  Diagnosis: " + av.diagnosis.replace("\n", "\n  "))
        if approval_note(av):
            out.append("  " + approval_note(av))
        out.append(
            "  Answer with: handle.approve() / handle.edit(code) / handle.reject(reason), "
            "or selfheal.resume(result, Approve())."
        )
    if state.error:
        out += ["", f"Error: {state.error}"]
    return "\n".join(out)


def render_markdown(state: HealState, *, live: bool = False) -> str:
    """Every panel as markdown (nbconvert, nbclient, frontends without widgets)."""
    out = [f"**selfheal** · {summary_line(state, live=live)}", ""]
    evidence = evidence_summary(state)
    if state.finished and evidence:
        out += [f"**Evidence:** {_md_cell(evidence)}", ""]
    out += ["| | node | it | time | tokens | model | detail |", "|---|---|---|---|---|---|---|"]
    for r in timeline_rows(state, live=live):
        out.append(
            f"| {r.icon} | {r.node} | {r.iteration} | {r.duration:.2f}s | {r.tokens} | "
            f"{_md_cell(r.model)} | {_md_cell(cut(r.detail, 120))} |"
        )
    pop = candidates_view(state)
    if pop.rows:
        probe_heads = "".join(f" `{_md_cell(p)}` |" for p in pop.probes)
        out += [
            "",
            f"| | candidate | origin | round | from | trusted | cluster |{probe_heads}",
            "|---|---|---|---|---|---|---|" + "---|" * len(pop.probes),
        ]
        for c in pop.rows:
            cells = "".join(f" {_md_cell(x) or '·'} |" for x in c.outputs) + " |" * (
                len(pop.probes) - len(c.outputs)
            )
            trusted = (
                c.state
                if c.state in ("proposed", "not run", "no load")
                else f"{c.trusted_passed}/{c.trusted_total}"
            )
            name = f"**{c.id}** ▶" if c.chosen else c.id
            cluster = "" if c.cluster is None else str(c.cluster)
            out.append(
                f"| {c.icon} | {name} | {c.origin} | {c.round} | {c.parent or ''} | {trusted} | "
                f"{cluster} |{cells}"
            )
        out += ["", _md_cell(pop.verdict) + "."]
    rows = test_rows(state)
    if rows:
        out += ["", "| test | origin | trust | outcomes | source |", "|---|---|---|---|---|"]
        for t in rows:
            marks = " ".join(OUTCOME_ICONS.get(o, "?") for o in t.outcomes) or "-"
            out.append(
                f"| {t.id} | {t.origin} | {t.trust} | {marks} | `{_md_cell(t.source[:70])}` |"
            )
    cv = code_view(state)
    if cv.code:
        out += ["", f"Code ({cv.label}):", "", "```python", cv.code.rstrip(), "```"]
        if cv.diff:
            out += ["", "```diff", cv.diff.rstrip(), "```"]
    lv = lessons_view(state)
    if lv.current:
        out += ["", "Lessons:"] + [f"- {x}" for x in lv.current]
    if lv.remembered:
        out += ["", "Remembered from earlier runs:"] + [f"- {_md_cell(x)}" for x in lv.remembered]
    av = approval_view(state)
    if av is not None:
        out += ["", f"**Approval needed** ({av.kind}):"]
        if av.diagnosis:
            out += ["", f"> {_md_cell(av.diagnosis)}"]
        if approval_note(av):
            out += ["", approval_note(av)]
    if state.error:
        out += ["", f"Error: `{_md_cell(state.error[:300])}`"]
    return "\n".join(out)
