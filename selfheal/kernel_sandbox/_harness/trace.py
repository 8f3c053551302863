"""Kernel side: a line-level trace of the candidate while one test runs (``trace_failure``;
docs/sandbox.md, "Traces"), each step a plain tuple (``TraceStep`` on the host). Shipped to
the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import collections as _collections
import sys as _sysmod
import types as _types
from typing import Any

_settrace = _sysmod.settrace
_gettrace = _sysmod.gettrace
_FrameType = _types.FrameType
_CodeType = _types.CodeType
_deque = _collections.deque
_type_name = type.__dict__["__name__"].__get__
_type_module = type.__dict__["__module__"].__get__
_exc_args = BaseException.__dict__["args"].__get__
_NoneType = type(None)
_FunctionType = _types.FunctionType
_TR_SCALARS = (int, float, complex, bool, _NoneType)
_TR_TEXTS = (str, bytes, bytearray)
_TR_CONTAINERS = (dict, list, tuple, set, frozenset)
_TR_BASES = (dict, list, tuple, set, frozenset, str, bytes, int, float)
_TR_HIDDEN = (
    _types.FunctionType,
    _types.BuiltinFunctionType,
    _types.ModuleType,
    _types.MethodType,
    type,
)
_TR_BIG_INT = 1 << 200


def code_objects(co: Any) -> dict[int, Any]:
    """``id -> code object`` for ``co`` and every code object nested in it (functions,
    lambdas, comprehensions, classes' bodies), found through ``co_consts``."""
    found: dict[int, Any] = {}
    stack = [co]
    while stack:
        c = stack.pop()
        if id(c) in found:
            continue
        found[id(c)] = c
        for k in c.co_consts:
            if type(k) is _CodeType:
                stack.append(k)
    return found


def one_of(t: Any, kinds: tuple[Any, ...]) -> bool:
    """``t`` is one of ``kinds``, by identity (``t in kinds`` would ask the metaclass of a
    candidate's type, which can answer anything)."""
    return any(k is t for k in kinds)


def brief(v: Any, limit: int = 60) -> str:
    """A repr of at most ``limit`` characters that runs no candidate code (see the module
    docstring); a cut value ends with ``…``."""
    out: list[str] = []
    _brief(v, out, [limit + 1], 0)
    text = "".join(out)
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def _base_of(t: Any) -> Any:
    for b in _TR_BASES:
        if issubclass(t, b):
            return b
    return None


def _brief(v: Any, out: list[str], budget: list[int], depth: int) -> None:
    t = type(v)
    if one_of(t, _TR_SCALARS):
        if t is int and (v >= _TR_BIG_INT or v <= -_TR_BIG_INT):
            text = f"<int of {v.bit_length()} bits>"
        else:
            text = repr(v)
    elif one_of(t, _TR_TEXTS):
        n = budget[0]
        text = repr(v[:n]) + ("…" if len(v) > n else "")
    elif t is range:
        text = repr(v)
    elif one_of(t, _TR_CONTAINERS):
        _container(v, t, "", out, budget, depth)
        return
    else:
        base = _base_of(t)
        name = _type_name(t)
        if base is None:
            text = f"<{name}>"
        elif one_of(base, _TR_CONTAINERS):
            out.append(name + "(")
            budget[0] -= len(name) + 2
            _container(v, base, name, out, budget, depth)
            out.append(")")
            return
        elif base is int or base is float:  # read through the builtin type
            text = f"{name}({base.__repr__(v)})"
        else:
            text = f"{name}({base.__repr__(base.__getitem__(v, slice(0, 40)))})"
    out.append(text)
    budget[0] -= len(text)


def _container(v: Any, base: Any, name: str, out: list[str], budget: list[int], depth: int) -> None:
    opening, closing = {
        dict: ("{", "}"),
        list: ("[", "]"),
        tuple: ("(", ")"),
        set: ("{", "}"),
        frozenset: ("frozenset({", "})"),
    }[base]
    size = base.__len__(v)
    if base is set and size == 0:
        opening, closing = "set(", ")"
    if depth >= 6:
        text = f"{opening}…{size} items{closing}"
        out.append(text)
        budget[0] -= len(text)
        return
    out.append(opening)
    budget[0] -= len(opening)
    items = dict.items(v) if base is dict else base.__iter__(v)
    for shown, item in enumerate(items):
        if budget[0] <= 0:
            out.append(f"… {size} items")
            break
        if shown:
            out.append(", ")
            budget[0] -= 2
        if base is dict:
            _brief(item[0], out, budget, depth + 1)
            out.append(": ")
            budget[0] -= 2
            _brief(item[1], out, budget, depth + 1)
        else:
            _brief(item, out, budget, depth + 1)
    if base is tuple and size == 1:
        out.append(",")
    out.append(closing)
    budget[0] -= len(closing)


class Tracer:
    """The trace of one test (see the module docstring). ``global_`` is what
    ``sys.settrace`` gets; ``result()`` the steps for the host."""

    def __init__(
        self,
        codes: dict[int, Any],
        head: int = 100,
        tail: int = 200,
        value_chars: int = 60,
        max_values: int = 8,
        max_total: int = 200_000,
    ) -> None:
        self.codes = codes
        self.head_max = head
        self.head: list[tuple[Any, ...]] = []
        self.tail: Any = _deque(maxlen=tail)
        self.value_chars = value_chars
        self.max_values = max_values
        self.max_total = max_total
        self.total = 0
        self.serial = 0
        self.depth = 0
        self.stopped = False
        self.frames: dict[int, list[Any]] = {}
        self.notes: list[str] = []
        self.hook = self.global_  # one bound method: what sys.gettrace must give back
        self.off = False  # the tracer was no longer installed when the test ended

    def add(self, step: tuple[Any, ...]) -> None:
        self.total += 1
        if len(self.head) < self.head_max:
            self.head.append(step)
        else:
            self.tail.append(step)
        if self.total >= self.max_total and not self.stopped:
            self.stopped = True
            self.notes.append(f"tracing stopped after {self.total} steps; the test ran on untraced")

    def changes(self, frame: Any, seen: dict[str, tuple[Any, str]]) -> tuple[Any, ...]:
        """The locals of ``frame`` whose shown value changed since ``seen`` (updated)."""
        out: list[tuple[str, str]] = []
        extra = 0
        f_locals = frame.f_locals
        pairs = dict.items(f_locals) if type(f_locals) is dict else f_locals.items()
        for name, v in pairs:
            if type(name) is not str or name[:2] == "__" or one_of(type(v), _TR_HIDDEN):
                continue
            old = seen.get(name)
            if old is not None and old[0] is v and one_of(type(v), _TR_SCALARS):
                continue
            text = brief(v, self.value_chars)
            if old is not None and old[1] == text:
                continue
            seen[name] = (v, text)
            if len(out) < self.max_values:
                out.append((name, text))
            else:
                extra += 1
        if extra:
            out.append(("…", f"{extra} more"))
        return tuple(out)

    def global_(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "call" or self.stopped or type(frame) is not _FrameType:
            return None
        try:
            return self._enter(frame)
        except Exception as e:  # a fault of the tracer must not change the test
            return self._fault(e)

    def _fault(self, e: BaseException) -> None:
        self.stopped = True
        self.notes.append(f"the tracer stopped on {_type_name(type(e))}")

    def _enter(self, frame: Any) -> Any:
        code: Any = frame.f_code
        if self.codes.get(id(code)) is not code:
            return None
        self.serial += 1
        self.depth += 1
        seen: dict[str, tuple[Any, str]] = {}
        rec = [self.serial, self.depth, seen, "call"]
        self.frames[id(frame)] = rec
        args = self.changes(frame, seen)
        self.add(("call", rec[0], rec[1], frame.f_code.co_name, frame.f_lineno, args, ""))
        return self.local

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        rec = self.frames.get(id(frame))
        if rec is None or type(frame) is not _FrameType:
            return None
        try:
            return self._step(frame, event, arg, rec)
        except Exception as e:
            return self._fault(e)

    def _step(self, frame: Any, event: str, arg: Any, rec: list[Any]) -> Any:
        name = frame.f_code.co_name
        line = frame.f_lineno
        if event == "line":
            if self.stopped:
                return None
            self.add(("line", rec[0], rec[1], name, line, self.changes(frame, rec[2]), ""))
        elif event == "exception":
            exc = arg[1] if type(arg) is tuple and len(arg) == 3 else None
            rec[4:] = [exc_text(exc, self.value_chars)]
            if not self.stopped:
                self.add(("exception", rec[0], rec[1], name, line, (), rec[4]))
        elif event == "return":
            del self.frames[id(frame)]
            self.depth -= 1
            if not self.stopped:
                changed = self.changes(frame, rec[2])
                if rec[3] == "exception" and arg is None:
                    self.add(("raise", rec[0], rec[1], name, line, changed, rec[4]))
                else:
                    value = brief(arg, self.value_chars)
                    self.add(("return", rec[0], rec[1], name, line, changed, value))
            return None
        rec[3] = event
        return self.local

    def result(self) -> tuple[Any, ...]:
        """``("trace", steps, total, omitted, notes, head)``: the value sent to the host;
        the ``omitted`` steps not kept were after the first ``head``."""
        steps = tuple(self.head) + tuple(self.tail)
        omitted = self.total - len(steps)
        return ("trace", steps, self.total, omitted, tuple(self.notes), len(self.head))


def exc_text(exc: Any, limit: int) -> str:
    """``Type: args`` of an exception, without running candidate code (the arguments of
    a builtin exception shown like any value; only the type of a candidate's own)."""
    if exc is None:
        return "?"
    t = type(exc)
    name = _type_name(t)
    module = _type_module(t)
    if type(module) is not str or module != "builtins":
        return name
    args = _exc_args(exc)
    if type(args) is tuple and len(args) == 1:
        arg = args[0]
        shown = arg[:limit] if type(arg) is str else brief(arg, limit)
        return f"{name}: {shown}"
    return f"{name}: {brief(args, limit)}" if args else name


def refuse(
    func: Any = None,
    _what: str = "sys.settrace",
    _audit: Any = _sysmod.audit,
    _PermissionError: Any = PermissionError,
) -> None:
    """What ``sys.settrace``, ``sys.setprofile`` and their ``threading`` twins are in every
    run (``hide_tracer``): the attempt goes to the audit hook (``guard.audit`` notes and
    refuses it). Copies of it are sealed: no globals, no closure, no harness state."""
    _audit("selfheal.refused", _what)
    raise _PermissionError(f"sandbox: {_what} is blocked in the sandbox")


def hide_tracer() -> None:
    """For every run, before the candidate loads: ``sys.gettrace`` gives None, and
    ``sys.settrace`` / ``sys.setprofile`` and ``threading``'s ``settrace`` / ``setprofile``
    (through which a tracer could be replaced, or a tracer or profiler handed the harness's
    frames) refuse. ``guard.audit`` refuses ``sys.setprofile`` from C too (``cProfile``)."""
    places = [(_sysmod, "sys", ("settrace", "setprofile"))]
    threading = _sysmod.modules.get("threading")
    if threading is not None:
        places.append((threading, "threading", ("settrace", "setprofile")))
    # Python 3.12+: the same for every thread at once
    places.append((_sysmod, "sys", ("_settraceallthreads", "_setprofileallthreads")))
    if threading is not None:
        places.append((threading, "threading", ("settrace_all_threads", "setprofile_all_threads")))
    for module, prefix, names in places:
        for name in names:
            if name in vars(module):
                what = f"{prefix}.{name}"
                fn = _FunctionType(refuse.__code__, {"__builtins__": {}}, name)
                fn.__defaults__ = (None, what, _sysmod.audit, PermissionError)
                setattr(module, name, fn)
    _sysmod.gettrace = _NoneType


def traced(g: Any, tracer: Tracer, fn: Any) -> None:
    """Run ``fn`` with ``tracer`` on: while it runs the guard refuses frame introspection
    (``g.tracing``) and, with ``hide_tracer``, candidate code can neither switch the tracer
    off nor reach it."""
    _settrace(tracer.hook)
    g.tracing = True
    try:
        fn()
    finally:
        g.tracing = False
        tracer.off = _gettrace() is not tracer.hook and not tracer.stopped
        _settrace(None)
