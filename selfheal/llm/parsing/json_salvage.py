"""Records from what small models actually send: JSON inside prose or code fences, single
quotes, trailing commas, invalid escapes, raw newlines, a truncated tail, near-miss types.

:func:`parse_structured` finds the candidate objects of a reply, reads each as JSON
(``pydantic_core.from_json``; ``allow_partial`` closes a truncated one), then after text fixes,
then as a Python literal, validates it (:mod:`.shapes`), and records every repair it made.

Salvage never invents a value: a truncated reply is closed only where what is missing is
closing brackets, after a complete value or a comma. A key, a string or a number cut off at
the end (it may have been longer) is dropped with its list item when the list already holds a
complete item, and is otherwise a failure.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic_core import from_json

from selfheal._parse import literal
from selfheal._record import Record
from selfheal.errors import MalformedReply
from selfheal.llm.parsing.code_extract import fences, strip_thinking
from selfheal.llm.parsing.shapes import validate_shape

T = TypeVar("T", bound=BaseModel)

CUT_OFF = (
    "the JSON object is cut off at the end, inside a key, a string value or a number; "
    "it cannot be completed without guessing"
)
"""The problem reported for a truncated reply that cannot be closed safely."""

_MAX_CANDIDATES = 24


class StructuredParseError(MalformedReply):
    """No JSON object matching the expected model could be salvaged from a reply.

    ``errors`` is the last validation or parse error, in the words shown to the model on a
    retry; ``raw`` is the reply."""

    def __init__(self, message: str, *, errors: str, raw: str = "") -> None:
        self.errors = errors
        super().__init__(message, raw=raw)


class Parsed(Record, Generic[T]):
    """A value salvaged from a model's reply, and what salvage it took."""

    value: T
    """The validated value."""
    degraded: bool = False
    """True when any salvage was needed (the reply was not clean JSON of the right shape)."""
    repairs: tuple[str, ...] = ()
    """What was done to the reply, in order, e.g. ``"extracted from code fence"``."""


@dataclass
class _Frame:
    """One open bracket while scanning: which, what comes next, and (for lists) where the
    last complete item ends."""

    bracket: str
    state: str  # object: key, colon, value, after; list: value, after
    sep: int  # list: index of the "[" or of the last "," at this depth


@dataclass(frozen=True)
class _Scan:
    """What :func:`_scan` found from one opening bracket."""

    text: str
    """Up to the matching bracket; when the text ends first, the rest of the text."""
    complete: bool
    """Whether the matching bracket was found."""
    prefix: str | None = None
    """Truncated: the text up to the last point where closing is safe (None: nowhere)."""
    closing: str = ""
    """Truncated: the brackets that close ``prefix``."""
    dropped: bool = False
    """Truncated: a cut-off last list item was left out of ``prefix``."""


_LITERALS = frozenset({"true", "false", "null", "True", "False", "None"})


def _string_end(text: str, i: int) -> int | None:
    """The index of the quote that closes the string opening at ``text[i]`` (backslash
    escapes skipped), or None when the text ends inside it."""
    quote = text[i]
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i
        else:
            i += 1
    return None


def _scan(text: str, start: int) -> _Scan:
    """From the ``{`` (or ``[``) at ``start``, find the balanced object (or array), or where a
    truncated one can be closed without inventing a value. Both quote styles are understood,
    so Python-literal dicts scan correctly too."""
    frames: list[_Frame] = []
    in_string = False
    literal = ""
    i = start
    while i < len(text):
        ch = text[i]
        if ch in " \t\r\n":
            literal = ""
        elif ch in "\"'":
            is_key = bool(frames) and frames[-1].bracket == "{" and frames[-1].state == "key"
            end = _string_end(text, i)
            if end is None:
                in_string = True
                break
            if frames:
                frames[-1].state = "colon" if is_key else "after"
            literal, i = "", end
        elif ch in "{[":
            frames.append(_Frame(ch, "key" if ch == "{" else "value", i))
            literal = ""
        elif ch in "}]":
            if not frames:
                return _Scan(text[start:i], False)
            frames.pop()
            literal = ""
            if not frames:
                return _Scan(text[start : i + 1], True)
            frames[-1].state = "after"
        elif ch == ":":
            if frames and frames[-1].bracket == "{":
                frames[-1].state = "value"
            literal = ""
        elif ch == ",":
            if frames:
                top = frames[-1]
                top.state = "key" if top.bracket == "{" else "value"
                if top.bracket == "[":
                    top.sep = i
            literal = ""
        else:
            literal += ch
            if frames:
                frames[-1].state = "after"
        i += 1
    rest = text[start:]
    if not frames:
        return _Scan(rest, False)
    # The text ended inside the object: where is closing it safe?
    cut_value = in_string or (bool(literal) and literal not in _LITERALS)
    dangling_key = frames[-1].bracket == "{" and frames[-1].state in {"colon", "value"}
    keep, body, dropped = frames, rest, False
    if cut_value or dangling_key:
        lists = [k for k, f in enumerate(frames) if f.bracket == "["]
        if not lists or text[frames[lists[-1]].sep] == "[":
            return _Scan(rest, False)  # nothing complete would be left
        k = lists[-1]
        body, keep, dropped = text[start : frames[k].sep], frames[: k + 1], True
    closing = "".join("}" if f.bracket == "{" else "]" for f in reversed(keep))
    return _Scan(rest, False, body.rstrip().removesuffix(","), closing, dropped)


