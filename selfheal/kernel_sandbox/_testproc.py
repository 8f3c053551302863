"""The test process: your pytest-form tests run here, by pytest itself, in a process that runs no
candidate code; the code under test is a ``Remote`` handle whose every operation the host
forwards to the candidate's process (docs/sandbox.md, "Your tests in pytest's form"). Plain
Python, loaded by path (``_testrun.py``)."""

from __future__ import annotations

import builtins
import marshal
import os
import sys
import types
from typing import Any

_FILE = "test_your_tests.py"
_TEXT = 16000
_NOT_EXCEPTIONS = ("SystemExit", "KeyboardInterrupt", "GeneratorExit")


class Channel:
    """The pipes to the host: 8-byte length, then ``marshal`` of plain data, each way."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd

    def send(self, obj: Any) -> None:
        data = marshal.dumps(obj)
        view = memoryview(len(data).to_bytes(8, "big") + data)
        while view:
            view = view[os.write(self.wfd, view) :]

    def recv(self) -> Any:
        n = int.from_bytes(self._exact(8), "big")
        return marshal.loads(self._exact(n))

    def _exact(self, n: int) -> bytes:
        parts = []
        while n:
            b = os.read(self.rfd, min(n, 1 << 20))
            if not b:
                raise SystemExit(0)  # the host is gone
            parts.append(b)
            n -= len(b)
        return b"".join(parts)


CHANNEL: Channel | None = None
VALUES: Any = None  # selfheal.kernel_sandbox.values, loaded by path


class CandidateError(Exception):
    """An exception of a type the candidate defined (this class's name is that type's)."""


class CandidateTimeout(BaseException):
    """The candidate's code ran over the test's time: the item is a ``timeout``."""


class CandidateCrashed(BaseException):
    """The candidate's process died under a call: the item is ``crashed``."""


_EXC_CLASSES: dict[tuple[str, str], type] = {}


def exception_class(name: str, base: str) -> type:
    """The local class standing for the candidate's exception type ``name`` (nearest builtin
    base ``base``): a ``CandidateError`` and, where it can be, a ``base`` too."""
    key = (name, base)
    cls = _EXC_CLASSES.get(key)
    if cls is None:
        b = getattr(builtins, base, None)
        bases: tuple[type, ...] = (CandidateError,)
        if isinstance(b, type) and issubclass(b, Exception) and b is not Exception:
            bases = (CandidateError, b)
        try:
            cls = type(name, bases, {"__module__": "candidate", "__qualname__": name})
        except TypeError:  # builtin layouts that cannot be combined
            cls = type(name, (CandidateError,), {"__module__": "candidate", "__qualname__": name})
        _EXC_CLASSES[key] = cls
    return cls


def _str(x: Any, n: int = _TEXT) -> str:
    return x[:n] if type(x) is str else ""


def raised(r: tuple[Any, ...]) -> BaseException:
    """The exception of a reply ``("x", type name, message, args, base, traceback)``."""
    name, msg, args, base, tb = _str(r[1], 200), _str(r[2]), r[3], _str(r[4], 100), _str(r[5])
    b = getattr(builtins, base, None)
    exc: BaseException | None = None
    if name == base and isinstance(b, type) and issubclass(b, Exception):
        decoded = VALUES.decode(args) if type(args) is tuple else None
        try:
            exc = b(*decoded) if type(decoded) is tuple else b(msg)
        except Exception:
            exc = None
    if exc is None:
        exc = exception_class(name, base if name != base or base in _NOT_EXCEPTIONS else "")(msg)
    if tb:
        exc.add_note("in the candidate's process:\n" + tb)
    return exc


