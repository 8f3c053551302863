"""Your own tests made trusted test cases: assert lines (one test), or a pytest module collected
once per run in the sandbox, each item one test (``u1::test_median[even]``; docs/usage.md and
docs/sandbox.md, "Your tests in pytest's form"); a test that can check nothing is a
``ConfigError`` before any candidate runs, one that checks no value a smoke test."""

from __future__ import annotations

import ast
import builtins
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selfheal._parse import ast_parse
from selfheal._sync import sync_twin
from selfheal.errors import ConfigError
from selfheal.inputs import check_python, read_text_file
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.state import HealState, TestCase

_MARK = "__selfheal_collected__ "


@dataclass(frozen=True, kw_only=True)
class CodeImport:
    """A name a test imports from the code under test (read from the candidate)."""

    name: str | None
    """The name imported (``from stats import median``), or None for the module itself
    (``import stats``: the names are then the attributes the test reads, ``stats.median``)."""
    module: str
    """The module it names (``stats``), or the alias the test gives the module."""
    line: int
    """The line of the import in the test."""


@dataclass(frozen=True, kw_only=True)
class UserTest:
    """One test you gave, checked and in the form it runs in."""

    text: str
    """The test's text (statements, or a pytest module with its imports made to fall back
    on the candidate)."""
    origin: str
    """Where it came from: ``test 1``, or the file's path."""
    pytest: bool
    """True for a pytest module (collected into items), False for statements."""
    imports: tuple[CodeImport, ...] = ()
    """What it imports from the code under test."""