@dataclass(frozen=True)
class _Candidate:
    """One object text to try."""

    text: str
    repairs: tuple[str, ...]
    problem: str = ""
    """A known reason it cannot work (empty when it may)."""
    closing: str | None = None
    """Not None for a truncated object: ``text`` is its safe prefix, this closes it."""


def _candidates(text: str) -> list[_Candidate]:
    """Object texts to try, best first."""
    out: list[_Candidate] = []
    seen: set[str] = set()

    def add(candidate: _Candidate) -> None:
        if candidate.text not in seen:
            seen.add(candidate.text)
            out.append(candidate)

    def scanned(scan: _Scan, repairs: tuple[str, ...]) -> _Candidate:
        if scan.complete:
            return _Candidate(scan.text, repairs)
        if scan.prefix is None:
            return _Candidate(scan.text, repairs, CUT_OFF)
        cut = ("dropped the cut-off last list item",) if scan.dropped else ()
        return _Candidate(
            scan.prefix, (*repairs, *cut, "closed truncated object"), "", scan.closing
        )

    cleaned = strip_thinking(text).strip()
    pre: tuple[str, ...] = ("removed <think> block",) if cleaned != text.strip() else ()
    if cleaned.startswith("{") and cleaned.endswith("}"):
        add(_Candidate(cleaned, pre))
    found = fences(cleaned)
    # JSON-tagged fences first, then untagged ones, then any other fence.
    rank = {"json": 0, "json5": 0, "jsonc": 0, "": 1}
    ordered = sorted(found, key=lambda f: rank.get(f.lang, 2))  # stable: in order within a rank
    sources = [(f.body, (*pre, "extracted from code fence")) for f in ordered]
    sources.append((cleaned, pre))
    for source, repairs in sources:
        resume = 0
        for match in re.finditer(r"\{", source):
            start = match.start()
            if start < resume or len(out) >= _MAX_CANDIDATES:
                continue
            scan = _scan(source, start)
            around = source[:start].strip() or source[start + len(scan.text) :].strip()
            note = (*repairs, "extracted from surrounding prose") if around else repairs
            add(scanned(scan, note))
            if scan.complete:
                resume = start + len(scan.text)  # objects nested in it are not answers
    # A bare JSON array (some small models answer a one-list record with just the list).
    for source, repairs in sources:
        body = source.strip()
        if body.startswith("["):
            candidate = scanned(_scan(body, 0), repairs)
            if not candidate.problem:
                add(candidate)
    return out


def _rewrite(
    text: str,
    *,
    inside: Callable[[str], str] | None = None,
    outside: Callable[[str], str] | None = None,
    quotes: str = "\"'",
) -> str:
    """``text`` with its strings (quotes included) passed through ``inside`` and the rest
    through ``outside``; ``quotes`` are the characters that open a string."""

    def apply(fn: Callable[[str], str] | None, piece: str) -> str:
        return fn(piece) if fn else piece

    out: list[str] = []
    at = i = 0
    while i < len(text):
        if text[i] in quotes:
            out.append(apply(outside, text[at:i]))
            end = _string_end(text, i)
            end = len(text) - 1 if end is None else end  # an unterminated string runs to the end
            out.append(apply(inside, text[i : end + 1]))
            at = i = end + 1
        else:
            i += 1
    out.append(apply(outside, text[at:]))
    return "".join(out)


