"""Kernel side: your tests in pytest's form (docs/sandbox.md, "Your tests in pytest's form").
``pytest_item("collect", text)`` (``pytest_collect.py``) prints pytest's collection as one
JSON line; ``pytest_item("run", names, cls, func, k)`` runs one item with parameter set ``k``
in a test's namespace, fixtures resolved and torn down. Shipped to the kernel as source."""

from __future__ import annotations

import sys as _pt_sys
from typing import Any

_PT: dict[str, Any] = {}
"""Filled by ``pt_install``: the pytest module and the snapshots of what tests rely on."""
_PT_MODULES = (
    "pytest",
    "_pytest.approx",
    "_pytest.raises",
    "_pytest.monkeypatch",
    "_pytest.outcomes",
    "_pytest.fixtures",
    "_pytest.mark.structures",
)
_PT_FILE = "test_your_tests.py"


def pt_install(approx_eq: dict[Any, Any]) -> None:
    """At warm-up, before any candidate: import pytest and snapshot its modules and classes
    (a candidate that patches them fails the item); fill ``approx_eq`` with the ``__eq__`` of
    pytest's approx classes so ``cmp`` may compare a plain value with ``pytest.approx``."""
    import importlib

    try:
        mods = [importlib.import_module(m) for m in _PT_MODULES]
    except Exception:  # pytest missing: pytest-form tests report it when they run
        return
    classes = {
        v
        for m in mods
        for v in vars(m).values()
        if isinstance(v, type) and str(getattr(v, "__module__", "")).startswith("_pytest")
    }
    for c in classes:
        if c.__name__.startswith("Approx"):
            approx_eq[c] = c.__eq__
    _PT["pytest"] = mods[0]
    _PT["mods"] = [(name, m, dict(vars(m))) for name, m in zip(_PT_MODULES, mods, strict=True)]
    _PT["classes"] = [(c, dict(vars(c))) for c in classes]
    _PT["fixture_def"] = getattr(mods[5], "FixtureFunctionDefinition", None)
    _PT["param_set"] = getattr(mods[6], "ParameterSet", None)


def pt_tampered() -> str | None:
    """What the candidate changed in pytest since warm-up, or None."""
    for name, m, saved in _PT.get("mods", ()):
        if _pt_sys.modules.get(name) is not m:
            return f"the candidate replaced the module {name}"
        d = vars(m)
        if len(d) != len(saved) or any(d.get(k, d) is not v for k, v in saved.items()):
            return f"the candidate edited the module {name}"
    for c, saved in _PT.get("classes", ()):
        d = vars(c)
        if len(d) != len(saved) or any(d.get(k, d) is not v for k, v in saved.items()):
            return f"the candidate edited pytest's {c.__name__}"
    return None


def pt_fixture(v: Any) -> tuple[Any, Any] | None:
    """``(marker, function)`` if ``v`` is a fixture definition (pytest 8.4+ or earlier)."""
    fdef = _PT.get("fixture_def")
    if fdef is not None and isinstance(v, fdef):
        return v._fixture_function_marker, v._get_wrapped_function()
    marker = getattr(v, "_pytestfixturefunction", None)
    if marker is not None and callable(v):
        return marker, v
    return None


def pt_fixtures(names: dict[str, Any], cls: Any) -> dict[str, tuple[Any, Any, bool]]:
    """The file's fixtures by name: ``(marker, function, defined in the class)``."""
    out: dict[str, tuple[Any, Any, bool]] = {}
    sources = [(names, False)]
    if cls is not None:
        sources.append((dict(vars(cls)), True))
    for src, in_class in sources:
        for key, v in list(src.items()):
            found = pt_fixture(v)
            if found is not None:
                out[found[0].name or key] = (found[0], found[1], in_class)
    return out


def pt_argnames(fn: Any, skip_self: bool) -> list[str]:
    """The names a function asks pytest for: parameters without defaults."""
    import inspect

    params = list(inspect.signature(fn).parameters.values())
    if skip_self and params:
        params = params[1:]
    return [
        p.name
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def pt_marks(obj: Any) -> list[Any]:
    marks = getattr(obj, "pytestmark", [])
    return list(marks) if isinstance(marks, list | tuple) else [marks]


def pt_combos(names: dict[str, Any], cls: Any, func: Any) -> list[dict[str, Any]]:
    """Every parameter set of ``func``: the product of its ``parametrize`` marks (function,
    class, module) and of the ``params`` of the fixtures it uses. The same order every time,
    so an index found at collection names the same set in every candidate's run."""
    param_set = _PT.get("param_set")
    marks = pt_marks(func) + (pt_marks(cls) if cls is not None else [])
    marks += pt_marks(_PtMarks(names.get("pytestmark", [])))
    axes: list[list[dict[str, Any]]] = []
    direct: set[str] = set()
    for m in marks:
        if getattr(m, "name", None) != "parametrize":
            continue
        argnames = m.args[0] if m.args else m.kwargs["argnames"]
        argvalues = m.args[1] if len(m.args) > 1 else m.kwargs["argvalues"]
        if m.kwargs.get("indirect"):
            raise NotImplementedError("indirect parametrization is not supported")
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",") if a.strip()]
        argnames = list(argnames)
        axis = []
        for v in argvalues:
            if param_set is not None and isinstance(v, param_set):
                vals = tuple(v.values)
            else:
                vals = (v,) if len(argnames) == 1 else tuple(v)
            axis.append(dict(zip(argnames, vals, strict=True)))
        axes.append(axis)
        direct.update(argnames)
    fixtures = pt_fixtures(names, cls)
    wanted = pt_argnames(func, cls is not None)
    wanted += [n for n, f in fixtures.items() if f[0].autouse]
    seen: set[str] = set()
    while wanted:
        name = wanted.pop(0)
        if name in seen or name in direct or name not in fixtures:
            continue
        seen.add(name)
        marker, fn, in_class = fixtures[name]
        if marker.params is not None:
            axes.append([{name: p} for p in marker.params])
        wanted += pt_argnames(fn, in_class)
    combos: list[dict[str, Any]] = [{}]
    for axis in axes:
        combos = [{**c, **a} for c in combos for a in axis]
    return combos


