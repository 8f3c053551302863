"""Kernel side: one candidate run, in the forked process that serves one request
(docs/sandbox.md, "How a run works", step 3). Shipped to the kernel as source."""

from __future__ import annotations

import linecache as _linecachemod
import sys as _sysmod
import time as _time
import types as _types
from collections.abc import Callable
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness.capture import Cap, describe
    from selfheal.kernel_sandbox._harness.compare import (
        assert_,
        assert_cmp,
        cmp,
        srepr,
        truth,
    )
    from selfheal.kernel_sandbox._harness.guard import Guard, Timeout, guard_broken, guarded
    from selfheal.kernel_sandbox._harness.pytest_collect import pytest_item
    from selfheal.kernel_sandbox._harness.remote import rm_serve
    from selfheal.kernel_sandbox._harness.trace import Tracer, code_objects, hide_tracer, traced
    from selfheal.kernel_sandbox._wire import decode_value, encode_result

_perf = _time.perf_counter
_settrace = _sysmod.settrace
_ModuleType = _types.ModuleType
_modules = _sysmod.modules
_linecache = _linecachemod.cache
_CACHE_MAX = 4096
_qualname = type.__dict__["__qualname__"].__get__  # a type's own, never a metaclass's


def compile_tests(tests: list[Any], start: int, cache: dict[Any, Any]) -> list[Any]:
    """Compile (and decode) every test from ``start`` before the candidate exists.

    ``cache`` keeps compiled code across runs (K candidates share their tests); code
    objects are immutable, so a candidate cannot change what the next one runs."""
    out: list[Any] = []
    if len(cache) > _CACHE_MAX:
        cache.clear()
    for i, t in enumerate(tests):
        if i < start:
            out.append(None)
            continue
        try:
            kind = t[0]
            if kind == "call":  # (kind, id, function, args, kwargs): decoded fresh per run
                out.append(("call", t[2], decode_value(t[3]), decode_value(t[4])))
                continue
            key = tuple(t)
            c = cache.get(key)
            if c is None:
                if kind == "assert":  # (kind, id, code, wrapped)
                    c = ("assert", compile(t[2], f"<test {t[1]}>", "exec"), t[3])
                elif kind == "values":  # (kind, id, candidate side as def __sh_test__(__sh_v__))
                    c = ("values", compile(t[2], f"<test {t[1]}>", "exec"))
                elif kind == "trace":  # (kind, id, code, wrapped, tracer settings)
                    c = ("trace", compile(t[2], f"<test {t[1]}>", "exec"), t[3], tuple(t[4]))
                elif kind == "remote":  # (kind, id): serve the host's calls (remote.py)
                    c = ("remote",)
                elif kind == "probe":  # (kind, id, expr, setup)
                    setup = compile(t[3], f"<test {t[1]}>", "exec") if t[3] else None
                    c = ("probe", compile(t[2], f"<test {t[1]}>", "eval"), setup)
                else:  # snippet: (kind, id, body, last expression or None)
                    body = compile(t[2], "<test snippet>", "exec")
                    last = compile(t[3], "<test snippet>", "eval") if t[3] else None
                    c = ("snippet", body, last)
                cache[key] = c
            out.append(c)
        except BaseException as e:
            out.append(("bad", e))
    return out


def restore_namespace(ns: dict[str, Any], saved: dict[str, Any], builtins: dict[str, Any]) -> bool:
    """Put back ``ns`` (and its private ``__builtins__``) as ``saved``; True if something
    had been changed."""
    changed = False
    if len(ns) != len(saved) or any(ns.get(k, ns) is not v for k, v in saved.items()):
        ns.clear()
        ns.update(saved)
        changed = True
    b = ns["__builtins__"]
    if len(b) != len(builtins) or any(b.get(k, b) is not v for k, v in builtins.items()):
        b.clear()
        b.update(builtins)
        changed = True
    return changed


class Checks:
    """The namespaces a candidate must not change: the harness's own (checked after every
    test: a change fails that test) and the canonicaliser's (restored after every probe)."""

    def __init__(self, harness_ns: dict[str, Any], canon_ns: dict[str, Any]) -> None:
        self.harness_ns = harness_ns
        self.harness_saved = dict(harness_ns)
        self.harness_builtins = dict(harness_ns.get("__builtins__", {}))
        self.canon_ns = canon_ns
        self.canon_saved = dict(canon_ns)
        self.canon_builtins = dict(canon_ns.get("__builtins__", {}))
        self.canonical: Callable[[Any], str] | None = canon_ns.get("canonical")

    def harness_changed(self) -> bool:
        if not self.harness_saved:
            return False
        return restore_namespace(self.harness_ns, self.harness_saved, self.harness_builtins)

    def restore_canon(self) -> None:
        if self.canon_saved:
            restore_namespace(self.canon_ns, self.canon_saved, self.canon_builtins)