_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_VALID_ESCAPES = frozenset('"\\/bfnrtu')
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}


def _escape_controls(text: str) -> str:
    """Raw control characters inside JSON strings (a newline in a string) escaped."""
    return _rewrite(
        text,
        inside=lambda s: re.sub(
            r"[\x00-\x1f]", lambda m: _CONTROL.get(m.group(), f"\\u{ord(m.group()):04x}"), s
        ),
        quotes='"',
    )


def _fix_invalid_escapes(text: str) -> str:
    """Backslashes that do not start a valid JSON escape (``"\\d"`` in a regex) doubled."""
    return _rewrite(
        text,
        inside=lambda s: re.sub(
            r"\\(.?)",
            lambda m: m.group() if m.group(1) in _VALID_ESCAPES else "\\\\" + m.group(1),
            s,
            flags=re.DOTALL,
        ),
        quotes='"',
    )


def _remove_trailing_commas(text: str) -> str:
    """Commas that directly precede a closing bracket dropped, outside strings."""
    return _rewrite(text, outside=lambda s: re.sub(r",(\s*[}\]])", r"\1", s))


def _json_words_to_python(text: str) -> str:
    """JSON's ``true``/``false``/``null`` as Python names, outside strings."""
    return _rewrite(
        text, outside=lambda s: re.sub(r"[A-Za-z_]+", lambda m: _JSON_WORDS.get(m[0], m[0]), s)
    )


def _load(candidate: _Candidate) -> tuple[Any, tuple[str, ...]] | str:
    """Parse one candidate, applying text repairs in order. Returns the object and the
    repairs, or the first parse error as text."""
    partial = candidate.closing is not None

    def read(text: str) -> Any:
        return from_json(text, allow_partial=partial)

    try:
        return read(candidate.text), ()
    except ValueError as exc:
        error = f"invalid JSON: {exc}"
    attempts: list[tuple[str, tuple[str, ...]]] = [
        (_escape_controls(candidate.text), ("allowed raw control characters",))
    ]
    text, repairs = candidate.text, tuple[str, ...]()
    for name, fix in (
        ("fixed invalid escapes", _fix_invalid_escapes),
        ("removed trailing commas", _remove_trailing_commas),
    ):
        fixed = fix(text)
        if fixed != text:
            text, repairs = fixed, (*repairs, name)
            attempts.append((_escape_controls(text), repairs))
    for text, repairs in attempts:
        if text != candidate.text:
            with contextlib.suppress(ValueError):
                return read(text), repairs
    closed = candidate.text + (candidate.closing or "")
    for source in (closed, _json_words_to_python(closed)):
        try:
            value = literal(source)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value, ("read as a Python literal",)
    return error


def parse_structured(text: str, model: type[T]) -> Parsed[T]:
    """Salvage a ``model`` from a model's reply.

    Tries, in order: the reply as it is; JSON in code fences (```json first); the first
    balanced object inside prose; a truncated object closed where only closing brackets are
    missing. Each is read as JSON, then with raw control characters, invalid escapes and
    trailing commas fixed, then as a Python literal (single quotes, ``True``/``None``). The
    result is validated strictly, then after near-miss fixes (:mod:`.shapes`), then laxly.

    Raises :class:`StructuredParseError` with the most telling error when nothing validates.
    """
    errors: list[str] = []
    for candidate in _candidates(text):
        if candidate.problem:
            errors.append(candidate.problem)
            continue
        loaded = _load(candidate)
        if isinstance(loaded, str):
            errors.append(loaded)
            continue
        obj, text_repairs = loaded
        checked = validate_shape(obj, model)
        if isinstance(checked, str):
            errors.append(f"does not match {model.__name__}: {checked}")
            continue
        value, shape_repairs = checked
        repairs = (*candidate.repairs, *text_repairs, *shape_repairs)
        return Parsed(value=value, degraded=bool(repairs), repairs=repairs)
    if not errors:
        errors.append("no JSON object found in the reply")
    # The most informative error is a validation error, if any candidate parsed.
    detail = next(
        (e for e in errors if e.startswith("does not match")),
        next((e for e in errors if e == CUT_OFF), errors[0]),
    )
    raise StructuredParseError(
        f"Could not read a {model.__name__} from the model's reply ({detail}). "
        "Retry with a larger model or a lower temperature, or inspect `.raw`.",
        errors=detail,
        raw=text,
    )
