"""The test process's main program (see ``_testproc.py``): set itself up, say ``ready``,
take one module and the ids of its items to run, run them with pytest, and report each
item's outcome as pytest decided it. Executed by the host's bootstrap as ``__main__`` with
``argv = [dir, read fd, write fd]``; plain Python."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import resource
import signal
import sys
import time
from typing import Any

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_CAP = 16000


def _load(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _harden(memory_mb: int) -> str:
    """Die with the parent, bound the memory, leave the network: what the process runs
    under, in words."""
    said = ["own folder"]
    try:
        libc = _die_with_parent()
        if libc.unshare(_CLONE_NEWNET) == 0:
            said.append("own network namespace")
    except (OSError, AttributeError):
        pass
    if memory_mb > 0:
        try:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            said.append(f"{memory_mb} MiB")
        except (ValueError, OSError):
            pass
    return ", ".join(said)


def _die_with_parent() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
    return libc


def _assert_source(e: Any, msg: str) -> str:
    """A failed ``assert``'s message as the other runners word it: the statement as written
    (``assert f(3) == 7``), then pytest's explanation (``left: 6`` ...)."""
    lines = msg.splitlines()
    if not e.errisinstance(AssertionError) or not lines or not lines[0].startswith("assert "):
        return msg
    try:
        stmt = str(e.traceback[-1].statement).strip()
    except Exception:
        return msg
    return "\n".join([stmt, *lines[1:]]) if stmt.startswith("assert") else msg


class Reporter:
    """A pytest plugin: runs only the items asked for, and sends each one's outcome."""

    def __init__(self, ch: Any, ids: list[str], names: dict[str, Any]) -> None:
        self.ch = ch
        self.ids = set(ids)
        self.names = names
        self.cur: dict[str, Any] = {}

    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        keep = [i for i in items if i.nodeid.split("::", 1)[-1] in self.ids]
        drop = [i for i in items if i.nodeid.split("::", 1)[-1] not in self.ids]
        items[:] = keep
        for item in keep:  # the candidate's names, where the module defines none itself
            module = getattr(item, "module", None)
            if module is not None:
                for k, v in self.names.items():
                    vars(module).setdefault(k, v)
        if drop:
            config.hook.pytest_deselected(items=drop)

    def pytest_assertrepr_compare(self, config: Any, op: str, left: Any, right: Any) -> Any:
        """Both sides of a comparison of two scalars, as the in-process runner shows them
        (``left:``, ``right:``); containers keep pytest's own diff."""
        scalars = (int, float, complex, bool, str, bytes, type(None))
        if type(left) in scalars and type(right) in scalars:
            return [f"{left!r} {op} {right!r}", f"left:  {left!r}", f"right: {right!r}"]
        remote = sys.modules["selfheal.kernel_sandbox._testproc"].Remote
        if type(left) is remote or type(right) is remote:
            return [f"{self._side(left)} {op} {self._side(right)}"] + [
                f"{side} {self._side(v)}"
                + (
                    ", in the candidate's process: not plain data, equal to no plain value"
                    if type(v) is remote
                    else ""
                )
                for side, v in (("left: ", left), ("right:", right))
            ]
        return None

    @staticmethod
    def _side(v: Any) -> str:
        t = type(v)
        if t.__name__ == "Remote" and t.__module__ == "selfheal.kernel_sandbox._testproc":
            return f"<a {object.__getattribute__(v, '_sh_type')}>"
        return repr(v)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.cur = {"outcome": "passed", "exc": None, "msg": "", "tb": "", "out": "", "err": ""}
        self.cur["t0"] = time.perf_counter()
        self.ch.send(("start", nodeid.split("::", 1)[-1]))

    def pytest_runtest_makereport(self, item: Any, call: Any) -> None:
        """The first exception of the item (setup, call or teardown): its type and words."""
        e = call.excinfo
        if e is None or self.cur.get("exc"):
            return
        self.cur["exc"] = "AssertionError" if e.typename == "Failed" else e.typename
        self.cur["msg"] = _assert_source(e, str(e.value))[:_CAP]
        self.cur["assertion"] = e.errisinstance(AssertionError) or e.typename == "Failed"

    def pytest_runtest_logreport(self, report: Any) -> None:
        """The item's outcome: its first phase that did not pass decides."""
        self.cur["out"], self.cur["err"] = report.capstdout, report.capstderr
        if self.cur["outcome"] != "passed" or report.passed:
            return
        exc = self.cur.get("exc") or ""
        if report.skipped:  # skipped while it ran (``pytest.skip()``): it checked nothing
            outcome = "error"
            self.cur["exc"] = exc or "Skipped"
        elif exc == "CandidateTimeout":
            outcome = "timeout"
        elif exc == "CandidateCrashed":
            outcome = "crashed"
        elif report.when == "call" and self.cur.get("assertion"):
            outcome = "failed"
        else:
            outcome = "error"
        self.cur["outcome"] = outcome
        self.cur["tb"] = report.longreprtext[-_CAP:]

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        c = self.cur
        dur = time.perf_counter() - c["t0"]
        self.ch.send(
            (
                "item",
                nodeid.split("::", 1)[-1],
                c["outcome"],
                c["exc"],
                str(c["msg"])[:_CAP],
                str(c["tb"])[:_CAP],
                str(c["out"]),
                str(c["err"]),
                dur,
            )
        )


