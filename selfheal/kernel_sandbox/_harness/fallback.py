"""Kernel side: the fallback boundary where Landlock is missing, and what both share:
``private_mounts`` (a private mount namespace for the run's process; needs root or user
namespaces), the ``seccomp`` filter and ``drop_capabilities`` (both boundaries). What each
hides or refuses: docs/sandbox.md, "The boundary the operating system enforces". Shipped to the kernel as source (see ``_harness/__init__.py``).
"""

from __future__ import annotations

import ctypes as _fctypes
import os as _os
import struct as _struct
import sys as _sysmod
from typing import Any

_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS_F = 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_HIDDEN = ("/root", "/home", "/tmp", "/var/tmp", "/run")
_DEV_NODES = ("null", "zero", "full", "random", "urandom")
_MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")  # read as empty files
_MOUNT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}

# (x86_64, aarch64) numbers; None where the call does not exist on that architecture
_EXEC_CALLS = {"execve": (59, 221), "execveat": (322, 281)}
_DENIED_CALLS = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "open_by_handle_at": (304, 265),
    "io_uring_setup": (425, 425),  # its requests would bypass this filter
    "iopl": (172, None),
    "ioperm": (173, None),
    "inotify_init": (253, None),  # file-system events: names and activity outside the run
    "inotify_init1": (294, 26),
    "inotify_add_watch": (254, 27),
    "fanotify_init": (300, 262),
    "fanotify_mark": (301, 263),
}
_CAP_HEADER = _struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
_CAP_DATA = bytes(24)  # two zeroed {effective, permitted, inheritable}
_SOCKET = (41, 198)
_PRLIMIT64 = (302, 261)  # allowed on this process only (pid 0: glibc's setrlimit/getrlimit)
_CLONE = (56, 220)  # allowed without CLONE_NEW* flags (threads, fork)
_CLONE3 = (435, 435)  # its flags are in memory a filter cannot read: ENOSYS, glibc falls back
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (clone's low byte is the
# exit signal, so CLONE_NEWTIME cannot be asked for there)
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
_CLONE_NEW |= 0x40000000
_ARCH = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
_SC_LD, _SC_JEQ, _SC_JGE, _SC_JSET, _SC_RET = 0x20, 0x15, 0x35, 0x45, 0x06
_SC_ALLOW, _SC_KILL = 0x7FFF0000, 0x80000000
_SC_EPERM, _SC_ENOSYS = 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_ERRNO | errno
_SC_ARG0 = 16  # seccomp_data.args[0], its low half (both architectures are little-endian)


class _SockFprog(_fctypes.Structure):
    _fields_ = (("len", _fctypes.c_ushort), ("filter", _fctypes.c_void_p))


def _assemble(prog: list[tuple[int, int, Any, Any]]) -> bytes:
    """BPF from (code, k, jump if true, jump if false): a jump is 0 (the next instruction)
    or the name of a label, set by a ``(-1, 0, name, 0)`` entry that takes no room."""
    at: dict[str, int] = {}
    n = 0
    for code, _, name, _ in prog:
        if code == -1:
            at[name] = n
        else:
            n += 1
    out = []
    i = 0
    for code, k, jt, jf in prog:
        if code == -1:
            continue
        off = [0 if j == 0 else at[j] - i - 1 for j in (jt, jf)]
        out.append(_struct.pack("HBBI", code, off[0], off[1], k))
        i += 1
    return b"".join(out)


def seccomp_program(machine: str, allow_exec: bool, allow_unix: bool) -> bytes:
    """The BPF program (what it refuses: docs/sandbox.md): ``allow_exec`` leaves ``execve`` alone,
    ``allow_unix`` the creation of Unix sockets (``socket(AF_UNIX, ...)``: Landlock does not
    bind connecting to a socket file; ``socketpair`` stays allowed). Always: ``prlimit64``
    only on this process, ``clone`` without ``CLONE_NEW*``, ``clone3`` answered ``ENOSYS``.
    ``ValueError`` on an architecture without a filter here."""
    if machine not in _ARCH:
        raise ValueError(f"no seccomp filter for {machine}")
    col, arch = _ARCH[machine]
    calls = dict(_DENIED_CALLS)
    if not allow_exec:
        calls.update(_EXEC_CALLS)
    nrs = sorted({nr for v in calls.values() if (nr := v[col]) is not None})
    label = -1
    prog: list[tuple[int, int, Any, Any]] = [
        (_SC_LD, 4, 0, 0),
        (_SC_JEQ, arch, 0, "kill"),
        (_SC_LD, 0, 0, 0),
    ]
    if machine == "x86_64":  # the x32 ABI's numbers: refused as a whole
        prog.append((_SC_JGE, 0x40000000, "deny", 0))
    if not allow_unix:
        prog.append((_SC_JEQ, _SOCKET[col], "socket", 0))
    prog += [
        (_SC_JEQ, _PRLIMIT64[col], "prlimit", 0),
        (_SC_JEQ, _CLONE[col], "clone", 0),
        (_SC_JEQ, _CLONE3[col], "enosys", 0),
    ]
    prog += [(_SC_JEQ, nr, "deny", 0) for nr in nrs]
    prog += [
        (_SC_RET, _SC_ALLOW, 0, 0),
        (label, 0, "socket", 0),
        (_SC_LD, _SC_ARG0, 0, 0),  # the family
        (_SC_JEQ, 1, "deny", "allow"),  # AF_UNIX
        (label, 0, "prlimit", 0),
        (_SC_LD, _SC_ARG0, 0, 0),  # the pid (pid_t: the kernel reads the low half only)
        (_SC_JEQ, 0, "allow", "deny"),
        (label, 0, "clone", 0),
        (_SC_LD, _SC_ARG0, 0, 0),  # the flags (the namespace flags are in the low half)
        (_SC_JSET, _CLONE_NEW, "deny", "allow"),
        (label, 0, "enosys", 0),
        (_SC_RET, _SC_ENOSYS, 0, 0),
        (label, 0, "kill", 0),
        (_SC_RET, _SC_KILL, 0, 0),
        (label, 0, "allow", 0),
        (_SC_RET, _SC_ALLOW, 0, 0),
        (label, 0, "deny", 0),
        (_SC_RET, _SC_EPERM, 0, 0),
    ]
    return _assemble(prog)


def seccomp_filter(code: bytes) -> tuple[Any, Any]:
    """The ``sock_fprog`` for ``code`` (``seccomp_program``), and the buffer it points to
    (keep both alive)."""
    buf = _fctypes.create_string_buffer(code, len(code))
    return _SockFprog(len(code) // 8, _fctypes.addressof(buf)), buf


def seccomp(libc: Any, prog: Any) -> None:
    """Install the filter ``prog`` (``seccomp_filter``) on this process (and what it
    forks), for good."""
    if libc.prctl(_PR_SET_NO_NEW_PRIVS_F, 1, 0, 0, 0) != 0:
        raise OSError(_fctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _fctypes.byref(prog), 0, 0) != 0:
        e = _fctypes.get_errno()
        raise OSError(e, f"seccomp filter: {_os.strerror(e)}")


def drop_capabilities(libc: Any) -> None:
    """Give up every capability (a root process keeps its uid, not its privileges). The
    bounding set stays: with ``no_new_privs`` (set by both boundaries) a program started
    later gets no capability this process lacks."""
    if libc.capset(_CAP_HEADER, _CAP_DATA) != 0:
        e = _fctypes.get_errno()
        raise OSError(e, f"capset: {_os.strerror(e)}")


def _mount(libc: Any, src: Any, target: str, fstype: Any, flags: int, data: Any = None) -> None:
    enc = [x.encode() if isinstance(x, str) else x for x in (src, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        e = _fctypes.get_errno()
        raise OSError(e, f"mount {target}: {_os.strerror(e)}")


def _mount_points() -> list[tuple[str, int]]:
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            f = line.split()
            flags = sum(_MOUNT_FLAGS.get(o, 0) for o in f[5].split(","))
            points.append((f[4].replace("\\040", " "), flags))
    return points


def private_mounts(libc: Any, work: str, host_home: str, allow_subprocess: bool) -> bool:
    """Enter a private mount namespace that leaves the process only its directory to write
    and hides the home folders (docs/sandbox.md); False where it cannot."""
    if libc.unshare(_CLONE_NEWNS) != 0:
        return False
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
    points = _mount_points()
    hidden = [d for d in dict.fromkeys((*_HIDDEN, _os.path.realpath(host_home))) if d != "/"]
    hidden = [d for d in hidden if _os.path.isdir(d)]
    under = tuple(d + "/" for d in hidden)
    python = {
        _os.path.realpath(p)
        for p in (_sysmod.prefix, _sysmod.base_prefix, _sysmod.exec_prefix)
        if _os.path.realpath(p).startswith(under)
    }
    keep = {p: _os.open(p, _os.O_PATH | _os.O_CLOEXEC) for p in (*sorted(python), work)}
    devs = {n: _os.open(f"/dev/{n}", _os.O_PATH | _os.O_CLOEXEC) for n in _DEV_NODES}
    quiet = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    try:
        for d in hidden:
            _mount(libc, "tmpfs", d, "tmpfs", quiet, "size=64k,mode=755")
        for p, fd in keep.items():
            _os.makedirs(p, exist_ok=True)
            _mount(libc, f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC)
        _mount(libc, "tmpfs", "/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "size=64k,mode=755")
        for n, fd in devs.items():
            open(f"/dev/{n}", "w").close()
            _mount(libc, f"/proc/self/fd/{fd}", f"/dev/{n}", None, _MS_BIND)
        for f in _MASKED:
            if _os.path.isfile(f):
                _mount(libc, f"/proc/self/fd/{devs['null']}", f, None, _MS_BIND)
        if allow_subprocess:  # multiprocessing's semaphores
            _os.mkdir("/dev/shm")
            _mount(libc, "tmpfs", "/dev/shm", "tmpfs", quiet, "size=16m,mode=1777")
    finally:
        for fd in (*keep.values(), *devs.values()):
            _os.close(fd)
    # everything read-only but the run's directory (and the semaphores' tmpfs)
    ro = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
    for point, flags in points:
        if not point.startswith((*under, "/dev", "/proc")) and point not in hidden:
            try:
                _mount(libc, None, point, None, ro | flags)
            except OSError:
                pass  # hidden below a new mount, or gone
    for p in python:
        _mount(libc, None, p, None, ro | _MS_NOSUID | _MS_NODEV)
    for d in hidden:
        _mount(libc, None, d, None, _MS_REMOUNT | _MS_RDONLY | quiet, "size=64k,mode=755")
    _mount(libc, None, "/dev", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC)
    _mount(libc, None, work, None, _MS_REMOUNT | _MS_BIND | quiet)
    _mount(libc, "tmpfs", "/proc", "tmpfs", quiet | _MS_RDONLY, "size=4k,mode=555")
    _os.chdir(work)  # the bound directory, not the one below the read-only mounts
    return True
