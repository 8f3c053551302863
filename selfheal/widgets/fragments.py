"""HTML fragments of the live view (the style sheet, code and diff blocks, a model call's
transcript, the population table), built from the view model's records."""

from __future__ import annotations

import html

from selfheal.texts import cut
from selfheal.widgets.candidates import CandidatesView
from selfheal.widgets.detail import CallTranscript
from selfheal.widgets.viewmodel import TimelineRow

CSS = """
<style>
.selfheal-row button, button.selfheal-row { text-align: left !important; font-family: monospace; }
.selfheal-row-running { background: #fff7d6 !important; }
.selfheal-row-error { background: #fde2e2 !important; }
.selfheal-row-waiting { background: #e2ecfd !important; }
.selfheal-pre { font-family: monospace; white-space: pre; font-size: 12px; margin: 0; }
.selfheal-wrap { white-space: pre-wrap; max-height: 24em; overflow-y: auto; }
.selfheal-diff-add { color: #116611; } .selfheal-diff-del { color: #aa1111; }
table.selfheal-table td, table.selfheal-table th { padding: 1px 8px; text-align: left; }
tr.selfheal-chosen td { font-weight: bold; background: #e6f4e6; }
.selfheal-evidence { color: #444; }
</style>
"""


def pre(text: str) -> str:
    return f'<pre class="selfheal-pre">{html.escape(text)}</pre>'


def transcript_html(call: CallTranscript) -> str:
    """One model call, folded: the messages sent and the raw reply."""
    parts = [
        f"<b>{html.escape(m.role)}</b>"
        f'<pre class="selfheal-pre selfheal-wrap">{html.escape(m.shown())}</pre>'
        for m in call.messages
    ]
    parts.append(
        f'<b>reply</b><pre class="selfheal-pre selfheal-wrap">{html.escape(call.reply)}</pre>'
    )
    return (
        f'<details class="selfheal-call"><summary>model call: {html.escape(call.label)}</summary>'
        + "".join(parts)
        + "</details>"
    )


def diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        esc = html.escape(line)
        if line.startswith("+") and not line.startswith("+++"):
            out.append(f'<span class="selfheal-diff-add">{esc}</span>')
        elif line.startswith("-") and not line.startswith("---"):
            out.append(f'<span class="selfheal-diff-del">{esc}</span>')
        else:
            out.append(esc)
    return '<pre class="selfheal-pre">' + "\n".join(out) + "</pre>"


def candidates_html(cv: CandidatesView) -> str:
    """The population panel: one row per candidate, the chosen one marked, then why it won."""
    if not cv.rows:
        return "<p>(no candidates yet)</p>"
    probe_heads = "".join(f"<th><code>{html.escape(p)}</code></th>" for p in cv.probes)
    body = []
    for r in cv.rows:
        trusted: str
        if r.state in ("proposed", "not run"):
            trusted = r.state
        elif r.state == "no load":
            trusted = f'<span title="{html.escape(r.load_error)}">does not load</span>'
        else:
            trusted = f"{r.trusted_passed}/{r.trusted_total}"
        failing = ", ".join(r.failing)
        outs = "".join(f"<td><code>{html.escape(x)}</code></td>" for x in r.outputs)
        outs += "<td></td>" * (len(cv.probes) - len(r.outputs))
        cls = ' class="selfheal-chosen"' if r.chosen else ""
        cost = r.cost
        cost_cell = (
            f'<td title="{cost.prompt_tokens} prompt + {cost.completion_tokens} completion tokens; '
            f'{cost.model_seconds:.1f}s of model time; {cost.sandbox_seconds:.2f}s in the sandbox">'
            f"{cost.tokens} tok · {cost.model_seconds:.1f}s · {cost.sandbox_seconds:.2f}s</td>"
        )
        body.append(
            f'<tr{cls} data-candidate="{html.escape(r.id)}">'
            f"<td>{'▶' if r.chosen else ''}</td><td>{r.icon}</td><td>{html.escape(r.id)}</td>"
            f"<td>{html.escape(r.origin)}</td><td>{r.round}</td>"
            f"<td>{html.escape(r.parent or '')}</td><td>{trusted}</td>"
            f'<td title="{html.escape(failing)}">{r.tests_passed}/{r.tests_total}</td>'
            f"<td>{'' if r.cluster is None else r.cluster}</td>{cost_cell}{outs}</tr>"
        )
    parts = [
        f"<p><b>{html.escape(cv.verdict)}</b>",
        f'<br><span class="selfheal-evidence">Evidence: {html.escape(cv.evidence)}</span>'
        if cv.evidence
        else "",
        "</p>",
        '<table class="selfheal-table"><tr><th></th><th></th><th>candidate</th><th>origin</th>'
        "<th>round</th><th>from</th><th>trusted</th><th>tests</th><th>cluster</th>"
        '<th title="tokens · model seconds · sandbox seconds">cost</th>'
        f"{probe_heads}</tr>" + "".join(body) + "</table>",
        f"<p><i>{cv.total_probes} probe input(s) in all; the columns show where the candidates "
        "differ.</i></p>",
    ]
    parts += [f"<p>disputed {html.escape(d)}</p>" for d in cv.disputed]
    parts += [f"<p>spec oracle: <code>{html.escape(o)}</code></p>" for o in cv.oracle]
    parts += [
        f'<details class="selfheal-candidate-code"><summary>code of {html.escape(r.id)} '
        f"({html.escape(r.origin)}){' ▶ chosen' if r.chosen else ''}</summary>"
        f"{pre(r.code)}</details>"
        for r in cv.rows
    ]
    return "".join(parts)


def row_label(r: TimelineRow) -> str:
    model = f"  [{r.model}]" if r.model else ""
    dur = "…" if r.state == "running" else f"{r.duration:.2f}s"
    return f"{r.icon} {r.node:<11} it{r.iteration}  {dur:>7}  {r.tokens:>5} tok{model}  {cut(r.detail, 90)}"
