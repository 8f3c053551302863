"""Kernel side: the Landlock boundary around a candidate's process, in two layers applied before
the candidate loads (``restrict``): the run's files layer and the kernel's (execution, TCP,
scoping); what each allows: docs/sandbox.md, "The boundary the operating system enforces".
Raw system calls through ``ctypes``; shipped to the kernel as source (``_harness/__init__.py``)."""

from __future__ import annotations

import ctypes as _ctypes
import os as _os
import sys as _sysmod
from typing import Any

_SYS_CREATE_RULESET = 444  # the same numbers on x86_64 and aarch64
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_* bits 0 to 15, in the kernel's order (REFER: ABI 2, TRUNCATE: ABI 3,
# IOCTL_DEV: ABI 5); LANDLOCK_ACCESS_NET_* (ABI 4); LANDLOCK_SCOPE_* (ABI 6)
(
    _EXECUTE,
    _WRITE_FILE,
    _READ_FILE,
    _READ_DIR,
    _REMOVE_DIR,
    _REMOVE_FILE,
    _MAKE_CHAR,
    _MAKE_DIR,
    _MAKE_REG,
    _MAKE_SOCK,
    _MAKE_FIFO,
    _MAKE_BLOCK,
    _MAKE_SYM,
    _REFER,
    _TRUNCATE,
    _IOCTL_DEV,
) = (1 << i for i in range(16))
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ = _READ_FILE | _READ_DIR
_WRITE = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_SYM
    | _REFER
    | _TRUNCATE
)
# read only: the system's libraries and data, and a few files programs expect
_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/sys/devices/system/cpu")
_ETC = (
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/ssl/certs",  # not /etc/ssl: its private/ holds the host's keys
    "/etc/ssl/openssl.cnf",
    "/etc/pki/tls/certs",  # the same on Red Hat's systems
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/ca-trust/extracted",
    "/etc/matplotlibrc",
    "/etc/fonts",
)
# /proc: what a run's process sees there (its own /proc where it has a PID namespace), opened
# by that process (``proc_rules``); never another process's entries, nor its own ``mem``,
# ``environ``, ``pagemap``, ``fd``
_PROC_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat")
_PROC_SELF = (
    "maps",  # threadpoolctl (scikit-learn), memory profilers
    "status",
    "stat",
    "statm",
    "cgroup",  # joblib/loky's CPU count
    "mountinfo",
    "mounts",
    "limits",
    "cmdline",
    "comm",
)
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _RulesetAttr(_ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", _ctypes.c_uint64),
        ("handled_access_net", _ctypes.c_uint64),
        ("scoped", _ctypes.c_uint64),
    )


