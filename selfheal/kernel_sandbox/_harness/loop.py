"""Kernel side: the serving loop, one forked process per request: standby, go, reaping
(docs/sandbox.md, "How a run works", steps 2 and 3). Shipped to the kernel as source (see
``_harness/__init__.py``)."""

from __future__ import annotations

import ctypes as _lctypes
import marshal as _marshal
import os as _os
import resource as _resource
import select as _selectmod
import shutil as _shutil
import signal as _signalmod
import sys as _sysmod
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness.boundary import enter, for_run, standby
    from selfheal.kernel_sandbox._harness.capture import MESSAGE_CAP, clip
    from selfheal.kernel_sandbox._harness.channel import Harness, read_exact, read_request
    from selfheal.kernel_sandbox._harness.process import clean, kernel_gone, namespace
    from selfheal.kernel_sandbox._harness.session import compile_tests, run_candidate

_dumps = _marshal.dumps
_loads = _marshal.loads
_os_read = _os.read
_os_write = _os.write
_os_close = _os.close
_fork = _os.fork
_waitpid = _os.waitpid
_WNOHANG = _os.WNOHANG
_to_exitcode = _os.waitstatus_to_exitcode
_kill = _os.kill
_killpg = _os.killpg
_rmdir = _os.rmdir
_SIGKILL = _signalmod.SIGKILL
_exit = _os._exit
_setrlimit = _resource.setrlimit
_select = _selectmod.select
_PR_SET_PDEATHSIG = 1
_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MNT_DETACH = 2, 4, 32, 2


class _Child:
    """A forked process: standby (waiting for a request), then waiting, then active."""

    def __init__(self, pid: int, notify_r: int, go_w: int, work: str) -> None:
        self.pid = pid
        self.work = work  # its run's working directory, made before the fork
        self.notify_r = notify_r  # it tells us here which request it took
        self.go_w = go_w  # we write one byte here when it may run
        try:
            self.pidfd = _os.pidfd_open(pid)
        except (OSError, AttributeError):
            self.pidfd = -1
        self.seq = 0

    def close(self) -> None:
        for fd in (self.notify_r, self.go_w, self.pidfd):
            if fd >= 0:
                try:
                    _os_close(fd)
                except OSError:
                    pass
        self.notify_r = self.go_w = self.pidfd = -1