def _run_test(co: Any, tns: dict[str, Any]) -> None:
    """Run a test compiled as ``def __sh_test__(helpers...)``: the helpers are the test
    function's locals, out of reach of a candidate that edits its caller's globals."""
    exec(co, tns)
    fn = tns.pop("__sh_test__", None)
    if fn is None:
        return  # compiled without the wrapper (``from x import *``): ran at top level
    fn(cmp, assert_, assert_cmp, truth, pytest_item)


def tampered(
    tns: dict[str, Any], base: dict[str, Any], tb_clean: dict[str, Any], clean: dict[str, Any]
) -> BaseException | None:
    """Evidence that the candidate edited the test's globals or builtins."""
    if tns.get("__builtins__") is not tb_clean:
        return AssertionError("the candidate replaced the test's builtins")
    for k, v in clean.items():
        if tb_clean.get(k, tb_clean) is not v:
            return AssertionError(f"the candidate edited the test's builtin {k!r}")
    if len(tb_clean) != len(clean):
        return AssertionError("the candidate added names to the test's builtins")
    for k, v in tns.items():
        if k in ("__builtins__", "__name__"):
            continue
        if k not in base or base[k] is not v:
            return AssertionError(f"the candidate edited the test's global {k!r}")
    for k in base:
        if k not in tns:
            return AssertionError(f"the candidate deleted the test's global {k!r}")
    return None


_HELPERS = {
    "__sh_cmp__": cmp,
    "__sh_assert__": assert_,
    "__sh_assert_cmp__": assert_cmp,
    "__sh_truth__": truth,
    "__sh_pytest__": pytest_item,
}


def run_candidate(
    g: Guard, checks: Checks, req: dict[str, Any], compiled: list[Any], send: Any, calls: int = -1
) -> None:
    """Load ``req["code"]`` and run the tests from ``req["start"]``; ``send`` each step. A
    ``remote`` request answers the host's calls on ``calls`` instead (``remote.py``)."""
    g.allow_network = bool(req.get("allow_network", False))
    g.allow_subprocess = bool(req.get("allow_subprocess", False))
    limit_out = int(req.get("output_limit", 65536))
    code: str = req["code"]
    load_timeout = float(req["load_timeout"])
    test_timeout = float(req["test_timeout"])
    start = int(req.get("start", 0))
    tests = list(req.get("tests", ()))
    tracing = any(t[0] == "trace" for t in tests[start:])
    g.refused = []
    hide_tracer()  # no tracer or profiler of the candidate's sees the harness (trace.py)
    mod = _ModuleType("candidate")
    mod.__dict__["__file__"] = "<candidate>"
    _modules["candidate"] = mod
    _linecache["<candidate>"] = (len(code), None, code.splitlines(True), "<candidate>")
    out, err = Cap(limit_out), Cap(limit_out)
    t0 = _perf()
    try:
        co = compile(code, "<candidate>", "exec", dont_inherit=True)
    except BaseException as e:
        tn0, msg, tb, line = describe(e)
        send(("load", False, "error", tn0, msg, line, tb, "", False, _perf() - t0))
        send(("done",))
        return
    ns = mod.__dict__
    exc = guarded(g, lambda: exec(co, ns), load_timeout, out, err)
    dur = _perf() - t0
    if exc is not None:
        outcome = "timeout" if type(exc) is Timeout else "error"
        tn, msg, tb, line = describe(exc)
        if outcome == "timeout":
            tn, tb = "TimeoutError", ""
            msg = f"loading the candidate took over {load_timeout}s"
        send(("load", False, outcome, tn, msg, line, tb, out.text(), out.truncated, dur))
        send(("done",))
        return
    send(("load", True, "passed", None, "", None, "", out.text(), out.truncated, dur))
    if calls >= 0 and tests[start:] and tests[start][0] == "remote":
        rm_serve(g, mod, calls, int(req["seq"]), limit_out, send)
        send(("done",))
        return
    base = dict(ns)
    codes = code_objects(co) if tracing else {}
    for i in range(start, len(tests)):
        send(_one(g, checks, compiled[i], tests[i][0], i, base, limit_out, test_timeout, codes))
    send(("done",))


