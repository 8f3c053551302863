"""The notebook view's model: pure functions from a ``HealState`` to rows (the timeline, the tests,
the code, the lessons, the approval panel; ``candidates`` and ``detail`` hold the rest)."""

from __future__ import annotations

from typing import Literal

from selfheal.diffs import unified_diff
from selfheal.records import Record
from selfheal.state import Event, HealState, TestCase
from selfheal.texts import remembered_lines

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
    remembered: tuple[str, ...] = ()
    """What the run recalled from the memory across runs, each saying where from: a lesson
    (``... (L3, remembered from run X)``) or a verified solution and the candidate it became."""


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
    yours: bool = False
    """Whether ``diff`` is the change to code you gave (``heal(code=...)``, ``%selfheal``)."""


def timeline_rows(state: HealState, *, live: bool = False) -> list[TimelineRow]:
    """One row per node run, in order. A node that started but has not ended is ``running``
    when ``live`` (the run is executing) and ``error`` otherwise (it was interrupted). A run
    waiting for a human gets a final ``waiting`` row; each human decision gets its own row."""
    return _rows(state.events, waiting=awaits_human(state), live=live)


def awaits_human(state: HealState) -> bool:
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


def first_line(t: TestCase, width: int = 80) -> str:
    """The test's first line past its imports (`` …`` when it has more), at most ``width``
    characters."""
    lines = [ln for ln in t.source.strip().splitlines() if ln.strip()]
    first = t.headline
    if len(lines) > 1 and t.origin != "example":  # an example's other lines are its imports
        first += " …"
    return first[:width]


def test_rows(state: HealState) -> list[TestRow]:
    """Every test with its origin, trust and outcome per executed attempt."""
    executed = [a for a in state.attempts if a.report is not None]
    per_attempt = [state.outcomes(a) for a in executed]
    return [
        TestRow(
            id=t.id,
            origin=t.origin,
            trust="quarantined" if t.quarantined else "trusted" if t.trusted else "untrusted",
            source=first_line(t),
            outcomes=tuple(str(o.get(t.id, "not run")) for o in per_attempt),
            quarantine_reason=t.quarantine_reason,
        )
        for t in state.tests
    ]


def code_view(state: HealState) -> CodeView:
    """The code to show: the pending proposal while one waits, else the final or latest code,
    with its diff against the attempt before it."""
    if awaits_human(state) and state.pending is not None:
        p = state.pending
        return CodeView(
            iteration=state.iteration + 1,
            code=p.code,
            diff=unified_diff(p.previous_code, p.code) if p.previous_code else "",
            label=f"proposed {'repair' if p.kind == 'repair' else 'first version'}",
        )
    if not state.attempts:
        return CodeView(iteration=0, code="", diff="", label="no code yet")
    cur = state.attempts[-1]
    if state.final_code is not None and state.finished:
        cur = next((a for a in state.attempts if a.code == state.final_code), cur)
    prev = state.attempt(cur.iteration - 1)
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
    return LessonsView(
        current=tuple(x.text for x in state.lessons),
        carried=carried,
        remembered=remembered_lines(state),
    )


def approval_view(state: HealState) -> ApprovalView | None:
    """The pending proposal, when the run waits for a human; else None."""
    if not awaits_human(state) or state.pending is None:
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
        diff=p.diff or (unified_diff(p.previous_code, p.code) if p.previous_code else ""),
        code=p.code,
        candidates=tuple(
            f"{c.id} {c.origin}" + (f" from {c.parent}" if c.parent else "") for c in p.candidates
        ),
        yours=state.given_code is not None and p.previous_code == state.given_code,
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
    if awaits_human(state):
        where = "waiting for your approval"
    elif running:
        where = f"running {running[-1].node}"
    elif live and not state.finished:
        where = "starting"
    else:
        where = state.status
    return (
        f"{name}: {where} · iteration {state.iteration}/{state.config.repairs.max_iterations} · "
        f"{state.usage.calls} model call(s) · {state.usage.total_tokens} tokens"
    )