_PLUGINS_OFF: tuple[str, ...] = (
    "cacheprovider",
    "stepwise",
    "junitxml",
    "doctest",
    "pastebin",
    "setuponly",
)
_PLUGINS_OFF += ("setupplan", "faulthandler", "nose", "legacypath")
_PLUGINS_OFF += ("unraisableexception", "threadexception")
"""pytest's plugins a run does without: the last two collect garbage after every test
(about 5 ms an item here); none of them decides an outcome."""


def main(argv: list[str]) -> None:
    """The test server: start pytest at once (its configuration is most of its cost) and,
    in its ``pytest_sessionstart``, fork one child per run the host asks for; the child
    opens the run's two FIFOs, takes the module and goes on with the session (collection,
    the items), the server waits for the next run. Children are reaped by the kernel
    (``SIGCHLD`` ignored here)."""
    here, rfd, wfd = argv[0], int(argv[1]), int(argv[2])
    sys.dont_write_bytecode = True
    under = _harden(0)  # (each child bounds its own memory: the run's limit)
    _load("selfheal.kernel_sandbox._wire", os.path.join(here, "_wire.py"))
    values = _load("selfheal.kernel_sandbox.values", os.path.join(here, "values.py"))
    tp = _load("selfheal.kernel_sandbox._testproc", os.path.join(here, "_testproc.py"))
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import pytest

    ctl = tp.Channel(rfd, wfd)
    tp.VALUES = values
    folder = os.getcwd()
    ini = os.path.join(folder, "pytest.ini")
    with open(ini, "w", encoding="utf-8") as fh:
        fh.write("[pytest]\n")
    placeholder = os.path.join(folder, tp._FILE)
    with open(placeholder, "w", encoding="utf-8") as fh:
        fh.write("")
    sys.modules["candidate"] = tp.CandidateModule("candidate")
    reporter = Reporter(None, [], {})

    def serve(session: Any) -> None:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        ctl.send(("ready", under))
        while True:
            m = ctl.recv()
            if type(m) is not tuple or len(m) != 3 or m[0] != "fork" or type(m[1]) is not str:
                raise SystemExit(0)
            if os.fork() == 0:
                _child(session, m[1], int(m[2]))
                return  # the child goes on with the session: collection, the items

    def _child(session: Any, run: str, memory_mb: int) -> None:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(rfd)
        os.close(wfd)
        _die_with_parent()  # the server, which dies with the host
        with contextlib.suppress(ValueError, OSError):
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.chdir(run)
        out = os.open(os.path.join(run, "out"), os.O_WRONLY)
        ch = tp.Channel(os.open(os.path.join(run, "in"), os.O_RDONLY), out)
        tp.CHANNEL = reporter.ch = ch
        ch.send(("ready", f"{under}, {memory_mb} MiB", os.getpid()))
        m = ch.recv()
        if type(m) is not tuple or len(m) != 4 or m[0] != "run":
            raise SystemExit(0)
        _, text, ids, names = m
        reporter.ids, reporter.names = set(ids), tp.candidate_names(names)
        path = os.path.join(run, tp._FILE)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        session.config.args = [path]

    # last: pytest's own session start (its fixture manager: most of a session's start) is
    # done once, in the server, before any fork
    reporter.pytest_sessionstart = pytest.hookimpl(trylast=True)(serve)  # type: ignore[attr-defined]
    off = [a for name in _PLUGINS_OFF for a in ("-p", f"no:{name}")]
    code = pytest.main(
        [
            "-qq",
            *off,
            "-c",
            ini,
            "--rootdir",
            folder,
            "--confcutdir",
            folder,
            "-W",
            "ignore",
            "--color=no",
            "--tb=short",
            "--capture=sys",  # (the candidate's output is written here by ``call``)
            placeholder,
        ],
        plugins=[reporter],
    )
    if tp.CHANNEL is not None:
        tp.CHANNEL.send(("finished", int(code)))


if __name__ == "__main__":
    main(sys.argv)
