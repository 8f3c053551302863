"""The kernel harness's parts, tested on the host without a kernel: the same modules whose
source every kernel executes (see ``selfheal/kernel_sandbox/_harness/__init__.py``)."""

from __future__ import annotations

import builtins
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from selfheal.kernel_sandbox import ProbeCall
from selfheal.kernel_sandbox._canon import canonical
from selfheal.kernel_sandbox._frames import frame_request, read_line
from selfheal.kernel_sandbox._harness import PARTS, Setup, install_code
from selfheal.kernel_sandbox._harness.capture import Cap, describe
from selfheal.kernel_sandbox._harness.channel import Harness, read_request, sign
from selfheal.kernel_sandbox._harness.compare import assert_cmp, cmp, pure, srepr, truth
from selfheal.kernel_sandbox._harness.guard import Guard, Timeout, audit, forbidden_read, guarded
from selfheal.kernel_sandbox._harness.session import Checks, compile_tests, run_candidate
from selfheal.kernel_sandbox.execution import _wire, normalize_tests
from selfheal.kernel_sandbox.split import split_test
from selfheal.kernel_sandbox.types import TestResult
from selfheal.kernel_sandbox.verdict import judge


class Yes:
    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __bool__(self) -> bool:
        return True

    __hash__ = object.__hash__


def test_plain_values_and_candidate_objects() -> None:
    assert pure([1, (2.5, "x"), {"k": {3}}, range(3), None])
    assert not pure([Yes()]) and not pure(type("I", (int,), {})(3))
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    assert not pure(deep)
    assert cmp("Eq", [1, 2], [1, 2]) and not cmp("Eq", Yes(), 4) and cmp("NotEq", Yes(), 4)
    assert not cmp("In", Yes(), [4]) and cmp("Is", None, None)
    with pytest.raises(AssertionError, match="cannot order"):
        cmp("Lt", Yes(), 5)
    with pytest.raises(AssertionError, match="only trusts the truth"):
        truth(Yes())
    with pytest.raises(AssertionError) as e:
        assert_cmp("Eq", 6, 7, "f(3) == 7")
    assert "left:  6" in str(e.value) and "right: 7" in str(e.value)
    assert "not a plain builtin value" in srepr(Yes())


def test_capture_is_capped_and_tracebacks_trimmed() -> None:
    cap = Cap(5)
    cap.write("hello world")
    assert cap.text() == "hello" and cap.truncated
    code = compile("def f():\n    raise ValueError('no')\n", "<candidate>", "exec")
    ns: dict[str, Any] = {}
    exec(code, ns)
    try:
        exec(compile("f()", "<test t0>", "exec"), ns)
    except ValueError as exc:
        name, msg, tb, line = describe(exc)
    assert (name, msg, line) == ("ValueError", "no", 2)
    assert '"<candidate>", line 2' in tb and __file__ not in tb


def test_audit_policy(tmp_path: Path) -> None:
    work = tmp_path / "selfheal-k-x" / "work"
    work.mkdir(parents=True)
    g = Guard(str(work), str(Path.home()), dict(builtins.__dict__), (sys.prefix,))
    assert forbidden_read(g, "/proc/1/environ") and not forbidden_read(g, f"/proc/{os.getpid()}/x")
    assert forbidden_read(g, tmp_path / "selfheal-k-other" / "conn.json")
    assert forbidden_read(g, tmp_path / "selfheal-k-x" / "req")
    assert not forbidden_read(g, work / "data.csv")
    assert forbidden_read(g, "/somewhere/.env") and forbidden_read(g, Path.home() / ".ssh/id")
    audit(g, "open", (str(work / "out.txt"), "w", 0))
    with pytest.raises(PermissionError, match="writing outside"):
        audit(g, "open", ("/tmp/escape.txt", "w", 0))
    with pytest.raises(PermissionError, match="network"):
        audit(g, "socket.connect", (None, ("1.1.1.1", 53)))
    with pytest.raises(PermissionError, match="processes"):
        audit(g, "os.fork", ())
    with pytest.raises(PermissionError, match="signalling"):
        audit(g, "os.kill", (1, 9))
    g.allow_network = g.allow_subprocess = True
    audit(g, "socket.connect", (None, ("1.1.1.1", 53)))
    audit(g, "os.fork", ())


def test_guarded_restores_builtins_and_streams(tmp_path: Path) -> None:
    g = Guard(str(tmp_path / "work"), "", dict(builtins.__dict__))
    out, err = Cap(100), Cap(100)
    # a builtin no other thread of this process uses meanwhile (the swap is process-wide:
    # patching ``len`` here broke a sandbox pool's thread left by an earlier test module)
    real_ascii = builtins.ascii

    def patch() -> None:
        print("inside")
        builtins.ascii = lambda x: "3"  # type: ignore[assignment]

    assert guarded(g, patch, 5.0, out, err) is None
    assert builtins.ascii is real_ascii and out.text() == "inside\n"
    assert g.candidate_builtins is not None and g.candidate_builtins["ascii"] is not real_ascii
    g.started = False  # this test installed no audit hook; leave the Guard inert

    def spin() -> None:
        while True:
            pass

    assert type(guarded(g, spin, 0.2, out, err)) is Timeout