def encode(v: Any, depth: int = 0) -> Any:
    """A value of the test for the candidate's process: plain data (``_wire``'s tags, types
    by identity) or a handle."""
    t = type(v)
    if depth > 100:
        raise TypeError("a value nested more than 100 deep")
    if t is Remote:
        return ("H", object.__getattribute__(v, "_sh_id"))
    if t is float:
        return ("f", v.hex())
    if t is int or t is str or t is bytes or t is bool or v is None:
        return ("p", v)
    if t is complex:
        return ("c", v.real.hex(), v.imag.hex())
    if t is bytearray:
        return ("ba", bytes(v))
    if t is range:
        return ("r", v.start, v.stop, v.step)
    if t is list or t is tuple or t is set or t is frozenset:
        tag = "l" if t is list else "t" if t is tuple else "s" if t is set else "z"
        return (tag, [encode(x, depth + 1) for x in v])
    if t is dict:
        return ("d", [(encode(k, depth + 1), encode(x, depth + 1)) for k, x in v.items()])
    wire = sys.modules["selfheal.kernel_sandbox._wire"]
    enc = wire.encode_result(v)
    if not wire.holds_opaque(
        enc
    ):  # dates, Decimal, NumPy, pandas: as the candidate's values come back
        return enc
    raise TypeError(
        f"a {t.__qualname__} cannot be sent to the candidate's code: your test runs in a "
        "process of its own and the candidate's code in another, so what the test passes to "
        "it must be data (numbers, strings, bytes, lists, tuples, dicts, sets, None, dates, "
        "Decimal, NumPy arrays, pandas Series and DataFrames) or a value the candidate "
        "returned. Pass data, or run the tests in the candidate's process: "
        "Limits(pytest_tests='in_process')"
    )


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    """One operation in the candidate's process (see the module docstring)."""
    assert CHANNEL is not None
    CHANNEL.send(("call", op, [encode(a) for a in args], {k: encode(v) for k, v in kwargs.items()}))
    m = CHANNEL.recv()
    if type(m) is not tuple or len(m) != 4 or m[0] != "r":
        raise CandidateCrashed("the host sent no reply")
    _, r, out, err = m
    if type(out) is str and out:
        sys.stdout.write(out)
    if type(err) is str and err:
        sys.stderr.write(err)
    return _value(r)


def _value(r: Any) -> Any:
    """A reply as a value (see ``call``)."""
    kind = r[0] if type(r) is tuple and r else None
    if kind == "v" and len(r) == 2:
        return VALUES.decode(r[1])
    if kind == "h" and len(r) == 4 and type(r[1]) is int:
        if type(r[3]) is str:  # an exception class of the candidate's: a local stand-in
            return exception_class(_str(r[2], 200), _str(r[3], 100))
        return Remote(r[1], _str(r[2], 200))
    if kind == "x" and len(r) == 6:
        raise raised(r)
    if kind == "t":
        raise CandidateTimeout("the candidate's code ran over the test's time and was stopped")
    why = _str(r[1]) if kind == "crashed" and len(r) == 2 else "a malformed reply"
    raise CandidateCrashed(why)


def candidate_names(names: Any) -> dict[str, Any]:
    """The candidate's top-level names (the host's reply to ``namespace``) as values and
    handles, as a test in the candidate's process sees them; those that are not builtin
    names are also put in this process's builtins, so the test module's own top level finds
    them while it is imported. Modules the candidate imported are left out (import them)."""
    r = names[0] if type(names) is tuple and names else None
    if type(r) is not tuple or len(r) != 2 or r[0] != "ns" or type(r[1]) is not list:
        return {}
    out: dict[str, Any] = {}
    for pair in r[1]:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str:
            continue
        name, reply = pair
        if (
            type(reply) is tuple
            and reply[:1] == ("h",)
            and len(reply) == 4
            and reply[2] == "module"
        ):
            continue
        try:
            out[name] = _value(reply)
        except BaseException:
            continue
    for name, v in out.items():
        if not hasattr(builtins, name):
            setattr(builtins, name, v)
        if not hasattr(CandidateModule, name):  # a data descriptor: monkeypatch reads it
            setattr(CandidateModule, name, _attribute(name))
    return out


def _attribute(name: str) -> property:
    """The candidate's top-level ``name`` as a property of the proxy module."""
    return property(
        lambda self: call("getattr", Remote(0, "module"), name),
        lambda self, v: call("setattr", Remote(0, "module"), name, v),
        lambda self: call("delattr", Remote(0, "module"), name),
    )


