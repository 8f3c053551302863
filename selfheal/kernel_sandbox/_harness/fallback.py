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
}
_CAP_HEADER = _struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
_CAP_DATA = bytes(24)  # two zeroed {effective, permitted, inheritable}
_SOCKET = (41, 198)
_ARCH = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}


class _SockFprog(_fctypes.Structure):
    _fields_ = (("len", _fctypes.c_ushort), ("filter", _fctypes.c_void_p))


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return _struct.pack("HBBI", code, jt, jf, k)


def seccomp_program(machine: str, allow_exec: bool, allow_unix: bool) -> bytes:
    """The BPF program (what it refuses: docs/sandbox.md): ``allow_exec`` leaves ``execve`` alone,
    ``allow_unix`` the creation of Unix sockets (``socket(AF_UNIX, ...)``: Landlock does not
    bind connecting to a socket file; ``socketpair`` stays allowed). ``ValueError`` on an
    architecture without a filter here."""
    if machine not in _ARCH:
        raise ValueError(f"no seccomp filter for {machine}")
    col, arch = _ARCH[machine]
    calls = dict(_DENIED_CALLS)
    if not allow_exec:
        calls.update(_EXEC_CALLS)
    nrs = sorted({nr for v in calls.values() if (nr := v[col]) is not None})
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny, allow, kill = 0x00050000 | 1, 0x7FFF0000, 0x80000000  # ERRNO(EPERM)
    n = len(nrs)
    # after the checks below come n comparisons, then "allow", then "deny"
    unix = (
        []
        if allow_unix
        else [
            _bpf(jeq, _SOCKET[col], 0, 2),  # socket(): look at its family, else go on
            _bpf(ld, 16),  # args[0], the family (low half)
            _bpf(jeq, 1, n + 1, n),  # AF_UNIX: deny, anything else: allow
        ]
    )
    prog = [_bpf(ld, 4), _bpf(jeq, arch, 1, 0), _bpf(ret, kill), _bpf(ld, 0)]
    if machine == "x86_64":  # the x32 ABI's numbers: refused as a whole
        prog.append(_bpf(jge, 0x40000000, len(unix) + n + 1, 0))
    prog += unix
    prog += [_bpf(jeq, nr, n - i, 0) for i, nr in enumerate(nrs)]
    prog += [_bpf(ret, allow), _bpf(ret, deny)]
    return b"".join(prog)


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
