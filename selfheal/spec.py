"""Reading a spec: its entry point, signature, imports and the examples written in it.

A spec is either plain language ("Return the median of a list of numbers; raise ValueError
on an empty list. Example: median([3, 1, 2]) -> 2") or Python-looking (a ``def`` line with a
docstring, as in HumanEval). Examples become trusted tests: the user wrote them."""

from __future__ import annotations

import ast
import builtins
import keyword
import re

from selfheal._parse import parse_or_none
from selfheal.errors import ConfigError
from selfheal.examples import find_examples
from selfheal.inputs import decode_text
from selfheal.state import Spec

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DEF_RE = re.compile(rf"^\s*(?:async\s+)?def\s+({_IDENT})\s*\(.*", re.MULTILINE)
_NAMED_RE = re.compile(
    rf"(?:function|method|called|named)(?:\s+(?:called|named))?\s+`?({_IDENT})`?", re.IGNORECASE
)
_STOPWORDS = {
    "called",
    "named",
    "that",
    "which",
    "to",
    "the",
    "a",
    "an",
    "with",
    "for",
    "returns",
    "in",
    "of",
    "and",
    "it",
}
_BACKTICK_CALL_RE = re.compile(rf"`({_IDENT})\s*\(")
_WRITE_CALL_RE = re.compile(
    rf"\b(?:write|implement|create|define|build|make|code|add|need)\s+`?({_IDENT})\(",
    re.IGNORECASE,
)
"""``Write parse_date(s) that ...``: the function to write, named with its parameters."""
_DOCTEST_CALL_RE = re.compile(rf"^\s*>>>\s*({_IDENT})\s*\(", re.MULTILINE)
_BUILTINS = frozenset(dir(builtins))


_FUNCTION_CUE_RE = re.compile(
    r"(?:\b(?:def|function|method|algorithm|returns?|returning|comput\w*|calculat\w*|given|"
    r"takes?|accepts?|inputs?|outputs?|counts?|converts?|checks?|parses?|finds?|sorts?|"
    r"implement\w*|determines?|raises?|yields?|generat\w*|whether|"
    # what a function works on
    r"numbers?|integers?|ints?|floats?|digits?|strings?|str|text|words?|characters?|chars?|"
    r"letters?|lists?|arrays?|tuples?|sets?|dict\w*|maps?|matri\w*|values?|items?|elements?|"
    r"keys?|dates?|times?|bytes|files?|lines?|paths?|urls?|emails?|json|csv|primes?|"
    r"sums?|products?|averages?|means?|medians?)\b|->|=>|[A-Za-z_]\w*\s*\()",
    re.IGNORECASE,
)
"""Words and marks of a spec that asks for a function the model can name itself."""

_EXAMPLE_SPEC = (
    "'Write a function median(values) that returns the median of a list of numbers. "
    "Example: median([3, 1, 2]) -> 2'"
)


def check_spec(
    text: str | bytes, *, entry_point: str | None = None, max_chars: int
) -> tuple[str, Spec]:
    """The spec as checked text and as read (parsed once, here), before anything runs: valid
    UTF-8 without NUL (a problem is reported with its byte offset), not empty, at most
    ``max_chars`` characters, and either naming its function (a ``def``, "a function NAME",
    ``entry_point``) or reading as a request for one (returns, computes, an example
    ``f(x) -> y``, ...) so that the model can name it. Raises ``ConfigError`` saying what to
    change."""
    text = decode_text(text, "The spec")
    if entry_point is not None and (
        not entry_point.isidentifier() or keyword.iskeyword(entry_point)
    ):
        raise ConfigError(
            f"The entry point {entry_point!r} is not a Python function name; give a name such "
            "as `median` or `parse_date`."
        )
    if not text.strip():
        raise ConfigError(
            f"The spec is empty. Describe the function you want, e.g. {_EXAMPLE_SPEC}."
        )
    if len(text) > max_chars:
        raise ConfigError(
            f"The spec is {len(text):,} characters long; the limit is {max_chars:,} (it goes "
            "into every model call and every checkpoint). Shorten it to what the function must "
            "do and a few examples, or raise HealConfig(max_spec_chars=...)."
        )
    spec = parse_spec(text, entry_point=entry_point)
    if entry_point is None and spec.entry_point is None and not _FUNCTION_CUE_RE.search(text):
        raise ConfigError(
            f"The spec {' '.join(text.split())[:60]!r} does not say what function to "
            f"write. Name it and say what it returns, e.g. {_EXAMPLE_SPEC}, or give its "
            "name with --entry-point NAME (entry_point= in Python)."
        )
    return text, spec


