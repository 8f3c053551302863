"""A run as terminal text: the timeline, the model calls as sent, the candidates, the tests,
a proposal and what was remembered (``HealResult``'s texts, the CLI and the notebook's text
view read them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from selfheal.state import Event, HealState, Proposal, TestCase


def remembered_lines(state: HealState) -> tuple[str, ...]:
    """One line per thing the run recalled from the memory across runs, saying which run it
    came from (and, for a verified solution, the candidate it became)."""
    out: list[str] = []
    for r in state.remembered:
        if r.kind == "lesson":
            out.append(f"{r.text} ({r.id}, remembered from run {r.run_id})")
            continue
        joined = next((c.id for c in state.candidates if c.memory_id == r.id), None)
        out.append(
            f"verified solution {r.id} of a spec {r.score:.0%} alike, remembered from run "
            f"{r.run_id}" + (f": candidate {joined}" if joined else "")
        )
    return tuple(out)


def proposal_text(p: Proposal) -> str:
    """A proposal as a reviewer reads it: what it answers (the diagnosis), how, and the diff."""
    n = len(p.candidates) or 1
    lines = [f"── {p.kind} proposal awaiting approval ({n} candidate(s); the first shown) ──"]
    if p.diagnosis is not None:
        lines.append(f"diagnosis: {p.diagnosis.root_cause}")
        if p.diagnosis.repair_strategy:
            lines.append(f"strategy:  {p.diagnosis.repair_strategy}")
    lines.append(p.diff.rstrip() if p.diff else p.code.rstrip())
    return "\n".join(lines)


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: cut at a word boundary (when one is in its
    second half), with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:(") + "…"


_ICON = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱", "crashed": "☠"}


def trust(t: TestCase) -> str:
    """``trusted``, ``quarantined`` or ``untrusted``."""
    return "trusted" if t.trusted else ("quarantined" if t.quarantined else "untrusted")


def timeline_text(events: Sequence[Event]) -> str:
    """One line per node: ``✓ execute  0.03s  0 tok  5/7 passed``."""
    rows = []
    for e in events:
        if e.kind != "end":
            continue
        tok = e.prompt_tokens + e.completion_tokens
        rows.append(f"  {e.node:<11} {e.duration:6.2f}s {tok:6d} tok  {e.detail}")
    return "\n".join(rows)


def transcript_text(events: Sequence[Event]) -> str:
    """``HealResult.transcript_text``."""
    out: list[str] = []
    calls = [e for e in events if e.kind == "llm"]
    for n, e in enumerate(calls, 1):
        out.append(
            f"=== call {n}/{len(calls)} · {e.node} · iteration {e.iteration} · {e.detail} · "
            f"{e.model or '?'} · {e.prompt_tokens}+{e.completion_tokens} tok · "
            f"{e.duration:.1f}s"
        )
        if not (e.messages or e.reply):
            out.append("(transcript not kept)")
            continue
        for m in e.messages:
            out += [f"--- {m.role}", m.shown().rstrip()]
        out += ["--- reply", e.reply.rstrip()]
    return "\n".join(out) if out else "(no model calls)"


def candidates_text(state: HealState) -> str:
    """``HealResult.candidates_text`` (the cost: tokens, model and sandbox seconds)."""
    trusted = [t for t in state.tests if t.trusted]
    chosen = next((a.candidate for a in reversed(state.attempts) if a.candidate), None)
    probes = state.probes[:3]
    rows = []
    for c in state.candidates:
        rep = c.report
        if rep is None:
            what = "not run"
        elif not rep.load.ok:
            what = f"does not load ({rep.load.exc_type})"
        else:
            out = {r.test_id: r.outcome for r in rep.results}
            ok = sum(1 for t in trusted if out.get(t.id) == "passed")
            cluster = "-" if c.cluster is None else str(c.cluster)
            seen = "; ".join(f"{p.call} -> {c.behaviour.get(p.id, '?')}"[:60] for p in probes)
            what = f"trusted {ok}/{len(trusted)}  cluster {cluster}  {seen}"
        mark = "▶" if c.id == chosen else " "
        cost = (
            f"{c.cost.tokens:>5} tok {c.cost.model_seconds:5.1f}s model "
            f"{c.cost.sandbox_seconds:5.2f}s sandbox"
        )
        rows.append(f" {mark} {c.id:<4} {c.origin:<10} round {c.round}  {cost}  {what}")
    return "\n".join(rows)


def tests_text(
    tests: Sequence[TestCase], outcomes: Mapping[str, str], failures: Mapping[str, str]
) -> str:
    """``HealResult.tests_text`` (``failures``: test id -> what went wrong)."""
    rows = []
    for t in tests:
        icon = _ICON.get(outcomes.get(t.id, "not run"), "·")
        src = t.headline[:70]
        smoke = "  (smoke test: checks no value)" if t.smoke else ""
        rows.append(f"  {icon} {t.id:<6} {t.origin:<11} {trust(t):<11} {src}{smoke}")
        why = failures.get(t.id)
        if why and t.trusted:
            rows.extend(f"      {ln}" for ln in why.splitlines()[:4])
    return "\n".join(rows)
