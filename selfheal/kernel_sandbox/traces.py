"""Reading a trace: the kernel's steps as records (``read_steps``), and as text short enough
for a model's context (``trace_text``).

The steps come from the tracer in the candidate's process (``_harness/trace.py``): signed by
the harness, but built in a process that ran candidate code, so they are read defensively
(malformed steps are dropped, every string is cut again here)."""

from __future__ import annotations

from typing import Any, get_args

from selfheal.kernel_sandbox.types import TraceResult, TraceStep, TraceStepKind

_KINDS: frozenset[str] = frozenset(get_args(TraceStepKind))
_MAX_TEXT = 1000
_MAX_STEPS = 20_000


def _text(v: Any, limit: int = _MAX_TEXT) -> str:
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _step(raw: Any) -> TraceStep | None:
    if not isinstance(raw, tuple) or len(raw) != 7 or raw[0] not in _KINDS:
        return None
    kind, frame, depth, function, line, values, value = raw
    if not all(isinstance(x, int) for x in (frame, depth, line)):
        return None
    pairs = tuple(
        (_text(p[0], 80), _text(p[1]))
        for p in (values if isinstance(values, tuple) else ())[:50]
        if isinstance(p, tuple) and len(p) == 2
    )
    k: TraceStepKind = kind
    return TraceStep(
        kind=k,
        frame=frame,
        depth=depth,
        function=_text(function, 200),
        line=line,
        values=pairs,
        value=_text(value),
    )


def read_steps(value: Any) -> dict[str, Any]:
    """The trace fields of a :class:`TraceResult` from the kernel's value
    ``("trace", steps, total, omitted, notes, head)``; empty when it is not one."""
    if not isinstance(value, tuple) or len(value) != 6 or value[0] != "trace":
        return {}
    _, raw, total, omitted, notes, head = value
    raw = raw if isinstance(raw, tuple) else ()
    steps = tuple(s for s in (_step(r) for r in raw[:_MAX_STEPS]) if s is not None)
    return {
        "steps": steps,
        "total_steps": total if isinstance(total, int) else len(steps),
        "omitted": omitted if isinstance(omitted, int) else 0,
        "gap_at": head if isinstance(head, int) else 0,
        "notes": tuple(_text(n, 300) for n in (notes if isinstance(notes, tuple) else ())[:20]),
    }


def _values(pairs: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" if k != "…" else f"… {v}" for k, v in pairs)


def _lines(result: TraceResult, source: list[str]) -> list[tuple[int, str]]:
    """``(step index, text)`` per shown step: calls and returns indented by depth; a line
    with the values its execution changed (read from the frame's next step)."""
    steps = result.steps
    after: dict[int, tuple[tuple[str, str], ...]] = {}
    last_of_frame: dict[int, int] = {}
    for i, s in enumerate(steps):
        prev = last_of_frame.get(s.frame)
        if prev is not None and steps[prev].kind == "line" and s.kind != "call":
            after[prev] = s.values
        last_of_frame[s.frame] = i
    out: list[tuple[int, str]] = []
    for i, s in enumerate(steps):
        pad = "  " * min(s.depth - 1, 8)
        if s.depth > 9:
            pad += f"[depth {s.depth}] "
        if s.kind == "call":
            out.append((i, f"{pad}→ {s.function}({_values(s.values)})"))
        elif s.kind == "line":
            code = source[s.line - 1].strip() if 0 < s.line <= len(source) else "?"
            text = f"{pad}  L{s.line}: {code[:80]}"
            if after.get(i):
                text += f"   # {_values(after[i])}"
            out.append((i, text))
        elif s.kind == "exception":
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            if nxt is not None and nxt.kind == "raise" and nxt.frame == s.frame:
                continue  # shown once, as the raise
            out.append((i, f"{pad}  ! {s.value} at line {s.line}"))
        elif s.kind == "return":
            out.append((i, f"{pad}← {s.function} returns {s.value}"))
        else:
            out.append((i, f"{pad}↑ {s.function} raises {s.value} (line {s.line})"))
    return out


def trace_text(result: TraceResult, code: str, *, max_chars: int = 2400) -> str:
    """The trace as text of at most about ``max_chars`` characters: a header (outcome,
    steps, calls, depth), then the steps; when they do not fit, the first third and the end
    (where a failing run fails), with the number of steps left out between them."""
    head = f"outcome: {result.outcome}"
    if result.exc_type:
        head += f" ({result.exc_type}: {result.message.strip()[:300]})"
    if not result.loaded:
        return head
    calls = sum(1 for s in result.steps if s.kind == "call")
    depth = max((s.depth for s in result.steps), default=0)
    head += (
        f"\n{result.total_steps} step(s) in the candidate"
        + (f", {calls} call(s) shown" if calls else "")
        + (f", calls nested {depth} deep" if depth > 1 else "")
        + (f"; {result.omitted} step(s) in the middle were not recorded" if result.omitted else "")
    )
    if result.notes:
        head += "\nnote: " + "; ".join(result.notes)
    if result.stdout.strip():
        head += f"\nprinted: {result.stdout.strip()[:200]!r}"
    if not result.steps:
        return head + "\n(no line of the candidate ran)"
    lines = _lines(result, code.splitlines())
    if result.omitted:
        at = next((k for k, (i, _) in enumerate(lines) if i >= result.gap_at), len(lines))
        lines.insert(at, (-1, f"… {result.omitted} step(s) not recorded …"))
    budget = max(200, max_chars - len(head) - 1)
    if sum(len(t) + 1 for _, t in lines) <= budget:
        return head + "\n" + "\n".join(t for _, t in lines)
    first: list[str] = []
    used = 0
    for _, t in lines:
        if used + len(t) + 1 > budget // 3:
            break
        first.append(t)
        used += len(t) + 1
    last: list[str] = []
    for _, t in reversed(lines[len(first) :]):
        if used + len(t) + 1 > budget - 40:
            break
        last.append(t)
        used += len(t) + 1
    last.reverse()
    skipped = len(lines) - len(first) - len(last)
    middle = [f"… {skipped} line(s) of the trace left out …"] if skipped else []
    return head + "\n" + "\n".join(first + middle + last)
