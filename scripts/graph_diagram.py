#!/usr/bin/env python3
"""The pipeline's Mermaid diagram, generated from ``selfheal.graph.table.GRAPH``.

    python scripts/graph_diagram.py            # print the diagram
    python scripts/graph_diagram.py --write    # put it into docs/architecture.md
    python scripts/graph_diagram.py --check    # exit 1 if either file holds another diagram

Every edge comes from a Step's ``next``; the gate's self-edge (the run stops there for a
human) is drawn as the human decision, whose edges are ``AFTER_DECISION``; each node lists the
model calls it makes (``Step.calls``). The diagram sits
between ``<!-- graph-diagram:begin -->`` and ``<!-- graph-diagram:end -->`` in each file;
``tests/core/test_architecture.py`` runs the check, so the pictures cannot drift from the
table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from selfheal.graph.table import AFTER_DECISION, GRAPH, START  # noqa: E402

BEGIN, END = "<!-- graph-diagram:begin -->", "<!-- graph-diagram:end -->"
FILES = (ROOT / "docs" / "architecture.md",)
HUMAN = "human"


def mermaid() -> str:
    """The table as a Mermaid flowchart (a fenced block)."""
    out = ["```mermaid", "flowchart TD"]
    for step in GRAPH.values():
        calls = "".join(f"<br/><small>{call}</small>" for call in step.calls)
        out.append(f'    {step.name}["{step.name}{calls}"]')
    out.append(f'    {HUMAN}{{{{"a human decides<br/><small>approve, edit, reject</small>"}}}}')
    out.append('    done(("done"))')
    out.append(f'    start(["heal(spec)"]) --> {START}')
    for step in GRAPH.values():
        for nxt in step.next:
            if nxt == step.name:
                out.append(f"    {step.name} -. waits .-> {HUMAN}")
            else:
                out.append(f"    {step.name} --> {nxt}")
    out.extend(f"    {HUMAN} -.-> {nxt}" for nxt in AFTER_DECISION if nxt != "gate")
    out.append("```")
    return "\n".join(out)


def embedded(text: str) -> str | None:
    """The diagram between the markers of ``text`` (None without markers)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def with_diagram(text: str, diagram: str) -> str:
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n{diagram}\n{END}{tail}"


def stale(files: tuple[Path, ...] = FILES) -> list[str]:
    """The files whose embedded diagram is missing or differs from the table's."""
    want = mermaid()
    return [str(p.relative_to(ROOT)) for p in files if embedded(p.read_text()) != want]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="update the files' diagrams")
    mode.add_argument("--check", action="store_true", help="exit 1 if a diagram is stale")
    args = parser.parse_args(argv)
    if args.write:
        for p in FILES:
            p.write_text(with_diagram(p.read_text(), mermaid()))
        return 0
    if args.check:
        bad = stale()
        for name in bad:
            print(
                f"{name}: the graph diagram differs from selfheal/graph/table.py; run "
                "python scripts/graph_diagram.py --write",
                file=sys.stderr,
            )
        return 1 if bad else 0
    print(mermaid())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