def is_pytest_module(tree: ast.Module) -> bool:
    """True when the module defines a test function, a ``Test*`` class or a
    ``unittest.TestCase`` class (pytest collects it whatever its name) at top level."""
    return any(
        (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test"))
        or (
            isinstance(n, ast.ClassDef)
            and (
                n.name.startswith("Test")
                or any(ast.unparse(b).endswith("TestCase") for b in n.bases)
            )
        )
        for n in tree.body
    )


def _checks(node: ast.AST) -> bool:
    """An assert, a raise, or a call that checks (``self.assertEqual``, ``pytest.raises``)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Assert | ast.Raise):
            return True
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and (n.func.attr.startswith("assert") or n.func.attr in ("raises", "fail"))
        ):
            return True
    return False


def _statements(code: str, tree: ast.Module, what: str) -> str:
    """Statements that check something when they run; a bare comparison becomes an assert."""
    lines = code.splitlines()
    for node in reversed(tree.body):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Compare):
            i = node.lineno - 1
            lines[i] = lines[i][: node.col_offset] + "assert " + lines[i][node.col_offset :]
    code = "\n".join(lines)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    top = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    called = {
        n.func.id
        for stmt in top
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    if defined and not (called & defined) and not any(_checks(s) for s in top):
        names = ", ".join(sorted(defined))
        raise ConfigError(
            f"{what} defines {names} but never calls it, so it would check nothing. Call it "
            f"(e.g. `{sorted(defined)[0]}(...)`), or name it `test_...` to make the text a "
            "pytest module whose test functions selfheal runs."
        )
    if (
        not _checks(tree)
        and not any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Compare) for n in tree.body)
        and not _calls_code(top)
    ):
        raise ConfigError(
            f"{what} checks nothing (no assert, no raise, no call, no test function): "
            f"{code.strip()[:80]!r}. Write an assertion, e.g. `assert f(2) == 4`, or a "
            "pytest function `def test_f(): ...`."
        )
    return code


def _calls_code(statements: Sequence[ast.stmt]) -> bool:
    """A call of something other than a builtin (the code under test, most likely): such a
    test checks that the call does not raise, a smoke test."""
    return any(
        isinstance(n, ast.Call)
        and (isinstance(n.func, ast.Attribute) or not hasattr(builtins, getattr(n.func, "id", "")))
        for stmt in statements
        for n in ast.walk(stmt)
    )


def _fallback_imports(
    code: str, tree: ast.Module, entry_point: str | None
) -> tuple[str, tuple[CodeImport, ...]]:
    """Imports of the code under test read from the candidate, on the same lines: ``from
    stats import median`` (a module the sandbox cannot import, or one that names
    ``entry_point``) becomes ``from candidate import median``; ``import stats`` of a module
    that cannot be imported becomes ``import candidate as stats``. Returns the code and what
    it imports from the code under test."""
    lines = code.splitlines()
    found: list[CodeImport] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {a.name for a in node.names}
            if node.module in ("__future__", "pytest") or (
                entry_point not in names and _importable(node.module)
            ):
                continue
            alias = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
            new = f"from candidate import {alias}"
            found += [
                CodeImport(name=a.name, module=node.module, line=node.lineno) for a in node.names
            ]
        elif isinstance(node, ast.Import) and len(node.names) == 1:
            a = node.names[0]
            if _importable(a.name) or "." in a.name:
                continue
            new = f"import candidate as {a.asname or a.name}"
            found.append(CodeImport(name=None, module=a.asname or a.name, line=node.lineno))
        else:
            continue
        start, end = node.lineno - 1, (node.end_lineno or node.lineno)
        lines[start:end] = [" " * node.col_offset + new] + [""] * (end - start - 1)
    return "\n".join(lines), tuple(found)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def read_user_tests(
    tests: Sequence[str | os.PathLike[str]] | str | os.PathLike[str] | None,
    entry_point: str | None,
) -> tuple[UserTest, ...]:
    """Your tests, each read (a path: with the checks of ``--spec-file``), parsed and checked
    (see the module docstring)."""
    if tests is None:
        return ()
    if isinstance(tests, str | bytes | os.PathLike):
        tests = [tests]  # one test, not its characters
    out: list[UserTest] = []
    for i, t in enumerate(tests, start=1):
        if isinstance(t, os.PathLike) or (
            isinstance(t, str) and "\n" not in t and t.strip().endswith(".py")
        ):
            path = Path(os.fsdecode(t)).expanduser()
            if not path.is_file():
                raise ConfigError(
                    f"Your test file {str(path)!r} does not exist. Check the path (relative "
                    f"to {os.getcwd()!r}), or give the test's text instead."
                )
            what = f"Your test file {str(path)!r}"
            code = check_python(read_text_file(path, what), what)
            origin = str(path)
        else:
            what = f"Your test {i}"
            code = check_python(t, what)
            origin = f"test {i}"
        tree = ast_parse(code)
        pytest = is_pytest_module(tree)
        if not pytest:
            code = _statements(code, tree, what)
            tree = ast_parse(code)
        code, imports = _fallback_imports(code, tree, entry_point)
        out.append(UserTest(text=code, origin=origin, pytest=pytest, imports=imports))
    return tuple(out)


async def collect(
    executor: Executor, test: UserTest, limits: Limits | None = None
) -> dict[str, list[Any]]:
    """pytest's collection of ``test`` in the sandbox: ``{"items": [...], "skipped": [...],
    "errors": [...]}`` (see ``_harness/pytest_item.py``)."""
    r = await executor.arun_snippet(f"__sh_pytest__('collect', {test.text!r})", limits=limits)
    _, sep, tail = r.stdout.rpartition(_MARK)
    if not sep:
        why = f"{r.exc_type}: {r.message}" if r.exc_type else (r.stdout or r.outcome)[-400:]
        raise ConfigError(
            f"Your tests in {test.origin} could not be collected in the sandbox ({why}). "
            "Run them with `pytest --collect-only` to see why."
        )
    found: dict[str, list[Any]] = json.loads(tail.splitlines()[0])
    return found


def _shown(module: str, item: dict[str, object]) -> str:
    """The item as a reader sees it: its parameters, then the test function's source."""
    tree = ast_parse(module)
    nodes: Iterable[ast.stmt] = tree.body
    if item["cls"]:
        cls = next(
            (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == item["cls"]), None
        )
        nodes = cls.body if cls is not None else ()
    fn = next(
        (
            n
            for n in nodes
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == item["func"]
        ),
        None,
    )
    src = ast.get_source_segment(module, fn) if fn is not None else None
    params = item.get("params") or {}
    head = ", ".join(f"{k}={v}" for k, v in params.items())  # type: ignore[attr-defined]
    body = src or f"{item['func']}(...)"
    return f"# {head}\n{body}" if head else body