class _PathBeneath(_ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", _ctypes.c_uint64), ("parent_fd", _ctypes.c_int32))


def _libc() -> Any:
    libc = _ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = _ctypes.c_long
    return libc


def landlock_abi(libc: Any = None) -> int:
    """The Landlock ABI version this kernel offers (0: none, or refused by a seccomp
    filter or a disabled LSM)."""
    try:
        libc = libc or _libc()
        v = int(libc.syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(v, 0)


def _handled_fs(abi: int) -> int:
    return _FS_BY_ABI.get(abi, (1 << 16) - 1)


def _python_dirs() -> list[str]:
    dirs = {
        _os.path.realpath(p)
        for p in (
            _sysmod.prefix,
            _sysmod.base_prefix,
            _sysmod.exec_prefix,
            _sysmod.base_exec_prefix,
        )
    }
    return sorted(d for d in dirs if d != "/")


def static_rules() -> list[tuple[int, int]]:
    """(descriptor, access) of every fixed rule, opened once at warm-up: read (not
    execute) on the Python installation, the system's libraries, a few files programs
    expect; read and write on the harmless devices."""
    pairs = [(p, _READ) for p in (*_python_dirs(), *_SYSTEM, *_ETC)]
    pairs += [(p, _READ_FILE | _WRITE_FILE) for p in _DEVICES]
    out = []
    for path, access in pairs:
        try:
            fd = _os.open(path, _os.O_PATH | _os.O_CLOEXEC)
        except OSError:
            continue  # absent here: nothing to allow
        if _os.fstat(fd).st_mode & 0o170000 != 0o040000:  # not a directory
            access &= _FILE_ONLY
        out.append((fd, access))
    return out


def proc_rules(libc: Any, abi: int, ruleset: int) -> list[int]:
    """(In a run's process, before it restricts itself.) Add to ``ruleset`` reading the
    system-wide /proc files and its own ``/proc/self`` entries that libraries read
    (``_PROC_SELF``). Returns the ``O_PATH`` descriptors of those entries, to keep open:
    the rules name their inodes, which /proc would otherwise make anew once forgotten."""
    fds = []
    for path in (*_PROC_FILES, *(f"/proc/self/{name}" for name in _PROC_SELF)):
        try:
            fd = _os.open(path, _os.O_PATH | _os.O_CLOEXEC)
        except OSError:
            continue  # absent here (or the fallback's hidden /proc)
        fds.append(fd)
        _add(libc, ruleset, fd, _READ_FILE & _handled_fs(abi))
    return fds


def _create(libc: Any, handled_fs: int, handled_net: int, scoped: int) -> int:
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    size = 24 if scoped else 16 if handled_net else 8
    fd = int(libc.syscall(_SYS_CREATE_RULESET, _ctypes.byref(attr), size, 0))
    if fd < 0:
        e = _ctypes.get_errno()
        raise OSError(e, f"landlock_create_ruleset: {_os.strerror(e)}")
    return fd


def _add(libc: Any, ruleset: int, fd: int, access: int) -> None:
    rule = _PathBeneath(access, fd)
    if access and libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, _ctypes.byref(rule), 0):
        e = _ctypes.get_errno()
        raise OSError(e, f"landlock_add_rule: {_os.strerror(e)}")


def run_ruleset(
    libc: Any, abi: int, static: list[tuple[int, int]], work: str, extra: tuple[str, ...] = ()
) -> int:
    """The files layer of one run: every file access but execution is handled; allowed are
    ``static`` and read and write (not devices) in ``work`` and the ``extra`` folders."""
    handled = _handled_fs(abi)
    fd = _create(libc, handled & ~_EXECUTE, 0, 0)
    try:
        for pfd, access in static:
            _add(libc, fd, pfd, access & handled)
        for path in (work, *extra):
            pfd = _os.open(path, _os.O_PATH | _os.O_CLOEXEC)
            try:
                _add(libc, fd, pfd, (_READ | _WRITE) & handled)
            finally:
                _os.close(pfd)
    except BaseException:
        _os.close(fd)
        raise
    return fd


def kernel_rulesets(libc: Any, abi: int) -> dict[tuple[bool, bool], int]:
    """The kernel's second layer, by (network allowed, subprocesses allowed), built once:
    program execution (allowed from the system and the Python installation only when
    subprocesses are), TCP (from ABI 4, unless network is allowed), signals and abstract
    Unix sockets scoped to the run's processes (from ABI 6)."""
    out: dict[tuple[bool, bool], int] = {}
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    for network in (False, True):
        net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 and not network else 0
        for sub in (False, True):
            fd = _create(libc, _EXECUTE, net, scoped)
            for path in (*_python_dirs(), *_SYSTEM) if sub else ():
                try:
                    pfd = _os.open(path, _os.O_PATH | _os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    _add(libc, fd, pfd, _EXECUTE)
                finally:
                    _os.close(pfd)
            out[(network, sub)] = fd
    return out


def restrict(fd: int, libc: Any = None) -> None:
    """(In a run's process, before the candidate loads.) Enforce the ruleset ``fd`` on this
    process and everything it forks, for good (each call adds a layer)."""
    libc = libc or _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(_SYS_RESTRICT_SELF, fd, 0) != 0:
        e = _ctypes.get_errno()
        raise OSError(e, f"landlock_restrict_self: {_os.strerror(e)}")