def parse_spec(text: str, *, entry_point: str | None = None) -> Spec:
    """Read ``text`` into a ``Spec``. ``entry_point`` overrides the name found in the text."""
    text = text.strip("\n")
    if not text.strip():
        raise ConfigError(
            "The spec is empty. Describe the function you want, e.g. "
            "'Return the median of a list of numbers.'"
        )
    signature = None
    prelude = ""
    name = entry_point
    defs = _DEF_RE.findall(text)
    if defs:
        found = defs[-1] if entry_point is None else entry_point
        name = name or found
        signature = _signature_line(text, name)
        prelude = _prelude(text, name)
    if name is None:
        named = [*_NAMED_RE.finditer(text), *_BACKTICK_CALL_RE.finditer(text)]
        called = [*_WRITE_CALL_RE.finditer(text), *_DOCTEST_CALL_RE.finditer(text)]
        for m in named + [m for m in called if m.group(1) not in _BUILTINS]:
            if m.group(1).lower() not in _STOPWORDS:
                name = m.group(1)
                break
    examples = find_examples(text, name) if name else ()
    return Spec(
        text=text, entry_point=name, signature=signature, examples=examples, prelude=prelude
    )


def _signature_line(text: str, name: str) -> str | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", line):
            sig = line.strip()
            j = i
            # signatures split over several lines
            while not sig.rstrip().endswith(":") and j + 1 < len(lines) and j - i < 10:
                j += 1
                sig += " " + lines[j].strip()
            return sig
    return None


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """A body of only a docstring, ``pass`` or ``...``: a signature to implement."""
    return all(
        isinstance(b, ast.Pass) or (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
        for b in node.body
    )


def _prelude(text: str, name: str | None = None) -> str:
    """What the candidate's module needs besides the function itself: the spec's top-level
    imports and, when the spec is Python, the helpers it implements in full (HumanEval/32's
    ``poly``), in the spec's order."""
    tree = parse_or_none(text)
    if tree is not None:
        parts = []
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                parts.append(ast.get_source_segment(text, node) or "")
            elif (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name != name
                and not _is_stub(node)
            ):
                start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                lines = text.splitlines()[start - 1 : node.end_lineno]
                parts.append("\n".join(lines))
        return "\n".join(p for p in parts if p)
    out = []
    for line in text.splitlines():
        if line.startswith(("def ", "async def ", "class ")):
            break
        if (
            re.match(r"^(from\s+\S+\s+import\s+.+|import\s+.+)$", line.strip())
            and not line[:1].isspace()
        ):
            out.append(line.strip())
    return "\n".join(out)


def header_of(spec: Spec) -> str | None:
    """The code a first answer can complete, as the start of the model's reply: the spec
    itself when it is Python that stubs its function (HumanEval's prompt: imports, helpers, the
    ``def`` line and the docstring); ``def name(`` when the spec is prose that names the
    function; None when it names none."""
    name = spec.entry_point
    if name is None:
        return None
    tree = parse_or_none(spec.text)
    if tree is not None:
        for node in tree.body:
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name == name
                and _is_stub(node)
            ):
                lines = spec.text.splitlines()
                body = node.body[0]
                keep = body.end_lineno if isinstance(body, ast.Expr) else node.lineno
                return "\n".join(lines[: keep or node.lineno]) + "\n"
    return f"def {name}("