class _PtMarks:
    def __init__(self, marks: Any) -> None:
        self.pytestmark = marks


class _PtRequest:
    """The part of pytest's ``request`` a fixture most often uses."""

    def __init__(self, param: Any, node_name: str) -> None:
        self.param = param
        self.node_name = node_name


class _PtCapture:
    """``capsys``: ``sys.stdout``/``sys.stderr`` captured while the test runs."""

    def __init__(self) -> None:
        import io

        self._saved = (_pt_sys.stdout, _pt_sys.stderr)
        self._out, self._err = io.StringIO(), io.StringIO()
        _pt_sys.stdout, _pt_sys.stderr = self._out, self._err

    def readouterr(self) -> Any:
        out, err = self._out.getvalue(), self._err.getvalue()
        for stream in (self._out, self._err):
            stream.seek(0)
            stream.truncate()
        return _PtCaptureResult((out, err))

    def close(self) -> None:
        _pt_sys.stdout, _pt_sys.stderr = self._saved


class _PtCaptureResult(tuple):  # type: ignore[type-arg]
    @property
    def out(self) -> str:
        return str(self[0])

    @property
    def err(self) -> str:
        return str(self[1])


def pt_run(names: dict[str, Any], cls_name: str | None, func_name: str, k: int) -> None:
    """Run one collected item (see the module docstring)."""
    import inspect
    import os
    import pathlib
    import tempfile

    pytest = _PT.get("pytest")
    if pytest is None:
        raise RuntimeError("pytest is not installed in the sandbox's Python: pip install pytest")
    changed = pt_tampered()
    if changed is not None:
        raise AssertionError(changed)
    cls = names[cls_name] if cls_name else None
    inst = None
    if cls is not None:
        import unittest

        inst = cls(func_name) if issubclass(cls, unittest.TestCase) else cls()
        func = getattr(cls, func_name)
    else:
        func = names[func_name]
    fixtures = pt_fixtures(names, cls)
    combo = pt_combos(names, cls, func)[k]
    values: dict[str, Any] = {}
    teardown: list[Any] = []

    def get(name: str) -> Any:
        if name in combo and name not in fixtures:
            return combo[name]
        if name in values:
            return values[name]
        if name in fixtures:
            _, fn, in_class = fixtures[name]
            if in_class:
                fn = fn.__get__(inst, cls)
            if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
                raise NotImplementedError(f"async fixture {name!r} is not supported")
            args = {
                a: (_PtRequest(combo.get(name), func_name) if a == "request" else get(a))
                for a in pt_argnames(fn, False)
            }
            v = fn(**args)
            if inspect.isgenerator(v):
                gen = v
                v = next(gen)
                teardown.append(lambda: next(gen, None))
        elif name == "tmp_path":
            v = pathlib.Path(tempfile.mkdtemp(prefix="tmp_path-", dir=os.getcwd()))
        elif name == "monkeypatch":
            v = pytest.MonkeyPatch()
            teardown.append(v.undo)
        elif name == "capsys":
            v = _PtCapture()
            teardown.append(v.close)
        elif name == "request":
            v = _PtRequest(None, func_name)
        else:
            raise LookupError(
                f"fixture {name!r} not found: selfheal runs the fixtures defined in your test "
                "file, tmp_path, monkeypatch, capsys and request.param"
            )
        values[name] = v
        return v

    def hooks(*hook_names: str) -> None:
        """The class's setup or teardown hooks (none without a class; ``*_method`` gets the test)."""
        for hook_name in hook_names:
            hook = getattr(inst, hook_name, None)
            if hook is not None:
                hook(*([getattr(inst, func_name)] if hook_name.endswith("_method") else []))

    fail_exc = pytest.fail.Exception
    try:
        try:
            for name, f in fixtures.items():
                if f[0].autouse:
                    get(name)
            hooks("setUp", "setup_method")
            fn = getattr(inst, func_name) if inst is not None else func
            if inspect.iscoroutinefunction(fn):
                raise NotImplementedError("async test functions are not supported")
            fn(**{a: get(a) for a in pt_argnames(fn, False)})
        finally:
            for undo in reversed(teardown):
                undo()
            hooks("teardown_method", "tearDown")
    except fail_exc as e:  # pytest.fail(), pytest.raises' "DID NOT RAISE": a test failure
        raise AssertionError(str(e)) from None
    changed = pt_tampered()
    if changed is not None:
        raise AssertionError(changed)
