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

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from selfheal.config import GROUPS  # noqa: E402

BEGIN, END = "<!-- settings-table:begin -->", "<!-- settings-table:end -->"
FILES = (ROOT / "docs" / "usage.md",)


def table() -> str:
    """One row per group: its name, what it holds (its docstring) and its settings."""
    rows = ["| group | what it holds | settings |", "|---|---|---|"]
    for name, group in GROUPS.items():
        what = " ".join((group.__doc__ or "").split()).replace("``", "`")
        settings = ", ".join(f"`{field}`" for field in group.model_fields)
        rows.append(f"| `{name}` | {what} | {settings} |")
    return "\n".join(rows)


def embedded(text: str) -> str | None:
    """The table between the markers of ``text`` (None without markers)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def with_table(text: str, new: str) -> str:
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n{new}\n{END}{tail}"


def stale(files: tuple[Path, ...] = FILES) -> list[str]:
    """The files whose embedded table is missing or differs from the groups'."""
    want = table()
    return [str(p.relative_to(ROOT)) for p in files if embedded(p.read_text()) != want]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="update the files' tables")
    mode.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    if args.write:
        for p in FILES:
            p.write_text(with_table(p.read_text(), table()))
        return 0
    if args.check:
        bad = stale()
        for name in bad:
            print(
                f"{name}: the settings table differs from the groups; run --write", file=sys.stderr
            )
        return 1 if bad else 0
    print(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
