"""Kernel side: copies of the harness objects a candidate can hold (the comparison helpers, the
alarm handler, the class of ``sys.stdout``) whose globals lead to no harness state, made at
warm-up (docs/sandbox.md). Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import types as _types
from typing import Any

_FunctionType = _types.FunctionType
_CellType = _types.CellType
_INERT = (int, float, str, bytes, bool, type(None))


def seal(fns: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Copies of the functions ``fns`` (and of every function among their default
    arguments) whose globals and builtins are empty: they must read no global name (every
    name they use is a default argument). A parameter named ``_me`` gets the copy itself
    (recursion); one named in ``defaults`` gets that value."""
    memo: dict[int, Any] = {}

    def copy(fn: Any) -> Any:
        done = memo.get(id(fn))
        if done is not None:
            return done
        if fn.__closure__ is not None or fn.__kwdefaults__:
            raise TypeError(f"{fn.__name__} cannot be sealed: it has a closure or keyword defaults")
        new = _FunctionType(fn.__code__, {"__builtins__": {}}, fn.__name__)
        memo[id(fn)] = new
        code = fn.__code__
        names = code.co_varnames[: code.co_argcount]
        values = list(fn.__defaults__ or ())
        first = len(names) - len(values)
        for i, d in enumerate(values):
            name = names[first + i]
            if name == "_me":
                d = new
            elif name in defaults:
                d = defaults[name]
            elif type(d) is _FunctionType:
                d = copy(d)
            values[i] = d
        new.__defaults__ = tuple(values)
        new.__doc__ = fn.__doc__
        return new

    return {name: copy(fn) for name, fn in fns.items()}


def _inert(v: Any) -> bool:
    t = type(v)
    if any(t is k for k in _INERT):
        return True
    if t is tuple or t is frozenset:
        return all(_inert(x) for x in v)
    return False


def _global_names(code: Any, out: set[str]) -> set[str]:
    out.update(code.co_names)
    for k in code.co_consts:
        if type(k) is _types.CodeType:
            _global_names(k, out)
    return out


def detach_class(
    cls: Any, bases: tuple[Any, ...], ns: dict[str, Any], clean: dict[str, Any]
) -> Any:
    """A copy of the harness class ``cls`` (with ``bases``) whose methods' globals are a dict
    of their own: a private copy of the builtins ``clean`` and the constants of ``ns``
    (numbers, strings, tuples of them) that the methods name. A candidate that changes that
    dict changes only how this class behaves."""
    own: dict[str, Any] = {"__builtins__": dict(clean), "__name__": "__sh_detached__"}
    items = [(k, v) for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")]
    new = type(cls.__name__, bases, {k: v for k, v in items if type(v) is not _FunctionType})
    for k, v in items:
        if type(v) is not _FunctionType:
            continue
        for name in _global_names(v.__code__, set()):
            if name in ns and name not in own and _inert(ns[name]):
                own[name] = ns[name]
        closure = None
        if v.__closure__ is not None:
            if v.__code__.co_freevars != ("__class__",):
                raise TypeError(f"{cls.__name__}.{k} cannot be detached: it has a closure")
            closure = (_CellType(new),)
        fn = _FunctionType(v.__code__, own, v.__name__, v.__defaults__, closure)
        fn.__kwdefaults__ = v.__kwdefaults__
        fn.__qualname__ = v.__qualname__
        fn.__doc__ = v.__doc__
        setattr(new, k, fn)
    new.__qualname__ = cls.__qualname__
    return new
