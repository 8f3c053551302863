#!/usr/bin/env python3
"""The table of ``HealConfig``'s groups in docs/usage.md, generated from the groups.

    python scripts/settings_table.py            # print the table
    python scripts/settings_table.py --write    # put it into docs/usage.md
    python scripts/settings_table.py --check    # exit 1 if the file holds another table

Each setting is defined once, as a field of its group in ``selfheal/config/groups.py`` (name,
type, default, docstring); the table lists each group (its name, its docstring) and its
settings in field order. It sits between ``<!-- settings-table:begin -->`` and
``<!-- settings-table:end -->``; ``tests/core/test_config_groups.py`` runs the check, so the
docs cannot drift from the groups.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.embedded import Embedded  # noqa: E402
from selfheal.config import GROUPS  # noqa: E402

FILES = (ROOT / "docs" / "usage.md",)


def table() -> str:
    """One row per group: its name, what it holds (its docstring) and its settings."""
    rows = ["| group | what it holds | settings |", "|---|---|---|"]
    for name, group in GROUPS.items():
        what = " ".join((group.__doc__ or "").split()).replace("``", "`")
        settings = ", ".join(f"`{field}`" for field in group.model_fields)
        rows.append(f"| `{name}` | {what} | {settings} |")
    return "\n".join(rows)


BLOCK = Embedded(
    name="settings-table", files=FILES, make=table, source="the groups (selfheal/config/groups.py)"
)


def stale(files: tuple[Path, ...] = FILES) -> list[str]:
    """The files whose block is missing or differs from the generated one."""
    return BLOCK.stale(files)


def main(argv: list[str] | None = None) -> int:
    return BLOCK.main(argv, __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
