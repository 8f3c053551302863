"""``HealView``: the live notebook view of a heal run, built from ipywidgets.

It only turns the rows of ``viewmodel`` (rendered by ``fragments``) into widgets and wires the
approval buttons to a ``FutureApprover``. Events may arrive from a worker thread; they are handed to the kernel's
event loop when one is attached, so widget updates happen on the loop's thread."""

from __future__ import annotations

import asyncio
import html
import threading
import time
from collections.abc import Callable
from typing import Any, get_args

import ipywidgets as w

from selfheal.approval import Approve, Edit, Reject
from selfheal.progress import TokenMeter, progress_only
from selfheal.state import Decision, Event, HealState
from selfheal.widgets.approver import FutureApprover
from selfheal.widgets.asker import FutureAsker, QuestionPanel
from selfheal.widgets.candidates import candidates_view, evidence_summary
from selfheal.widgets.detail import row_detail
from selfheal.widgets.fragments import (
    CSS,
    candidates_html,
    diff_html,
    pre,
    row_label,
    transcript_html,
)
from selfheal.widgets.text import render_markdown, render_text
from selfheal.widgets.viewmodel import (
    OUTCOME_ICONS,
    RowState,
    TimelineRow,
    approval_note,
    approval_view,
    code_view,
    lessons_view,
    summary_line,
    test_rows,
    timeline_rows,
)

StateGetter = Callable[[], HealState]


