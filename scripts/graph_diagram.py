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

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.embedded import Embedded  # noqa: E402
from selfheal.graph.table import AFTER_DECISION, GRAPH, START  # noqa: E402

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


BLOCK = Embedded(name="graph-diagram", files=FILES, make=mermaid, source="selfheal/graph/table.py")


def stale(files: tuple[Path, ...] = FILES) -> list[str]:
    """The files whose block is missing or differs from the generated one."""
    return BLOCK.stale(files)


def main(argv: list[str] | None = None) -> int:
    return BLOCK.main(argv, __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