class Loop:
    """At most one standby, one active and one waiting process (a standby that took a
    request while the active one still ran)."""

    def __init__(self, h: Harness, fifo_fd: int, runs: str) -> None:
        self.h = h
        self.fifo_fd = fifo_fd
        self.runs = runs  # run directories are <runs>-r<n>/work
        self.count = 0
        self.standby: _Child | None = None
        self.active: _Child | None = None
        self.waiting: _Child | None = None
        self.lost = 0  # standby processes that died without a request, in a row
        self.later: list[tuple[_Child, int]] = []  # ended while another one was active
        self.reaped: dict[int, int] = {}

    def run(self) -> None:
        """Serve until the kernel is killed (or standby processes keep dying)."""
        namespace(self.h.boundary.iso, self.h.libc)  # its runs' PID namespace (process.py)
        while self.lost <= 5:
            if self.standby is None and self.waiting is None:
                self.count += 1
                self.standby = _spawn(self.h, self.fifo_fd, f"{self.runs}-r{self.count}/work")
            kids = [c for c in (self.standby, self.active, self.waiting) if c is not None]
            fds = [c.pidfd for c in kids if c.pidfd >= 0]
            sb = self.standby
            if sb is not None and sb.notify_r >= 0:
                fds.append(sb.notify_r)
            polling = any(c.pidfd < 0 for c in kids)
            ready, _, _ = _select(fds, [], [], 0.005 if polling else None)
            if sb is not None and sb.notify_r in ready:
                tests = self._took(sb)
                if sb.seq:
                    self.lost = 0
                    self.standby = None
                    if self.active is None:
                        self._start(sb)
                    else:
                        self.waiting = sb
                    # warm the cache the next standby inherits (K candidates share tests)
                    compile_tests(tests, 0, self.h.cache)
            for c in kids:
                if self._exited(c, ready):
                    self._gone(c)
            if self.active is None and self.later:
                for c, status in self.later:
                    self._end(c, status)
                    _remove_run(self.h, c.work)
                self.later.clear()
        self.h.send(("internal", 0, "the standby process keeps dying"))

    def _took(self, c: _Child) -> list[Any]:
        """Read which request the standby ``c`` took (``c.seq`` stays 0 if none)."""
        if c.notify_r < 0:
            return []
        chunks = []
        while True:
            try:
                b = _os_read(c.notify_r, 1 << 20)
            except OSError:
                b = b""
            if not b:
                break
            chunks.append(b)
        _os_close(c.notify_r)
        c.notify_r = -1
        try:
            seq, tests = _loads(b"".join(chunks))
            c.seq = int(seq)
        except (ValueError, EOFError, TypeError):
            return []
        self.h.last_seq = max(self.h.last_seq, c.seq)
        return list(tests)

    def _start(self, c: _Child) -> None:
        """Let ``c`` run its request (every process of the previous run is gone)."""
        self.active = c
        try:
            _os_write(c.go_w, b"g")
        except OSError:
            pass  # it is gone: its exit is handled like any other

    def _exited(self, c: _Child, ready: list[int]) -> bool:
        if c.pidfd >= 0:
            return c.pidfd in ready
        try:  # no pidfd here: poll
            pid, st = _waitpid(c.pid, _WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
        self.reaped[c.pid] = _to_exitcode(st)
        return True

    def _gone(self, c: _Child) -> None:
        status = self.reaped.pop(c.pid, None)
        if status is None:
            try:
                status = _to_exitcode(_waitpid(c.pid, 0)[1])
            except ChildProcessError:
                status = -1
        if c is self.active:
            self.active = None
            self._end(c, status)
            if self.waiting is not None:
                w, self.waiting = self.waiting, None
                self._start(w)
            _remove_run(self.h, c.work)  # after the go: off the next run's critical path
            return
        if c is self.standby:
            self.standby = None
            if not c.seq:
                self._took(c)  # it may have taken a request just before it died
            if not c.seq:
                self.lost += 1
                self._end(c, status)
                return
        elif c is self.waiting:  # died before it could run (out of memory?)
            self.waiting = None
        if self.active is None:
            self._end(c, status)
            _remove_run(self.h, c.work)
        else:  # reported once the active one is gone, so no two processes write at once
            self.later.append((c, status))

    def _end(self, c: _Child, status: int) -> None:
        """A process is gone: kill everything it left behind and say so."""
        try:
            _killpg(c.pid, _SIGKILL)
        except OSError:
            pass
        keep = {x.pid for x in (self.standby, self.active, self.waiting) if x}
        _kill_leftovers(keep | self.h.boundary.iso.keep())
        clean(self.h.boundary.iso)  # what the run left in the kernel's PID namespace
        c.close()
        if c.seq:
            self.h.send(("exit", c.seq, status))
        else:
            _remove_run(self.h, c.work)


def _run_fs(h: Harness, root: str, size_mb: int, remount: bool = False) -> None:
    """Mount a tmpfs of ``size_mb`` MiB on the run's folder ``root`` (or resize it): all
    the run may write; the kernel's own mount namespace keeps it from the host."""
    flags = _MS_NOSUID | _MS_NODEV | (_MS_REMOUNT if remount else 0)
    opts = f"size={size_mb}m,nr_inodes={size_mb * 256}" + ("" if remount else ",mode=700")
    if h.libc.mount(b"tmpfs", root.encode(), b"tmpfs", flags, opts.encode()) != 0:
        e = _lctypes.get_errno()
        raise OSError(e, f"mounting the run's {size_mb} MiB folder: {_os.strerror(e)}")


def _remove_run(h: Harness, work: str) -> None:
    if not work:
        return
    if h.disk_mb:  # a tmpfs: unmounting it frees whatever the candidate left
        h.libc.umount2(_os.path.dirname(work).encode(), _MNT_DETACH)
    try:  # the usual case: the candidate left nothing
        _rmdir(work + "/.tmp")
        _rmdir(work)
        _rmdir(_os.path.dirname(work))
    except OSError:
        _shutil.rmtree(_os.path.dirname(work), ignore_errors=True)


def _kill_leftovers(keep: set[int]) -> None:
    """Kill and reap every child of ours but ``keep`` (orphans come back to us)."""
    for _ in range(500):
        kids = [k for k in _children() if k not in keep]
        if not kids:
            return
        for kid in kids:
            try:
                _kill(kid, _SIGKILL)
            except OSError:
                pass
        for kid in kids:
            try:
                _waitpid(kid, 0)
            except ChildProcessError:
                continue


def _children() -> list[int]:
    """Our children: forked by the main thread, and orphans handed to the subreaper (the
    thread-group leader)."""
    pid = _os.getpid()
    try:
        fd = _os.open(f"/proc/self/task/{pid}/children", _os.O_RDONLY)
    except OSError:
        return []
    try:
        data = _os_read(fd, 1 << 16)
    finally:
        _os_close(fd)
    return [int(x) for x in data.split()]


def _spawn(h: Harness, fifo_fd: int, work: str) -> _Child:
    root = _os.path.dirname(work)
    _shutil.rmtree(root, ignore_errors=True)
    _os.mkdir(root, 0o700)
    if h.disk_mb:
        _run_fs(h, root, h.disk_mb)  # before the ruleset: Landlock names what is mounted
    _os.mkdir(work)
    _os.mkdir(work + "/.tmp")
    uid = h.boundary.iso.uid
    if uid >= 0:  # the run's process takes this uid before its boundary
        for d in (root, work, work + "/.tmp"):
            _os.chown(d, uid, uid)
    notify_r, notify_w = _os.pipe()
    go_r, go_w = _os.pipe()
    ruleset = for_run(h.boundary, work)  # built here, off the next run's critical path
    pid = _fork()
    if pid == 0:
        _os_close(notify_r)
        _os_close(go_w)
        _child(h, fifo_fd, notify_w, go_r, work, ruleset)  # never returns
    _os_close(notify_w)
    _os_close(go_r)
    if ruleset >= 0:
        _os_close(ruleset)
    return _Child(pid, notify_r, go_w, work)


def _child(h: Harness, fifo_fd: int, notify_w: int, go_r: int, work: str, ruleset: int) -> None:
    """A standby process: set up, take one request, wait for the go, run it, exit
    (``ruleset``: its own Landlock ruleset, or -1)."""
    code = 0
    seq = 0
    try:
        parent = _os.getppid()  # 0 in a PID namespace of its own: kernel_gone tells
        if h.libc is not None:
            h.libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)  # die with the kernel
        if _os.getppid() != parent or kernel_gone(h.boundary.iso):
            _exit(1)
        _os.setsid()
        g = h.guard
        g.pid = _os.getpid()
        # nothing but the pipes this process needs: not the kernel's ZeroMQ sockets
        low = 3
        keep = {fifo_fd, notify_w, go_r, h.out_fd, h.call_fd, ruleset, *h.boundary.keep()}
        keep.discard(-1)
        for fd in sorted(keep):
            _os.closerange(low, fd)
            low = fd + 1
        _os.closerange(low, 1 << 16)
        host_pid = standby(h.boundary, ruleset)  # its /proc, its rules for it
        req = read_request(h, fifo_fd)
        if req is None:
            h.send(("internal", 0, "a request was not signed by the host"))
            _exit(71)
        seq = req["seq"]
        tests = list(req.get("tests", ()))
        calls = h.call_fd if any(t[0] == "remote" for t in tests) else -1
        if calls < 0 and h.call_fd >= 0:
            _os_close(h.call_fd)  # only a run that serves calls holds their pipe
        disk = int(req.get("disk_mb", h.disk_mb))
        if h.disk_mb and disk != h.disk_mb:  # this run's own size
            _run_fs(h, _os.path.dirname(work), disk, remount=True)
        _os_write(notify_w, _dumps((seq, tests)))
        _os_close(notify_w)
        _os_close(fifo_fd)  # the candidate's process must not hold the request pipe
        read_exact(go_r, 1)  # every process of the previous run is gone
        _os_close(go_r)
        while calls >= 0 and _select([calls], [], [], 0)[0]:
            _os_read(calls, 1 << 20)  # what an earlier run left in the calls' pipe: dropped
        g.set_work(work)
        _os.chdir(work)
        uid = h.boundary.iso.uid
        for name, data in req.get("files", ()):  # checked on the host: plain names
            fd = _os.open(name, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL, 0o600)
            try:
                if uid >= 0:
                    _os.fchown(fd, uid, uid)
                view = memoryview(data)
                while view:
                    view = view[_os_write(fd, view) :]
            finally:
                _os_close(fd)
        _os.environ["TMPDIR"] = work + "/.tmp"
        for res, value in req.get("rlimits", ()):
            try:
                _setrlimit(res, (value, value))
            except (ValueError, OSError):
                pass
        # the boundary the operating system enforces, before any candidate code
        enter(
            h.boundary,
            work,
            ruleset,
            bool(req.get("allow_network", False)),
            bool(req.get("allow_subprocess", False)),
        )
        tempfile: Any = _sysmod.modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = None
        h.send(("start", seq, host_pid, work))  # the pid the host may kill
        compiled = compile_tests(tests, int(req.get("start", 0)), h.cache)

        def send(m: tuple[Any, ...]) -> None:
            h.send((m[0], seq, *m[1:]), cap)

        cap = int(req.get("line_cap", 0))  # the longest line the host reads

        run_candidate(g, h.checks, req, compiled, send, calls)
    except BaseException as e:
        code = 70
        try:
            h.send(("internal", seq, clip(f"{type(e).__name__}: {e}", MESSAGE_CAP)))
        except BaseException:
            pass
    finally:
        _exit(code)
