"""Where a code reply is done: once the function asked for is complete and what follows is not
more of the program (prose, the closing fence, a main block, example calls), the rest is
tokens nobody reads. :func:`function_end` is the rule, on the reply so far; :class:`FunctionEnds`
is it as a request's ``stop_when`` (streaming backends stop decoding there, the others cut the
reply; docs/llm.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_DEF_RE = re.compile(r"(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_KEYWORDS = frozenset(
    [
        "async",
        "await",
        "class",
        "def",
        "del",
        "elif",
        "else",
        "except",
        "finally",
        "for",
        "from",
        "global",
        "if",
        "import",
        "lambda",
        "nonlocal",
        "pass",
        "raise",
        "return",
        "try",
        "while",
        "with",
        "yield",
        "match",
        "case",
        "type",
    ]
)
"""Words that start a statement (a line opening with another bare word and a space is prose)."""
_CODE_START_RE = re.compile(
    r"[#@\"'(\[{]|[A-Za-z_][\w.]*\s*(?:=[^=]|\(|\[|[-+*/%|&^]=|:\s*[A-Za-z_][\w.\[\], ]*=)"
)
"""A top-level line that is code: a comment, a decorator, a literal, an assignment, a call."""
_USAGE_RE = re.compile(r"(?:if\s+__name__\b|print\s*\(|assert\b|pytest\b|unittest\b)")
"""Top-level lines that run the code instead of defining it: a main block, example calls, tests."""
_TOP_RE = re.compile(r"\n(?=\S)")
"""Before a line that starts at the left margin (the only lines that can end a reply)."""
_TWO_WORDS_RE = re.compile(r"([A-Za-z_][\w']*)[ \t]+[A-Za-z`*\"'(]")


def _is_prose(line: str) -> bool:
    """A top-level line (or its visible start) that is text, not Python."""
    words = _TWO_WORDS_RE.match(line)
    if words is not None and words.group(1) not in _KEYWORDS:
        return True  # "This function ...", "Note that ...": two bare words
    first = line.split(maxsplit=1)[0] if line.strip() else ""
    return bool(first) and first not in _KEYWORDS and not _CODE_START_RE.match(line)


def function_end(text: str, entry_point: str | None = None, *, start: int = 0) -> int | None:
    """Where ``text`` (a reply so far) should end, or None to go on: at the first top-level
    line after a complete definition of ``entry_point`` (any function or class when None) that
    is not more of the program: the closing fence of its block, a line of prose, a main block,
    a ``print``, an ``assert``. A second function, an import, a comment, a constant go on. Only
    the text from ``start`` on is the model's: a prefilled header (a stub and its docstring)
    is not a complete definition until the model wrote a line of its body, and is never cut.
    A line is judged once it is complete, or as soon as it opens with a fence or two bare
    words."""
    done = False  # the entry point's definition is complete
    current: str | None = None  # the top-level definition being read
    head = 0  # where its first line ends
    seen = 0  # text read so far (up to the line in hand)
    quotes = depth = 0  # triple quotes and open brackets before the line in hand
    lefts = [0] if text[:1].strip() else []
    for here in lefts + [m.end() for m in _TOP_RE.finditer(text)]:
        region = text[seen:here]
        quotes += region.count('"""') + region.count("'''")
        depth = max(0, depth + _opened(region))
        seen = here
        if quotes % 2 or depth:
            continue  # the rest of a string or of a bracket, not a line of its own
        if current is not None and text[max(head, start) : here].strip():
            done = done or entry_point is None or current == entry_point
        current = None
        newline = text.find("\n", here)
        line = text[here:] if newline < 0 else text[here:newline]
        if done and here >= start:
            if line.startswith("```") or (newline >= 0 and _USAGE_RE.match(line)):
                return here
            if (newline >= 0 or _TWO_WORDS_RE.match(line)) and _is_prose(line):
                return here
        found = _DEF_RE.match(line)
        if found is not None:
            current = found.group(1)
            # a one-line definition (``def f(): return 1``) has its body on its first line
            one_line = not line.rstrip().endswith(":") and _opened(line) == 0
            head = here + (len(line.partition(":")[0]) + 1 if one_line else len(line))
    return None


def _opened(text: str) -> int:
    """Brackets ``text`` opens and leaves open (negative when it closes more)."""
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


@dataclass(frozen=True)
class FunctionEnds:
    """:func:`function_end` as a request's ``stop_when``: called with the reply so far (the
    continuation of ``prefill`` when the reply was prefilled), it gives where the reply ends.
    A value (compared by its fields), so requests that carry equal ones can be batched."""

    entry_point: str | None = None
    """The function the reply is to define (any definition when None)."""
    prefill: str = ""
    """The start of the reply the model continues (its header), which the rule reads too."""

    def __call__(self, text: str) -> int | None:
        end = function_end(self.prefill + text, self.entry_point, start=len(self.prefill))
        return None if end is None else end - len(self.prefill)