def _one(
    g: Guard,
    checks: Checks,
    c: Any,
    kind: str,
    i: int,
    base: dict[str, Any],
    limit_out: int,
    test_timeout: float,
    codes: dict[int, Any] | None = None,
) -> tuple[Any, ...]:
    """Run test ``i`` (compiled as ``c``); return its result message. ``codes``: the
    candidate's code objects, for a traced test."""
    tns = dict(base)
    tb_clean = dict(g.clean_builtins)
    tns["__builtins__"] = tb_clean
    tns["__name__"] = "__test__"
    if c[0] not in ("assert", "trace") or not c[2]:
        tns.update(_HELPERS)
    out, err = Cap(limit_out), Cap(limit_out)
    box: list[Any] = [None]
    exc: BaseException | None
    t1 = _perf()
    if c[0] == "bad":
        exc = c[1]
    elif c[0] == "assert":
        exc = guarded(g, lambda: _run_test(c[1], tns), test_timeout, out, err)
    elif c[0] == "trace":
        tracer = Tracer(codes or {}, *c[3])
        exc = guarded(
            g, lambda: traced(g, tracer, lambda: _run_test(c[1], tns)), test_timeout, out, err
        )
        g.tracing = False
        _settrace(None)
        for what in g.refused:
            tracer.notes.append(f"the candidate tried {what} (refused)")
        if tracer.off and type(exc) is not Timeout:  # a timeout in the tracer unsets it
            tracer.notes.append("the tracer was switched off while the test ran")
        box[0] = tracer.result()
    elif c[0] == "values":
        kept: list[Any] = []
        exc = guarded(g, lambda: _run_values(c[1], tns, kept), test_timeout, out, err)
        box[0] = ("vals", kept)
    elif c[0] == "call":
        fn = base.get(c[1])
        if fn is None:
            exc = NameError(f"the candidate defines no {c[1]!r}")
        else:

            def call() -> None:
                box[0] = fn(*c[2], **c[3])

            exc = guarded(g, call, test_timeout, out, err)
    elif c[0] == "probe":
        canonical = checks.canonical

        def probe() -> None:
            # evaluated and made canonical inside the guard: a candidate's __repr__ or
            # generator runs under the same limits and audit hook
            if c[2] is not None:
                exec(c[2], tns)
            box[0] = canonical(eval(c[1], tns)) if canonical is not None else None

        exc = guarded(g, probe, test_timeout, out, err)
        checks.restore_canon()
        if exc is None and type(box[0]) is not str:
            exc = TypeError("the probe's value could not be made canonical")
    else:  # snippet

        def snip() -> None:
            exec(c[1], tns)
            if c[2] is not None:
                box[0] = eval(c[2], tns)

        exc = guarded(g, snip, test_timeout, out, err)
    if exc is None and c[0] in ("assert", "trace") and c[2]:
        exc = tampered(tns, base, tb_clean, g.clean_builtins)
    if checks.harness_changed() and (exc is None or type(exc) is not Timeout):
        exc = AssertionError("the candidate edited the sandbox harness")
    broken = guard_broken(g)
    if broken is not None and (exc is None or type(exc) is not Timeout):
        exc = AssertionError(broken)
    dur = _perf() - t1
    value: Any = None
    tname: str | None
    if exc is None:
        outcome, tname, msg, tb = "passed", None, "", ""
        if c[0] == "call":
            value = _call_value(box[0])
        elif c[0] == "snippet" and c[2] is not None:
            value = ("repr", srepr(box[0], 4000))
        elif c[0] == "probe":
            value = ("canon", box[0])
        elif c[0] == "values":
            value = box[0]
    else:
        tname, msg, tb, _line = describe(exc)
        if type(exc) is Timeout:
            outcome, tname, tb = "timeout", "TimeoutError", ""
            msg = f"the test took over {test_timeout}s and was stopped"
        elif isinstance(exc, AssertionError) and kind != "probe":
            outcome = "failed"
        else:
            outcome = "error"
        if outcome == "error" and kind == "probe":
            value = ("canon", f"raise {tname}")
    if c[0] == "trace":
        value = box[0]
    texts = (out.text(), err.text(), out.truncated or err.truncated)
    return ("result", i, outcome, tname, msg, tb, *texts, dur, value)


def _run_values(co: Any, tns: dict[str, Any], kept: list[Any]) -> None:
    """Run a test's candidate side (``split.py``): each ``__sh_v__(lambda: expr)`` keeps the
    value of ``expr`` as data (``_wire.encode_result``), taken when it is evaluated, or the
    exception it raised, as its type and message, for the host to judge."""

    def keep(thunk: Any) -> None:
        try:
            kept.append(("v", encode_result(thunk())))
        except Exception as e:
            tn, msg, tb, _line = describe(e)
            kept.append(("x", tn, msg, tb))

    exec(co, tns)
    tns.pop("__sh_test__")(keep)


def _call_value(v: Any) -> tuple[Any, ...]:
    """A CallTest's return value for the host, as data (``_wire.encode_result``)."""
    return ("enc", encode_result(v))