class HealView(w.VBox):  # type: ignore[misc]
    """Timeline, Candidates, Tests, Code and Lessons tabs, plus an approval panel while a
    proposal waits.

    ``HealView(state)`` shows a finished state; a live run feeds it with ``on_event`` (the
    run's event sink) and ``refresh()``; ``bind(approver)`` wires the buttons."""

    def __init__(
        self, state: HealState, *, state_getter: StateGetter | None = None, live: bool = False
    ) -> None:
        self._state = state
        self._getter = state_getter
        self._live_events: list[Event] = []
        self.live = live
        self._approver: FutureApprover | None = None
        self.question_panel: QuestionPanel | None = None
        """The panel of the run's questions (``bind_asker``)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._rows: list[TimelineRow] = []
        self._selected: int | None = None
        self._lock = threading.RLock()
        self.meter = TokenMeter()
        """Tokens and seconds of the node in flight, for the header."""
        self.on_token = progress_only(self.meter.on_token)
        """The run's token sink (it counts; it shows no text)."""
        self._ticker: threading.Thread | None = None
        self.display_handle: Any = None
        """The output it was displayed in (``display(view, display_id=True)``): ``finish``
        replaces that output's text and markdown, what a notebook saved without its widget
        state shows, by the finished run's."""

        self.header = w.HTML().add_class("selfheal-header")
        self.timeline_box = w.VBox(layout=w.Layout(width="100%")).add_class("selfheal-timeline")
        self.detail = w.HTML().add_class("selfheal-detail")
        self.candidates_html = w.HTML().add_class("selfheal-candidates")
        self.tests_html = w.HTML().add_class("selfheal-tests")
        # "copy as pytest": the tests behind the result as a pytest file, to copy or save
        self.pytest_button = w.Button(description="Copy as pytest", icon="copy")
        self.pytest_button.add_class("selfheal-copy-pytest")
        self.pytest_area = w.Textarea(layout=w.Layout(width="100%", height="220px", display="none"))
        self.pytest_area.add_class("selfheal-pytest-file")
        self.pytest_path = w.Text(placeholder="test_....py", layout=w.Layout(width="40%"))
        self.save_button = w.Button(description="Save", icon="save")
        self.save_note = w.HTML()
        self.pytest_button.on_click(lambda _b: self.show_pytest())
        self.save_button.on_click(lambda _b: self.save_pytest())
        self.code_html = w.HTML().add_class("selfheal-code")
        self.lessons_html = w.HTML().add_class("selfheal-lessons")
        self.tabs = w.Tab(
            children=[
                w.VBox([self.timeline_box, self.detail]),
                self.candidates_html,
                w.VBox(
                    [
                        self.tests_html,
                        w.HBox(
                            [self.pytest_button, self.pytest_path, self.save_button, self.save_note]
                        ),
                        self.pytest_area,
                    ]
                ),
                self.code_html,
                self.lessons_html,
            ]
        )
        for i, title in enumerate(("Timeline", "Candidates", "Tests", "Code", "Lessons")):
            self.tabs.set_title(i, title)

        # approval panel
        self.diagnosis_html = w.HTML()
        self.round_html = w.HTML()
        self.diff_html = w.HTML()
        self.edit_area = w.Textarea(
            layout=w.Layout(width="100%", height="180px"), placeholder="edit the code here"
        )
        self.edit_area.add_class("selfheal-edit")
        self.reason = w.Text(placeholder="reason (for Reject)", layout=w.Layout(width="60%"))
        self.reason.add_class("selfheal-reason")
        self.approve_button = w.Button(description="Approve", button_style="success", icon="check")
        self.approve_button.add_class("selfheal-approve")
        self.edit_button = w.Button(description="Run my edit", button_style="warning", icon="edit")
        self.edit_button.add_class("selfheal-edit-button")
        self.reject_button = w.Button(description="Reject", button_style="danger", icon="times")
        self.reject_button.add_class("selfheal-reject")
        self.approve_button.on_click(lambda _b: self._decide(Approve()))
        self.edit_button.on_click(lambda _b: self._decide(Edit(self.edit_area.value)))
        self.reject_button.on_click(lambda _b: self._decide(Reject(self.reason.value)))
        self.approval_panel = w.VBox(
            [
                w.HTML("<b>Approval needed</b>"),
                self.diagnosis_html,
                self.round_html,
                self.diff_html,
                w.Accordion(children=[self.edit_area], titles=("Edit the proposed code",)),
                w.HBox([self.approve_button, self.edit_button, self.reject_button, self.reason]),
            ],
            layout=w.Layout(display="none", border="1px solid #7aa0e0", padding="6px"),
        )
        self.approval_panel.add_class("selfheal-approval")
        super().__init__([w.HTML(CSS), self.header, self.approval_panel, self.tabs])
        self.add_class("selfheal-view")
        self._render()

    def show_pytest(self) -> str:
        """Show the tests behind the shown state as a pytest file (selected, to copy)."""
        from selfheal.result import HealResult

        text = HealResult.from_state(self._state).tests_file()
        self.pytest_area.value = text
        self.pytest_area.layout.display = ""
        if not self.pytest_path.value:
            self.pytest_path.value = f"test_{self._state.spec.entry_point or 'healed'}.py"
        return text

    def save_pytest(self) -> None:
        """Write the pytest file to the path in the box (relative to the notebook's folder)."""
        from pathlib import Path

        text = self.show_pytest()
        path = Path(self.pytest_path.value).expanduser()
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as e:
            self.save_note.value = f"<span>could not write {html.escape(str(path))}: {e}</span>"
            return
        self.save_note.value = f"<span>saved to {html.escape(str(path.resolve()))}</span>"

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand events that arrive on other threads to ``loop`` (the kernel's)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def bind(self, approver: FutureApprover) -> None:
        """Let the buttons answer ``approver``'s proposals, and show the panel when one comes."""
        self._approver = approver
        approver.on_proposal(lambda _proposal, state: self.refresh(state))

    def bind_asker(self, asker: FutureAsker) -> QuestionPanel:
        """Show ``asker``'s questions in a panel under the header; one click answers."""
        self.question_panel = QuestionPanel(asker)
        asker.on_question(lambda _question, state: self.refresh(state))
        kids: list[Any] = list(self.children)  # type: ignore[has-type]
        kids.insert(kids.index(self.approval_panel) + 1, self.question_panel.box)
        self.children = tuple(kids)
        return self.question_panel

    def _decide(self, decision: Decision) -> None:
        if self._approver is None or not self._approver.waiting:
            return
        self._approver.decide(decision)
        self.approval_panel.layout.display = "none"
        self.header.value = (
            f"<b>selfheal</b> · {html.escape(decision.kind)} sent; resuming the run…"
        )

    def on_event(self, event: Event) -> None:
        """The run's event sink. Safe to call from any thread."""
        if (
            self._loop is not None
            and threading.get_ident() != self._loop_thread
            and self._loop.is_running()
        ):
            self._loop.call_soon_threadsafe(self._handle_event, event)
        else:
            self._handle_event(event)

    def _tick(self) -> None:
        """While the run is live, the header's in-flight part once a second."""
        while self.live and not self._state.finished:
            time.sleep(1.0)
            with self._lock:
                self.header.value = self._header(self.display_state())

    def _handle_event(self, event: Event) -> None:
        self.meter.on_event(event)
        if self._ticker is None and self.live:
            self._ticker = threading.Thread(target=self._tick, name="selfheal-view", daemon=True)
            self._ticker.start()
        with self._lock:
            self._live_events.append(event)
            if self._getter is not None:
                self._state = self._getter()
            self._render()

    def refresh(self, state: HealState | None = None, *, live: bool | None = None) -> None:
        """Redraw from ``state`` (default: the state getter's)."""
        with self._lock:
            if live is not None:
                self.live = live
            if state is not None:
                self._state = state
            elif self._getter is not None:
                self._state = self._getter()
            self._render()

    def finish(self, state: HealState) -> None:
        """Redraw with the finished run, and update the output it was displayed in."""
        self.refresh(state, live=False)
        if self.display_handle is not None:
            self.display_handle.update(self)

    def display_state(self) -> HealState:
        """The state shown: the last known state plus live events not yet checkpointed."""
        state = self._state
        known = set(state.events)
        last_known = max((i for i, e in enumerate(self._live_events) if e in known), default=-1)
        self._live_events = [e for e in self._live_events[last_known + 1 :] if e not in known]
        if not self._live_events:
            return state
        return state.model_copy(update={"events": state.events + tuple(self._live_events)})

    def _header(self, state: HealState) -> str:
        live = self.live and not state.finished
        header = "<b>selfheal</b> · " + html.escape(summary_line(state, live=live))
        flight = self.meter.now() if live else None
        if flight is not None:
            header += f' · <span class="selfheal-flight">{html.escape(flight.text())}</span>'
        if self.question_panel is not None and self.question_panel.asker.offered:
            header += ' · <span class="selfheal-asking">waiting for your answer</span>'
        evidence = evidence_summary(state)
        if state.finished and evidence:
            header += (
                f'<br><span class="selfheal-evidence">Evidence: {html.escape(evidence)}</span>'
            )
        return header

    def _render(self) -> None:
        state = self.display_state()
        live = self.live and not state.finished
        self.header.value = self._header(state)
        self._render_timeline(state, live)
        self.candidates_html.value = candidates_html(candidates_view(state))
        self._render_tests(state)
        cv = code_view(state)
        code_html = f"<b>{html.escape(cv.label)}</b>" + pre(cv.code or "(no code yet)")
        if cv.diff:
            code_html += "<b>diff against the previous attempt</b>" + diff_html(cv.diff)
        self.code_html.value = code_html
        lv = lessons_view(state)
        parts = [] if lv.current else ["<b>Rolling lessons</b><p>(none yet)</p>"]
        for title, items in (
            ("Rolling lessons", lv.current),
            ("Carried in from earlier", lv.carried),
            ("Remembered from earlier runs", lv.remembered),
        ):
            if items:
                listed = "".join(f"<li>{html.escape(x)}</li>" for x in items)
                parts.append(f"<b>{title}</b><ul>{listed}</ul>")
        self.lessons_html.value = "".join(parts)
        av = approval_view(state)
        if av is not None and self._approver is not None and self._approver.offered:
            self.diagnosis_html.value = (
                f"<b>Diagnosis</b>{pre(av.diagnosis)}"
                if av.diagnosis
                else ("<i>a new version of your code</i>" if av.yours else "<i>first version</i>")
            )
            note = approval_note(av)
            self.round_html.value = f"<p>{html.escape(note)}</p>" if note else ""
            heading = "Proposed change to your code" if av.yours else "Proposed change"
            self.diff_html.value = f"<b>{heading}</b>" + diff_html(av.diff or av.code)
            if self.edit_area.value == "" or self.approval_panel.layout.display == "none":
                self.edit_area.value = av.code
            self.approval_panel.layout.display = "flex"
        else:
            self.approval_panel.layout.display = "none"

    def _render_timeline(self, state: HealState, live: bool) -> None:
        rows = timeline_rows(state, live=live)
        buttons = list(self.timeline_box.children)
        while len(buttons) < len(rows):
            b = w.Button(layout=w.Layout(width="100%", height="auto"))
            b.add_class("selfheal-row")
            idx = len(buttons)
            b.on_click(lambda _b, idx=idx: self.select(idx))
            buttons.append(b)
        buttons = buttons[: len(rows)]
        for b, r in zip(buttons, rows, strict=True):
            label = row_label(r)
            if b.description != label:
                b.description = label
                b.tooltip = r.detail[:300]
            for st in get_args(RowState):
                if st == r.state:
                    b.add_class(f"selfheal-row-{st}")
                else:
                    b.remove_class(f"selfheal-row-{st}")
        if len(buttons) != len(self.timeline_box.children):
            self.timeline_box.children = tuple(buttons)
        self._rows = rows
        if self._selected is not None and self._selected < len(rows):
            self._show_detail(state, rows[self._selected])

    def _render_tests(self, state: HealState) -> None:
        rows = test_rows(state)
        if not rows:
            self.tests_html.value = "<p>(no tests yet)</p>"
            return
        n = max(len(r.outcomes) for r in rows)
        head = "".join(f"<th>it{i + 1}</th>" for i in range(n))
        body = []
        for r in rows:
            cells = "".join(
                f'<td title="{html.escape(o)}">{OUTCOME_ICONS.get(o, "?")}</td>' for o in r.outcomes
            )
            cells += "<td></td>" * (n - len(r.outcomes))
            title = f' title="{html.escape(r.quarantine_reason)}"' if r.quarantine_reason else ""
            body.append(
                f"<tr><td>{html.escape(r.id)}</td><td>{r.origin}</td><td{title}>{r.trust}</td>"
                f"{cells}<td><code>{html.escape(r.source)}</code></td></tr>"
            )
        self.tests_html.value = (
            '<table class="selfheal-table"><tr><th>test</th><th>origin</th><th>trust</th>'
            f"{head}<th>source</th></tr>" + "".join(body) + "</table>"
        )

    def select(self, index: int) -> None:
        """Show the detail of timeline row ``index`` (what a click on the row does)."""
        self._selected = index
        if index < len(self._rows):
            self._show_detail(self.display_state(), self._rows[index])

    def _show_detail(self, state: HealState, row: TimelineRow) -> None:
        d = row_detail(state, row, self._rows)
        body = "<br>".join(html.escape(x) for x in d.lines)
        code = ""
        if d.code:
            code = diff_html(d.code) if d.code.startswith("---") else pre(d.code)
        calls = "".join(transcript_html(c) for c in d.calls)
        self.detail.value = f"<div><b>{html.escape(d.title)}</b><br>{body}{code}{calls}</div>"

    def __repr__(self) -> str:
        return render_text(self.display_state(), live=self.live)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(super()._repr_mimebundle_(**kwargs) or {})
        state = self.display_state()
        bundle["text/plain"] = render_text(state, live=self.live)
        bundle["text/markdown"] = render_markdown(state, live=self.live)
        return bundle
