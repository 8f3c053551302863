"""Kernel side: capped output capture, exception descriptions trimmed to the candidate's
and the test's frames, and ``clip``, the cap on every string that comes from the candidate
(the host clips again what it reads: ``_run.py``). Shipped to the kernel as source (see
``_harness/__init__.py``)."""

from __future__ import annotations

from traceback import extract_tb as _extract_tb
from traceback import format_list as _format_list
from typing import Any

NAME_CAP = 200
"""Characters kept of a name that comes from the candidate (an exception's type name)."""
MESSAGE_CAP = 4000
"""Characters kept of an exception's message."""
TRACEBACK_CAP = 16000
"""Characters kept of a trimmed traceback (its start and its end)."""
_real_name = type.__dict__["__name__"].__get__  # a type's own name, never a metaclass's


def clip(s: Any, n: int, tail: int = 0) -> str:
    """``s`` as a plain ``str`` of at most ``n`` characters: a longer one keeps its start
    (and its last ``tail`` characters) around a marker that says how long it was. What
    ``clip`` returns is clipped already (clipping twice changes nothing)."""
    if type(s) is not str:
        try:  # a str subclass: its own methods never run
            s = str.__str__(s)
        except BaseException:
            s = "<not a string>"
    if len(s) <= n:
        return s
    mark = f"...<cut: {len(s)} characters>..."
    keep = max(0, n - len(mark))
    end = min(tail, keep)
    return s[: keep - end] + mark + (s[len(s) - end :] if end else "")


class Cap:
    """A stand-in for ``sys.stdout``/``sys.stderr`` keeping at most ``limit`` characters."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.n = 0
        self.limit = limit
        self.truncated = False

    def write(self, s: Any) -> int:
        if type(s) is not str:
            try:
                s = str(s)
            except BaseException:
                return 0
        n = len(s)
        if self.n < self.limit:
            take = s[: self.limit - self.n]
            self.parts.append(take)
            self.n += len(take)
            if len(take) < n:
                self.truncated = True
        elif n:
            self.truncated = True
        return n

    def writelines(self, lines: Any) -> None:
        for x in lines:
            self.write(x)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        return "".join(self.parts)


class NullOut(Cap):
    """Where stray output goes outside a test in a forked candidate process (the kernel's
    own streams talk to ZeroMQ sockets the candidate process must not touch)."""

    def __init__(self) -> None:
        super().__init__(0)


_REFUSED = frozenset({1, 13, 30})  # EPERM, EACCES, EROFS
_REFUSED_NOTE = (
    " (the sandbox refuses this: a candidate reads only its own folder, the Python "
    "installation and the system's libraries, writes only in its folder, starts no program)"
)


def describe(e: BaseException) -> tuple[str, str, str, int | None]:
    """(type name, message, trimmed traceback, candidate line)."""
    tn = clip(_real_name(type(e)), NAME_CAP)
    try:
        msg = clip(str(e), MESSAGE_CAP)
    except BaseException:
        msg = "<str() of the exception failed>"
    try:  # the operating system's boundary said no (the audit hook's words say so already)
        if isinstance(e, OSError) and e.errno in _REFUSED and not msg.startswith("sandbox:"):
            msg += _REFUSED_NOTE
    except BaseException:
        pass
    line = None
    lines: list[str] = []
    try:
        frames = [
            f
            for f in _extract_tb(e.__traceback__)
            if f.filename == "<candidate>" or f.filename.startswith("<test ")
        ]
        for f in frames:
            if f.filename == "<candidate>":
                line = f.lineno
        lines = _format_list(frames[-30:])
    except BaseException:
        pass
    if isinstance(e, SyntaxError):
        line = getattr(e, "lineno", line)
    tb = "Traceback (most recent call last):\n" + "".join(lines) if lines else ""
    tb = clip(tb + f"{tn}: {msg}", TRACEBACK_CAP, TRACEBACK_CAP // 2)
    return tn, msg, tb, line
