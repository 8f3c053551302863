"""Kernel side: installing the harness at warm-up (before any candidate exists), and serving:
``__selfheal__('serve')`` never returns; it removes the entry point, says ``armed`` and runs
the serving loop (``loop.py``). Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import gc as _gc
import os as _os
import sys as _sysmod
import types as _types
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness import Setup
    from selfheal.kernel_sandbox._harness.boundary import prepare
    from selfheal.kernel_sandbox._harness.capture import Cap, NullOut
    from selfheal.kernel_sandbox._harness.channel import Harness
    from selfheal.kernel_sandbox._harness.compare import APPROX_EQ
    from selfheal.kernel_sandbox._harness.guard import Guard, make_hook
    from selfheal.kernel_sandbox._harness.loop import Loop
    from selfheal.kernel_sandbox._harness.pytest_item import pt_install
    from selfheal.kernel_sandbox._harness.sealing import detach_class, seal
    from selfheal.kernel_sandbox._harness.session import Checks

_SEALED = ("plain", "pure", "srepr", "truth", "cmp", "assert_", "assert_cmp", "on_alarm")
"""The harness functions the kernel replaces with sealed copies (``sealing.seal``): the
helpers tests are given and the alarm handler."""

_PR_SET_CHILD_SUBREAPER = 36


def install(ns: dict[str, Any], canon_src: str, setup: Setup) -> None:
    """Set the harness up in the kernel as ``setup`` says: read (and delete) the HMAC key,
    open the result pipe, set up the canonicaliser's namespace, install the audit hook and put
    the one entry point ``__selfheal__`` into the IPython namespace. ``ns`` is the harness's
    own namespace, complete at this point (every run checks it was not changed)."""
    import builtins
    import ctypes

    with open(setup["key_file"], "rb") as fh:
        key = fh.read()
    _os.unlink(setup["key_file"])
    clean = dict(builtins.__dict__)
    # the canonicaliser for probe values, in a private namespace with its own builtins
    canon_ns: dict[str, Any] = {"__builtins__": dict(clean), "__name__": "_sh_canon"}
    if canon_src:
        exec(compile(canon_src, "<selfheal canon>", "exec", dont_inherit=True), canon_ns)
    pt_install(APPROX_EQ)  # pytest imported and its modules snapshotted, no candidate yet
    _seal_reachable(ns, clean)
    prefixes = (_sysmod.prefix, _sysmod.base_prefix, _sysmod.exec_prefix)
    host_home = setup["host_home"]
    guard = Guard(setup["work"], host_home, clean, prefixes)
    guard.protected = {id(v): v for v in ns.values() if type(v) is _types.FunctionType}
    ip = get_ipython()  # type: ignore[name-defined]  # noqa: F821
    try:
        libc: Any = ctypes.CDLL(None, use_errno=True)
    except OSError:
        libc = None
    publisher: Any = None
    try:
        from IPython.core.displaypub import DisplayPublisher

        publisher = DisplayPublisher
    except ImportError:
        pass
    out_fd = _os.open(setup["out_fifo"], _os.O_WRONLY)
    h = Harness(key, out_fd, guard, Checks(ns, canon_ns), ip, libc, publisher)
    h.boundary, h.boundary_text = prepare(setup["boundary"], host_home)
    h.disk_mb = setup["disk_mb"] if libc is not None else 0
    fifo = setup["fifo"]
    _sysmod.addaudithook(make_hook(guard))

    def entry(mode: str) -> None:
        # the FIFO of a pytest-form test's calls, read only by a run that serves them
        calls = _os.path.join(_os.path.dirname(fifo), "calls")  # (remote.py)
        _os.mkfifo(calls, 0o600)
        h.call_fd = _os.open(calls, _os.O_RDWR)
        serve(h, fifo)

    ip.user_ns["__selfheal__"] = entry


def _seal_reachable(ns: dict[str, Any], clean: dict[str, Any]) -> None:
    """What a candidate can get hold of leads to no harness state: the comparison helpers
    (a test's locals), the alarm handler (``signal.getsignal``) and the classes of
    ``sys.stdout``/``sys.stderr`` become sealed copies in ``ns`` (see ``sealing.py``)."""
    sealed = seal({n: ns[n] for n in _SEALED}, {"_approx": tuple(APPROX_EQ.items())})
    by_id = {id(ns[n]): sealed[n] for n in _SEALED}
    helpers = ns.get("_HELPERS")
    if helpers is not None:  # session.py's helpers for tests that are not wrapped
        ns["_HELPERS"] = _types.MappingProxyType(
            {k: by_id.get(id(v), v) for k, v in helpers.items()}
        )
    ns.update(sealed)
    cap = detach_class(Cap, Cap.__bases__, ns, clean)
    ns["Cap"] = cap
    ns["NullOut"] = detach_class(NullOut, (cap,), ns, clean)


def serve(h: Harness, fifo: str) -> None:
    """Serve runs until the kernel is killed (see ``loop.py``)."""
    h.ip.user_ns.pop("__selfheal__", None)
    if h.libc is not None:
        h.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans come back to us
    if h.display_publisher is not None:
        # IPython's publisher talks to ZeroMQ; in a candidate's process the text form goes
        # to the captured output instead
        h.ip.display_pub = h.display_publisher(shell=h.ip)
    g = h.guard
    g.stdout = g.stderr = _sysmod.stdout = _sysmod.stderr = NullOut()
    _gc.collect()
    _gc.freeze()  # forked processes share these pages instead of copying them in a collection
    # opened read-write and kept open: never blocks, and the host's non-blocking open for
    # writing always finds a reader; only a standby process ever reads from it
    runs = _os.path.dirname(h.guard.work)  # the kernel's directory: runs are <it>-r<n>
    loop = Loop(h, _os.open(fifo, _os.O_RDWR), runs)
    h.send(("armed", h.boundary_text))
    loop.run()
