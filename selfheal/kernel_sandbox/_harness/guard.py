"""Kernel side: what guards candidate code while it runs: ``Guard`` (the per-process policy),
``audit`` (the audit hook's policy, defence in depth behind the operating system's
boundary) and ``guarded`` (candidate code run with its output captured, its own view of the
builtins and a per-test alarm). Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import builtins as _builtins
import os as _os
import signal as _signalmod
import sys as _sysmod
from typing import Any

_realpath = _os.path.realpath
_getpid = _os.getpid
_gettrace = _sysmod.gettrace  # the real ones: trace.hide_tracer replaces sys.gettrace
_getprofile = _sysmod.getprofile
_setitimer = _signalmod.setitimer
_getitimer = _signalmod.getitimer
_signal = _signalmod.signal
_ITIMER_REAL = _signalmod.ITIMER_REAL
_SIGALRM = _signalmod.SIGALRM
_O_WRITE = _os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_TRUNC | _os.O_APPEND
_SECRET_NAMES = frozenset({".env", ".netrc", ".git-credentials", ".pypirc", ".pgpass"})
_NET = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
_PROC = frozenset(
    {
        "os.fork",
        "os.forkpty",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "subprocess.Popen",
        "pty.spawn",
    }
)
_FS = frozenset(
    {
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "shutil.rmtree",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.utime",
        "os.setxattr",
        "os.removexattr",
    }
)
_GC = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
_KILL = frozenset({"os.kill", "os.killpg", "signal.pthread_kill"})
_TRACING = frozenset({"sys._getframe", "sys._current_frames"})
_DEFAULT_ATTRS = frozenset({"__defaults__", "__kwdefaults__"})
_HOOKS = frozenset({"sys.setprofile", "sys.addaudithook"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})


class Timeout(BaseException):
    """Raised by the harness alarm inside a test that went over its limit."""


def on_alarm(
    signum: int,
    frame: Any,
    _getitimer: Any = _getitimer,
    _which: int = _ITIMER_REAL,
    _Timeout: Any = Timeout,
) -> None:
    """The SIGALRM handler: a ``Timeout`` while a test's timer runs (it repeats every 50 ms
    until the harness stops it), nothing once it is stopped. A candidate gets it with
    ``signal.getsignal``: it holds no harness state (its copy in the kernel is sealed at
    warm-up, ``compare.seal``: no globals, no closure)."""
    if _getitimer(_which)[1] > 0.0:
        raise _Timeout()


class Guard:
    """The policy of one candidate process: the run's working directory, what may be read,
    whether network and processes are allowed, and whether candidate code has started (from
    then on the audit hook enforces, in every thread, for good)."""

    def __init__(
        self, work: str, host_home: str, clean_builtins: dict[str, Any], prefixes: Any = ()
    ) -> None:
        self.started = False  # candidate code has started: the hook enforces for good
        self.tracing = False  # a test runs under the harness's tracer (trace.py)
        self.refused: list[str] = []  # what the audit hook refused while tracing
        self.allow_network = False
        self.allow_subprocess = False
        self.pid = _getpid()
        # the host user's dot-directories (~/.ssh, ~/.aws, ~/.config, ~/.netrc, ...) hold
        # credentials; the Python installation may live there too (pyenv): it stays readable
        self.home_dots = _realpath(host_home) + "/." if host_home else ""
        self.py_prefixes = tuple({_realpath(p) + "/" for p in prefixes})
        self.clean_builtins = clean_builtins
        self.clean_items = tuple(clean_builtins.items())  # what guard_broken compares with
        self.protected: dict[int, Any] = {}  # id -> harness function whose defaults are fixed
        self.candidate_builtins: dict[str, Any] | None = None
        self.stdout: Any = _sysmod.stdout
        self.stderr: Any = _sysmod.stderr
        self.set_work(work)

    def set_work(self, work: str) -> None:
        """The run's working directory: the only place the candidate may write."""
        self.work = _realpath(work)
        # kernel and run directories are <tmp>/selfheal-k-*/ ; work is <that>/work
        self.kprefix = _os.path.join(_os.path.dirname(_os.path.dirname(self.work)), "selfheal-k-")