def _op(name: str, *, reflected: bool = False) -> Any:
    """The operator ``name`` as a method of ``Remote`` (``reflected``: ``other op self``)."""

    def method(self: Remote, *args: Any) -> Any:
        try:
            return call(name, *args, self) if reflected else call(name, self, *args)
        except TypeError as e:
            if "cannot be sent" in str(e):
                return NotImplemented
            raise

    return method


def _order(name: str) -> Any:
    def method(self: Remote, other: Any) -> Any:
        if type(other) is not Remote:
            raise TypeError(
                f"a candidate's {object.__getattribute__(self, '_sh_type')} is not plain data: "
                "it is not ordered against your test's values"
            )
        return call(name, self, other)

    return method


class Remote:
    """A handle to an object in the candidate's process (see the module docstring). ``==``
    with anything that is not a handle is False: the candidate's ``__eq__`` never sees the
    test's expected values."""

    __slots__ = ("_sh_id", "_sh_type")

    def __init__(self, handle: int, type_name: str) -> None:
        object.__setattr__(self, "_sh_id", handle)
        object.__setattr__(self, "_sh_type", type_name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return call("getattr", self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        call("setattr", self, name, value)

    def __delattr__(self, name: str) -> None:
        call("delattr", self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call("call", self, *args, **kwargs)

    def __repr__(self) -> str:
        try:
            r = call("repr", self)
        except Exception:
            r = None
        return r if type(r) is str else f"<candidate {object.__getattribute__(self, '_sh_type')}>"

    def __str__(self) -> str:
        r = call("str", self)
        return r if type(r) is str else repr(self)

    def __bool__(self) -> bool:
        r = call("bool", self)
        if type(r) is not bool:
            raise TypeError("the candidate's __bool__ returned no bool")
        return r

    def __len__(self) -> int:
        r = call("len", self)
        if type(r) is not int:
            raise TypeError("the candidate's __len__ returned no int")
        return r

    def __iter__(self) -> Any:
        it = call("iter", self)
        return it if type(it) is Remote else iter(it)

    def __next__(self) -> Any:
        return call("next", self)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Remote:
            return False
        return call("eq", self, other) is True

    def __ne__(self, other: object) -> bool:
        if type(other) is not Remote:
            return True
        return call("ne", self, other) is True

    def __hash__(self) -> int:
        return hash(object.__getattribute__(self, "_sh_id"))

    def __instancecheck__(self, obj: Any) -> bool:  # ``isinstance(x, Stack)``, ``Stack`` a handle
        return call("isinstance", obj, self) is True

    def __subclasscheck__(self, cls: Any) -> bool:
        return call("issubclass", cls, self) is True

    __lt__, __le__, __gt__, __ge__ = _order("lt"), _order("le"), _order("gt"), _order("ge")
    __contains__ = _op("contains")
    __getitem__, __setitem__, __delitem__ = _op("getitem"), _op("setitem"), _op("delitem")
    __add__, __sub__, __mul__, __truediv__ = _op("add"), _op("sub"), _op("mul"), _op("truediv")
    __floordiv__, __mod__, __pow__, __matmul__ = (
        _op("floordiv"),
        _op("mod"),
        _op("pow"),
        _op("matmul"),
    )
    __and__, __or__, __xor__ = _op("and_"), _op("or_"), _op("xor")
    __radd__, __rsub__, __rmul__, __rtruediv__ = (
        _op("add", reflected=True),
        _op("sub", reflected=True),
        _op("mul", reflected=True),
        _op("truediv", reflected=True),
    )
    __neg__, __pos__, __abs__, __invert__ = _op("neg"), _op("pos"), _op("abs"), _op("invert")


class CandidateModule(types.ModuleType):
    """The code under test as a module: its attributes are the candidate's, read (and, by
    ``monkeypatch.setattr``, set) in the candidate's process."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return call("getattr", Remote(0, "module"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") and name.endswith("__"):
            types.ModuleType.__setattr__(self, name, value)
        else:
            call("setattr", Remote(0, "module"), name, value)

    def __delattr__(self, name: str) -> None:
        call("delattr", Remote(0, "module"), name)
