"""What a run tells the user about the examples of their spec: how many were read as trusted
tests, and each example it could not read, quoted, with the reason and what to write instead."""

from __future__ import annotations

import re

from selfheal.examples import Unread, read_examples
from selfheal.state import Spec

_LOOKS_LIKE_RE = re.compile(
    r"^\s*(?:Input\s*:|Output\s*:)|\b(?:output|result|return value)\s+(?:should|will|must)\s+be\b",
    re.IGNORECASE,
)


def _unread_lines(spec: Spec, name: str) -> list[Unread]:
    """Lines in the forms read without a reason for what went wrong (``Input:``/``Output:``,
    "the output should be", ``f(x) = y``, ``f(x)  # y``) that look like examples of ``name``."""
    call = re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(.*(?:=(?![=>])|#)")
    found: list[Unread] = []
    for line in spec.text.splitlines():
        stripped = line.strip()
        if not stripped or re.match(r"(?:async\s+)?def\s|>>>", stripped):
            continue
        if call.search(stripped) or _LOOKS_LIKE_RE.search(stripped):
            why = f"it is not in a form selfheal reads; write it as `{name}(args) -> value`"
            found.append(Unread(example=stripped[:100], why=why))
    return found


def unread_examples(spec: Spec, *, limit: int = 2) -> list[Unread]:
    """The examples of the spec that could not be read, at most ``limit``: those written in a
    form selfheal reads, with the reason (whether or not other examples were read); then, when
    none was read at all, lines that look like examples in no form it reads."""
    name = spec.entry_point
    if not name:
        return []
    found = list(read_examples(spec.text, name)[1])
    if not spec.examples:
        shown = " ".join(u.example for u in found)
        found += [u for u in _unread_lines(spec, name) if u.example not in shown]
    return found[:limit]


def _quoted(u: Unread) -> str:
    return f"`{u.example}` could not be read: {u.why}"


def examples_line(spec: Spec, read: int, *, yours: bool = False) -> str | None:
    """The line that tells how many of the spec's examples are trusted tests (``read``), and
    quotes the first one that could not be read; None when the spec writes no example and
    ``yours`` (the user gave tests: they are what verifies)."""
    unread = unread_examples(spec, limit=1)
    if read:
        head = f"{read} example(s) of the spec read as trusted tests"
    elif unread:
        head = "no example of the spec read as a trusted test"
    elif yours:
        return None
    else:
        return (
            "no example in the spec: nothing trusted to verify against (write one as "
            f"`{spec.entry_point}(args) -> value`)"
        )
    return head + (f"; {_quoted(unread[0])}" if unread else "")


def no_trusted_test(spec: Spec) -> str:
    """What a result without a trusted test says: add an example, or, when the spec has
    examples that could not be read, the first one quoted with the reason."""
    unread = unread_examples(spec, limit=1)
    if unread:
        return f"no trusted test ({_quoted(unread[0])})"
    return "no trusted test (add an example to the spec to verify)"