def guard_broken(g: Guard) -> str | None:
    """Checked after every test: what the candidate changed that would let it see or steer
    the harness in a later step (a tracer or profiler installed in this thread or waiting
    for new threads, the audit hook switched off, the clean builtins edited), or None."""
    if g.started is not True:
        return "the candidate switched the sandbox's audit hook off"
    if _getprofile() is not None:
        return "the candidate installed a profiler"
    if not g.tracing and _gettrace() is not None:
        return "the candidate installed a tracer"
    threading = _sysmod.modules.get("threading")
    if threading is not None and (
        getattr(threading, "_profile_hook", None) is not None
        or getattr(threading, "_trace_hook", None) is not None
    ):
        return "the candidate set a tracer or profiler for new threads"
    clean = g.clean_builtins
    if len(clean) != len(g.clean_items) or any(
        clean.get(k, clean) is not v for k, v in g.clean_items
    ):
        return "the candidate edited the sandbox's clean builtins"
    return None


def _text(path: Any) -> str | None:
    try:
        p = path.decode() if type(path) is bytes else str(path)
        return _realpath(p)
    except BaseException:
        return None


def inside_work(g: Guard, path: Any) -> bool:
    if type(path) is int:
        return True
    rp = _text(path)
    if rp is None:
        return False
    return rp == g.work or rp.startswith(g.work + "/") or rp == "/dev/null"


def forbidden_read(g: Guard, path: Any) -> bool:
    """Other processes' /proc entries, other sandbox directories, this kernel's control
    files (everything but the run's ``work``), the host user's dot-directories, and
    credential files (``.env``, ``.netrc``, ...)."""
    rp = _text(path)
    if rp is None:
        return False
    if rp.startswith("/proc/"):
        head = rp[6:].split("/", 1)[0]
        return head.isdigit() and int(head) != g.pid
    if rp.startswith(g.kprefix):
        return not (rp == g.work or rp.startswith(g.work + "/"))
    if g.home_dots and rp.startswith(g.home_dots) and not rp.startswith(g.py_prefixes):
        return True
    return rp.rsplit("/", 1)[-1] in _SECRET_NAMES


def audit(g: Guard, event: str, args: tuple[Any, ...]) -> None:
    """The audit hook's policy once candidate code has started."""
    if g.tracing:
        _tracing_policy(g, event, args)
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        if type(path) is int:
            return
        writing = (mode is not None and any(c in mode for c in "wax+")) or (
            mode is None and type(flags) is int and flags & _O_WRITE
        )
        if writing and not inside_work(g, path):
            raise PermissionError(
                f"sandbox: writing outside the run's working directory is blocked: {path!r}"
            )
        if forbidden_read(g, path):
            raise PermissionError(
                f"sandbox: reading other processes or sandbox control files is blocked: {path!r}"
            )
    elif event in _NET:
        if not g.allow_network:
            raise PermissionError(f"sandbox: network access is blocked ({event})")
    elif event in _PROC:
        if not g.allow_subprocess:
            raise PermissionError(f"sandbox: starting processes is blocked ({event})")
    elif event in _FS:
        for a in args:
            t = type(a)
            if (t is str or t is bytes) and not inside_work(g, a):
                raise PermissionError(
                    f"sandbox: changing files outside the working directory is blocked "
                    f"({event} {a!r})"
                )
    elif event in _GC:
        raise PermissionError(f"sandbox: {event} is blocked while candidate code runs")
    elif event in _HOOKS:
        # a profiler sees every frame, the harness's too; an audit hook sees the harness's
        # events (docs/sandbox.md, "Your tests in pytest's form")
        raise PermissionError(f"sandbox: {event} is blocked while candidate code runs")
    elif event == "object.__setattr__" and len(args) > 1:
        # a function's code, and a harness function's defaults (the sealed helpers' only
        # references: sealing.py), stay what they were
        if args[1] == "__code__" or (
            args[1] in _DEFAULT_ATTRS and g.protected.get(id(args[0])) is args[0]
        ):
            raise PermissionError(
                f"sandbox: replacing a function's {args[1]} is blocked while candidate code runs"
            )
    elif event == "selfheal.refused":  # sys.settrace & co., replaced by trace.hide_tracer
        what = str(args[0])[:60] if args else "?"
        if len(g.refused) < 20:
            g.refused.append(what)
        raise PermissionError(
            f"sandbox: {what} is blocked (a tracer or profiler would see the harness's frames)"
        )
    elif event in _KILL:
        if event == "signal.pthread_kill" or (
            event == "os.kill" and args and args[0] in (0, g.pid)
        ):
            return
        raise PermissionError(f"sandbox: signalling other processes is blocked ({event})")


