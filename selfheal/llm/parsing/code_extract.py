"""Code in a model's reply: the package's one fence parser, and the best Python block.

Code travels in fenced ```python blocks, never inside JSON strings (escaping code in JSON is
where small models break most). :func:`fences` finds every fenced block (an unterminated last
one included: a reply cut off by the token limit); :func:`extract_code` picks the best Python
block; :func:`lenient_block` keeps the complete statements of a block that was cut off;
:func:`prose` is the explanation around the blocks; :func:`code_like` is the code a reply meant
to give when none of it parses.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from selfheal._parse import ast_parse, parse_or_none

CODE_LANGS = frozenset({"", "python", "py", "python3", "py3", "ipython", "pycon"})
"""Fence tags taken for Python (untagged included)."""

_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(```|\Z)", re.DOTALL)
_CODE_START_RE = re.compile(r"^(?:async\s+def|def|class|import|from|@)\b|^@", re.MULTILINE)
_CODE_LINE_RE = re.compile(
    r"[ \t#@]|(?:async\s+def|def|class|import|from)\b|[A-Za-z_][\w.]*\s*[=(\[]"
)
"""A line that goes on a block of code: indented, a comment or decorator, a definition, an
import, an assignment or a call (a line of prose does not)."""


def strip_thinking(text: str) -> str:
    """Drop ``<think>...</think>`` blocks that reasoning models put before the answer."""
    return _THINK_RE.sub("", text)


@dataclass(frozen=True)
class Fence:
    """One fenced block of a reply."""

    lang: str
    """The tag after the opening backticks, lower case (empty when untagged)."""
    body: str
    """What is between the fences."""
    start: int
    """Where the opening fence starts in the text."""
    end: int
    """Where the block ends (after the closing fence, or the end of the text)."""
    closed: bool
    """False when the text ended before the closing fence."""


def fences(text: str) -> list[Fence]:
    """Every fenced block of ``text``, in order."""
    return [
        Fence(m.group(1).lower(), m.group(2), m.start(), m.end(), m.group(3) == "```")
        for m in _FENCE_RE.finditer(text)
    ]


def prose(text: str, limit: int = 500) -> str:
    """The explanation around the fenced blocks, if any (at most ``limit`` characters)."""
    kept: list[str] = []
    at = 0
    for fence in fences(text):
        kept.append(text[at : fence.start])
        at = fence.end
    kept.append(text[at:])
    return "".join(kept).strip()[:limit]


def defines(tree: ast.Module, name: str) -> bool:
    """Whether the module defines ``name`` at the top level."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return True
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name) and node.target.id == name:
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            return True
    return False


def _substantial(tree: ast.Module) -> bool:
    """True when a module holds more than bare names or constants (``Sure`` parses too)."""
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Name | ast.Constant))
        for node in tree.body
    )


def syntax_error(code: str) -> str:
    """``SyntaxError: ... (line N)`` for code that does not parse, else ``""``."""
    try:
        ast_parse(code)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, MemoryError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _unfenced(text: str) -> str | None:
    """Code in a reply without fences: the whole text, or from the first line that starts
    code, dropping trailing prose lines."""
    whole = text.strip()
    tree = parse_or_none(whole)
    if tree is not None and _substantial(tree):
        return whole
    for n, match in enumerate(_CODE_START_RE.finditer(whole)):
        if n >= 5:
            break  # a line of prose may start with "from" or "import": try a few starts
        lines = whole[match.start() :].splitlines()
        for end in range(len(lines), 0, -1):
            code = "\n".join(lines[:end]).strip()
            tree = parse_or_none(code)
            if tree is not None and _substantial(tree):
                return code
            if len(lines) - end >= 20:
                break
    return None


def extract_code(text: str, *, entry_point: str | None = None) -> str | None:
    """The best Python code in a reply, or None when no candidate parses.

    Fenced blocks tagged ``python`` (or untagged) are candidates; one that defines
    ``entry_point`` wins, then a ``python``-tagged one, then the later one (models put the
    corrected version last). A reply with no fences is accepted when it parses as code.
    Text is returned exactly as written (non-ASCII intact), without trailing whitespace.
    """
    text = strip_thinking(text)
    best: tuple[tuple[int, int, int], str] | None = None
    blocks = fences(text)
    for position, block in enumerate(blocks):
        if block.lang not in CODE_LANGS:
            continue
        code = block.body.strip("\n").rstrip()
        if block.lang == "pycon" or code.startswith(">>>"):
            continue
        tree = parse_or_none(code)
        if tree is None or not _substantial(tree):
            continue
        defined = int(entry_point is not None and defines(tree, entry_point))
        score = (defined, int(block.lang != ""), position)
        if best is None or score > best[0]:
            best = (score, code)
    if best is not None:
        return best[1]
    if blocks:
        return None
    return _unfenced(text)


def was_fenced(text: str) -> bool:
    """Whether the reply holds a Python (or untagged) fenced block."""
    return any(block.lang in CODE_LANGS for block in fences(strip_thinking(text)))


def lenient_block(text: str) -> tuple[str, bool]:
    """The first fenced block of ``text`` (unterminated allowed; the whole text when there is
    no fence), cut back to its longest prefix that parses. Returns ``(code, salvaged)``; a
    reply cut off by the token limit still yields its complete statements instead of
    nothing."""
    found = fences(text)
    body = found[0].body if found else text
    salvaged = bool(found) and not found[0].closed
    lines = body.rstrip().splitlines()
    while lines:
        candidate = "\n".join(lines)
        if parse_or_none(candidate) is not None:
            return candidate, salvaged
        lines.pop()
        salvaged = True
    return "", True


def code_like(text: str, *, entry_point: str | None = None) -> str | None:
    """The code a reply meant to give, also when it does not parse (a missing colon, a block
    cut off mid-line), so a run has something to run and repair instead of nothing: the Python
    block that defines ``entry_point`` (else the later one with a definition or an import; in a
    reply without fences, the lines from the first such line to the first line of prose), cut
    back to its longest start that parses and defines ``entry_point`` when there is one, else
    as written. None when the reply holds no code-like text."""
    text = strip_thinking(text)
    found = fences(text)
    if found:
        bodies = [f.body.strip("\n").rstrip() for f in found if f.lang in CODE_LANGS]
    else:
        start = _CODE_START_RE.search(text)
        lines = text[start.start() :].splitlines() if start else []
        end = next((i for i, ln in enumerate(lines) if ln and not _CODE_LINE_RE.match(ln)), None)
        bodies = ["\n".join(lines[:end]).rstrip()]
    bodies = [b for b in bodies if _CODE_START_RE.search(b) and not b.startswith(">>>")]
    if not bodies:
        return None
    named = [b for b in bodies if entry_point and re.search(rf"\bdef\s+{entry_point}\b", b)]
    body = (named or bodies)[-1]
    lines = body.splitlines()
    for end in range(len(lines), 0, -1):
        tree = parse_or_none("\n".join(lines[:end]))
        if tree is not None and entry_point is not None and defines(tree, entry_point):
            return "\n".join(lines[:end]).rstrip()
    return body