async def auser_test_cases(
    tests: Sequence[UserTest], executor: Executor | None, limits: Limits | None = None
) -> tuple[TestCase, ...]:
    """Trusted test cases for your tests: one per statements test, one per collected item of
    a pytest module (collected in ``executor``, once). A module pytest cannot collect, or
    that has no item to run, is a ``ConfigError``."""
    out: list[TestCase] = []
    for i, t in enumerate(tests, start=1):
        if not t.pytest:
            out.append(
                TestCase(
                    id=f"u{i}",
                    origin="user",
                    code=t.text,
                    trusted=True,
                    rationale=f"given by the user ({t.origin})",
                )
            )
            continue
        if executor is None:
            raise ConfigError("pytest-form tests need a sandbox to be collected in.")
        found = await collect(executor, t, limits)
        if found["errors"]:
            raise ConfigError(
                f"pytest could not collect your tests in {t.origin}:\n"
                + "\n".join(str(e)[-1500:] for e in found["errors"])
                + "\nFix the file (run `pytest --collect-only` on it); a test that cannot be "
                "collected could never pass."
            )
        if found["items"]:  # its runs' test server starts now, from this thread (pytest_process)
            from selfheal.kernel_sandbox.pytest_process import warm

            warm()
        if not found["items"]:
            skipped = "; ".join(f"{s['id']}: {s['reason']}" for s in found["skipped"])
            raise ConfigError(
                f"Your tests in {t.origin} have no test to run"
                + (f" (all skipped: {skipped})" if skipped else "")
                + ". Add a `def test_...():` with an assert."
            )
        for item in found["items"]:
            out.append(
                TestCase(
                    id=f"u{i}::{item['id']}",
                    origin="user",
                    code=_shown(t.text, item),
                    pytest_module=t.text,
                    pytest_item=json.dumps(item),
                    trusted=True,
                    rationale=f"given by the user ({t.origin}, line {item['line']})",
                )
            )
    return tuple(out)


user_test_cases = sync_twin(auser_test_cases)


def _as_function(name: str, body: str) -> str:
    """Statements as a pytest function (``def test_...():`` with the body indented)."""
    safe = "".join(ch if ch.isalnum() else "_" for ch in name).strip("_") or "test"
    lines = body.strip("\n").splitlines() or ["pass"]
    return f"def test_{safe}():\n" + "\n".join(f"    {ln}" if ln.strip() else "" for ln in lines)


_FROM_CANDIDATE = re.compile(r"^(\s*)from candidate import (.+)$", re.MULTILINE)
_CANDIDATE_AS = re.compile(r"^(\s*)import candidate as (\w+)$", re.MULTILINE)


def _exported_module(text: str, import_from: str | None) -> str:
    """A pytest module you gave, with its imports of the code under test put back: from
    ``import_from``, or from the code at the head of the file."""
    if import_from:
        text = _FROM_CANDIDATE.sub(rf"\1from {import_from} import \2", text)
        return _CANDIDATE_AS.sub(rf"\1import {import_from} as \2", text)
    text = _FROM_CANDIDATE.sub(r"\1# \2: defined at the head of this file", text)
    return _CANDIDATE_AS.sub(r"\1\2 = __import__('sys').modules[__name__]", text)


def tests_module(
    state: HealState, code: str, outcomes: Mapping[str, str], import_from: str | None = None
) -> str:
    """The tests behind a result as one pytest module (``HealResult.tests_file``)."""
    ev = state.evidence
    disputed = set(ev.disputed) if ev is not None else set()
    head = [
        f'"""Tests kept by selfheal for {state.spec.entry_point or "the code"} (run '
        f'{state.run_id}, status {state.status}). Run them with: pytest THIS_FILE"""',
        "",
    ]
    head.append(f"from {import_from} import *  # noqa: F403" if import_from else code.rstrip())
    parts: list[str] = ["\n".join(head)]
    modules: list[str] = []
    for t in state.tests:
        if t.pytest_module is not None:
            if t.pytest_module not in modules:
                modules.append(t.pytest_module)
                parts.append(
                    "# your tests, trusted\n" + _exported_module(t.pytest_module, import_from)
                )
            continue
        if t.trusted:
            why = "yours, trusted" if t.origin == "user" else f"{t.origin}, trusted"
        elif t.quarantined or t.id in disputed or outcomes.get(t.id) != "passed":
            continue  # only model-written tests the result passes and nobody disputes
        else:
            why = f"model-written ({t.origin}), passed by the result, not disputed"
        parts.append(f"# {t.id}: {why}\n" + _as_function(t.id, t.source))
    return "\n\n\n".join(parts) + "\n"


def code_spec(code: str, entry_point: str | None) -> str:
    """The spec for healing code you gave without one: make its function pass the tests."""
    tree = ast_parse(code)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    name = entry_point or (names[0] if names else None)
    if name is None:
        raise ConfigError(
            "The code you gave defines no function to heal. Give a spec as well, or "
            "--entry-point NAME."
        )
    doc = next(
        (
            ast.get_docstring(n)
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
        ),
        None,
    )
    return (
        f"Fix the function {name} in the given code so that it passes its tests and does what "
        "its name" + (f" and docstring say:\n\n{doc}" if doc else " says.")
    )