def _tracing_policy(g: Guard, event: str, args: tuple[Any, ...]) -> None:
    """While a test is traced the tracer is the harness's: no frame objects
    (``sys._getframe``, a traceback's ``tb_frame``, a generator's ``gi_frame``, ...) through
    which candidate code could reach it, nor a signal to itself, whose handler would receive
    a frame. (``sys.settrace`` and ``sys.setprofile`` are replaced for the whole traced run:
    ``trace.hide_tracer``; the audit event cannot refuse them, since CPython raises it too
    when it unsets a tracer that raised, e.g. on the test's timeout.)"""
    what = ""
    if event in _TRACING:
        what = event
    elif event == "object.__getattr__" and len(args) > 1 and args[1] in _FRAME_ATTRS:
        what = f"the {args[1]} attribute"
    elif event in ("os.kill", "signal.pthread_kill"):
        what = event
    if what:
        if len(g.refused) < 20:
            g.refused.append(what)
        raise PermissionError(
            f"sandbox: {what} is blocked while a failing test is traced (the tracer and its "
            "frames belong to the harness)"
        )


def make_hook(g: Guard) -> Any:
    """The function to pass to ``sys.addaudithook``: free until candidate code starts."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if g.started:
            audit(g, event, args)

    return hook


def _enter_candidate_world(g: Guard) -> None:
    """The candidate's view of the builtins module is swapped in only while its code runs,
    so patching ``len`` or ``isinstance`` cannot break the harness or the kernel."""
    cb = g.candidate_builtins
    if cb is not None:
        bd = _builtins.__dict__
        bd.clear()
        bd.update(cb)


def _leave_candidate_world(g: Guard) -> None:
    bd = _builtins.__dict__
    clean = g.clean_builtins
    cb = dict(bd)
    if len(cb) != len(clean) or any(cb.get(k, cb) is not v for k, v in clean.items()):
        g.candidate_builtins = cb
        bd.clear()
        bd.update(clean)


def guarded(g: Guard, fn: Any, limit: float, out: Any, err: Any) -> BaseException | None:
    """Run ``fn`` as candidate code: streams captured, audit hook on, alarm armed.
    Returns the exception it raised (a ``Timeout`` when the alarm stopped it), or None."""
    res: BaseException | None = None
    try:
        try:
            _enter_candidate_world(g)
            _signal(_SIGALRM, on_alarm)
            _sysmod.stdout = out
            _sysmod.stderr = err
            g.started = True
            _setitimer(_ITIMER_REAL, limit, 0.05)
            fn()
        finally:
            _setitimer(_ITIMER_REAL, 0, 0)
            _sysmod.stdout = g.stdout
            _sysmod.stderr = g.stderr
            _leave_candidate_world(g)
    except BaseException as e:
        _setitimer(_ITIMER_REAL, 0, 0)
        _sysmod.stdout = g.stdout
        _sysmod.stderr = g.stderr
        _leave_candidate_world(g)
        res = e
    return res
