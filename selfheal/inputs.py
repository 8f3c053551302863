"""Text a user hands in: a spec, a test, a file to read, a file to write.

Everything here turns a user's mistake into a :class:`ConfigError` that says what is wrong and
what to do, before any model is asked or any kernel starts: text is decoded strictly as UTF-8
(a problem is reported with its byte offset), a test must parse, a file to read must exist and
be text, a file to write must be writable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from selfheal._parse import ast_parse
from selfheal.errors import ConfigError

_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
_FIX = "Save it as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8 FILE`) and try again."


def _context(raw: bytes, offset: int) -> str:
    """A few readable characters before ``offset``, to find the place."""
    before = raw[max(0, offset - 24) : offset].decode("utf-8", "replace")
    return f" (after {before!r})" if before.strip() else ""


def _utf8(raw: bytes, what: str) -> str:
    """``raw`` decoded, or a ConfigError naming the first bad byte and its offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} is not valid UTF-8: byte 0x{raw[exc.start : exc.start + 1].hex()} at byte "
            f"offset {exc.start}{_context(raw, exc.start)}. {_FIX}"
        ) from None


def _check_bytes(raw: bytes, what: str) -> str:
    for bom, name in _BOMS.items():
        if raw.startswith(bom):
            raise ConfigError(f"{what} is {name} text, not UTF-8. {_FIX}")
    text = _utf8(raw, what)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise ConfigError(
            f"{what} contains a NUL byte at byte offset {nul}{_context(raw, nul)}; it looks "
            f"like binary data or UTF-16. {_FIX}"
        )
    return text.removeprefix("\ufeff")


def decode_text(value: str | bytes, what: str = "the text") -> str:
    """``value`` as text, checked: bytes must be UTF-8; a string must be encodable as UTF-8
    (a command-line argument that was not UTF-8 arrives with surrogate escapes) and hold no
    NUL character. ``what`` names it in the message ("the spec", "test 2", ...)."""
    if isinstance(value, bytes | bytearray):
        return _check_bytes(bytes(value), what)
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be text (a str), not {type(value).__name__}.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # surrogate escapes stand for the original bytes: report the offset in those
        _utf8(
            value.encode("utf-8", "surrogateescape" if _escaped(value) else "surrogatepass"), what
        )
        raise ConfigError(f"{what} cannot be encoded as UTF-8. {_FIX}") from None
    return _check_bytes(value.encode("utf-8"), what)


def _escaped(value: str) -> bool:
    """True if every surrogate in ``value`` is a surrogate escape (U+DC80..U+DCFF)."""
    return all(0xDC80 <= ord(c) <= 0xDCFF for c in value if 0xD800 <= ord(c) <= 0xDFFF)


def read_text_stream(stream: BinaryIO, what: str) -> str:
    """All of a byte stream (stdin) as checked UTF-8 text."""
    try:
        raw = stream.read()
    except OSError as exc:
        raise ConfigError(f"Cannot read {what}: {exc.strerror or exc}.") from None
    return _check_bytes(raw, what)


def read_text_file(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or non-text file is a ConfigError."""
    p = Path(path).expanduser()
    label = f"{what} {str(path)!r}"
    if not p.exists():
        raise ConfigError(f"{label} does not exist. Check the path (relative to {Path.cwd()}).")
    if p.is_dir():
        raise ConfigError(f"{label} is a directory; give a file.")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"Cannot read {label}: {exc.strerror or exc}.") from None
    return _check_bytes(raw, label)


def check_output_path(path: str | os.PathLike[str], what: str) -> Path:
    """Check, before any work, that ``path`` can be written: its directory exists and is
    writable, and it is not a directory itself. Creates nothing."""
    p = Path(path).expanduser()
    label = f"{what} {str(path)!r}"
    if str(path).strip() == "" or p.is_dir():
        raise ConfigError(f"{label} is a directory; give a file name, e.g. {p / 'healed.py'}.")
    parent = p.parent
    if not parent.is_dir():
        raise ConfigError(
            f"Cannot write {label}: the directory {str(parent)!r} does not exist. Create it "
            "first or choose another path."
        )
    if p.exists():
        if not os.access(p, os.W_OK):
            raise ConfigError(f"Cannot write {label}: permission denied. Choose another path.")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"Cannot write {label}: the directory {str(parent)!r} is not writable. Choose "
            "another path."
        )
    return p


def check_python(code: str, what: str) -> str:
    """``code`` if it is valid Python; otherwise a ConfigError naming the line and column."""
    code = decode_text(code, what)
    if not code.strip():
        raise ConfigError(f"{what} is empty; write an assertion, e.g. `assert f(2) == 4`.")
    try:
        ast_parse(code)
    except SyntaxError as exc:
        where = f"line {exc.lineno}, column {exc.offset}" if exc.lineno else "somewhere"
        raise ConfigError(
            f"{what} is not valid Python ({exc.msg}, {where}): {code.strip()[:80]!r}. Fix it "
            "or leave it out: a test that cannot run could never pass."
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ConfigError(
            f"{what} cannot be parsed as Python ({type(exc).__name__}): {code.strip()[:80]!r}. "
            "Simplify it or leave it out."
        ) from None
    return code
