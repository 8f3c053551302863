"""The one unified-diff helper: a proposal's diff, the notebook's code panel, the fixed cell
that ``%selfheal`` prints."""

from __future__ import annotations

import difflib


def _lines(src: str) -> list[str]:
    if not src:
        return []
    return (src if src.endswith("\n") else src + "\n").splitlines(keepends=True)


def unified_diff(before: str, after: str, *, a: str = "before.py", b: str = "after.py") -> str:
    """A unified diff of two sources (empty when they are equal); a last line without a
    newline gets one, so lines never glue together."""
    return "".join(difflib.unified_diff(_lines(before), _lines(after), fromfile=a, tofile=b))