def _session(code: str, tests: list[Any]) -> list[tuple[Any, ...]]:
    """One candidate run in this process, as a forked kernel process runs it."""
    work = tempfile.mkdtemp(prefix="selfheal-k-") + "/work"
    g = Guard(work, "", dict(builtins.__dict__))
    checks = Checks({}, {"canonical": canonical, "__builtins__": {}})
    norm = normalize_tests(tests)
    wire = [_wire(t) for t in norm]
    req = {"code": code, "tests": wire, "load_timeout": 2.0, "test_timeout": 2.0}
    sent: list[tuple[Any, ...]] = []
    saved = dict(builtins.__dict__)
    try:
        run_candidate(g, checks, req, compile_tests(wire, 0, {}), sent.append)
    finally:
        builtins.__dict__.update(saved)
        sys.modules.pop("candidate", None)
    return sent


def test_a_session_in_process() -> None:
    sent = _session(
        "def f(x):\n    return 2 * x\n",
        ["assert f(2) == 4", "assert f(3) == 7", ProbeCall(id="p", expr="f(0.1 + 0.2)"), "f("],
    )
    kinds = [m[0] for m in sent]
    assert kinds == ["load", "result", "result", "result", "result", "done"]
    # the assert lines are split: the process returns f(2) and f(3); the host judges them
    assert [m[2] for m in sent[1:5]] == ["passed", "passed", "passed", "error"]
    assert sent[1][-1] == ("vals", [("v", ("p", 4))]) and sent[2][-1] == ("vals", [("v", ("p", 6))])
    split = split_test("assert f(3) == 7")
    assert split is not None
    r = judge(split, TestResult(test_id="t1", outcome="passed"), sent[2][-1])
    assert r.outcome == "failed" and "left:  6" in r.message
    assert sent[3][-1] == ("canon", "0.6")
    assert sent[4][3] == "SyntaxError"


def test_a_session_that_does_not_load() -> None:
    sent = _session("def f(:\n", ["assert True"])
    assert sent[0][:4] == ("load", False, "error", "SyntaxError") and sent[-1] == ("done",)


def test_editing_the_harness_namespace_fails_the_test() -> None:
    ns: dict[str, Any] = {"__builtins__": {}, "x": 1}
    checks = Checks(ns, {})
    assert not checks.harness_changed()
    ns["x"] = 2
    assert checks.harness_changed() and ns["x"] == 1


def test_compile_cache_is_shared_across_runs() -> None:
    wire = [_wire(t) for t in normalize_tests(["assert 1 == 1"])]
    cache: dict[Any, Any] = {}
    first = compile_tests(wire, 0, cache)
    assert compile_tests(wire, 0, cache)[0][1] is first[0][1]


def test_requests_and_result_lines_round_trip(tmp_path: Path) -> None:
    key = os.urandom(32)
    g = Guard(str(tmp_path / "work"), "", dict(builtins.__dict__))
    h = Harness(key, -1, g, Checks({}, {}))
    r, w = os.pipe()
    req = {"seq": 1, "code": "x = 1", "tests": [("assert", "t0", "pass", True)]}
    os.write(w, frame_request(key, req))
    assert read_request(h, r) == req
    os.write(w, frame_request(key, req))  # replayed: same number
    assert read_request(h, r) is None
    os.write(w, frame_request(os.urandom(32), {**req, "seq": 2}))  # not our key
    assert read_request(h, r) is None
    line = sign(key, ("result", 1, 0, "passed", None, "", "", "", "", False, 0.1, None))
    assert line.startswith(b"\n") and line.endswith(b"\n")
    assert read_line(key, line.strip())[:4] == ("result", 1, 0, "passed")  # type: ignore[index]
    assert read_line(os.urandom(32), line.strip()) is None
    assert read_line(key, b"junk" + line.strip()) is None


def test_install_code_ships_every_part() -> None:
    setup = Setup(
        key_file="/k",
        work="/w",
        fifo="/f",
        out_fifo="/o",
        host_home="/h",
        boundary="off",
        disk_mb=0,
    )
    code = install_code(setup)
    assert repr(dict(setup)) in code  # what the kernel installs with
    compile(code, "<install>", "exec")
    for part in PARTS:
        assert repr(part.read_text())[:200] in code


def test_no_two_harness_parts_bind_one_name_differently() -> None:
    """The parts run in one namespace: a name bound at the top of two parts must mean the same
    thing in both, or the later part silently replaces the earlier one's (a codec helper
    named like a tracer helper sent 30 MB type names to the host)."""
    import ast as _ast

    seen: dict[str, tuple[str, str]] = {}
    for part in PARTS:
        tree = _ast.parse(part.read_text())
        body = [s for s in tree.body if not isinstance(s, _ast.If)]  # the host-only imports
        for node in body:
            names: list[str] = []
            if isinstance(node, _ast.FunctionDef | _ast.ClassDef):
                names = [node.name]
            elif isinstance(node, _ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, _ast.Name)]
            for name in names:
                text = _ast.unparse(node)
                if name in seen and seen[name][1] != text:
                    raise AssertionError(f"{name} is bound in {seen[name][0]} and {part.name}")
                seen[name] = (part.name, text)
