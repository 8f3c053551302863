"""The view without a widget frontend: the same panels as plain text and markdown.

Used by plain IPython, nbconvert/nbclient outputs, terminals and as the ``text/plain`` and
``text/markdown`` parts of the live view's output.
"""

from __future__ import annotations

from selfheal.state import HealState
from selfheal.widgets.model import (
    OUTCOME_ICONS,
    approval_view,
    code_view,
    lessons_view,
    summary_line,
    test_rows,
    timeline_rows,
)


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_text(state: HealState, *, live: bool = False) -> str:
    """Every panel as plain text (a terminal, ``print(view)``)."""
    out = ["selfheal · " + summary_line(state, live=live), "", "Timeline:"]
    for r in timeline_rows(state, live=live):
        model = f" [{r.model}]" if r.model else ""
        out.append(
            f"  {r.icon} {r.node:<11} it{r.iteration} {r.duration:6.2f}s {r.tokens:6d} tok"
            f"{model}  {r.detail[:100]}"
        )
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
    av = approval_view(state)
    if av is not None:
        out += ["", f"Approval needed ({av.kind}, would be attempt {av.iteration}):"]
        if av.diagnosis:
            out.append("  Diagnosis: " + av.diagnosis.replace("\n", "\n  "))
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
    out += ["| | node | it | time | tokens | model | detail |", "|---|---|---|---|---|---|---|"]
    for r in timeline_rows(state, live=live):
        out.append(
            f"| {r.icon} | {r.node} | {r.iteration} | {r.duration:.2f}s | {r.tokens} | "
            f"{_md_cell(r.model)} | {_md_cell(r.detail[:120])} |"
        )
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
    av = approval_view(state)
    if av is not None:
        out += ["", f"**Approval needed** ({av.kind}):"]
        if av.diagnosis:
            out += ["", f"> {_md_cell(av.diagnosis)}"]
    if state.error:
        out += ["", f"Error: `{_md_cell(state.error[:300])}`"]
    return "\n".join(out)
