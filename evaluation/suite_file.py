"""Your own tasks: a suite file (``--suite PATH``), JSONL with one task per line, or YAML with
a list of tasks.

Each task is a mapping with these fields (docs/evaluation.md, "Your own suite"):

* ``id`` (required): unique within the file;
* ``spec`` (required): the only text the agent sees, a plain-language spec, best with the
  signature (``def name(...)``);
* ``tests`` (required): the hidden tests, run only after the agent has finished, as
  HumanEval's are: a string of plain ``assert`` statements (one reference test), a string
  of pytest-style ``def test_...():`` functions, ``class Test...:`` classes or
  ``unittest.TestCase`` classes (one reference test per test function or ``test_`` method,
  with the class's set-up and tear-down), or a list of such strings; a test that runs
  nothing that checks a value (no assert, no test function) is a malformed task;
* ``entry_point``: the function the agent must define (default: the one ``def NAME(`` of
  the spec, or else its first ``NAME(`` in backticks);
* ``category``: a group for the per-category breakdown (default ``default``);
* ``setup``: code the tests need (imports, helpers), run before each test, after the
  candidate, so the candidate cannot replace it; never shown to the agent;
* ``solution``: a known-good solution (optional; ``python -m evaluation.suite_file PATH``
  runs it against its tests in the sandbox);
* ``code``: code the user already has, defining the entry point (a failing notebook cell);
  the agent gets it as ``--code`` gives it (``Task.code``);
* ``examples``: how many examples the spec states; ``python -m evaluation.suite_file`` checks
  that selfheal reads that many as trusted tests.

A malformed task is reported with its line number and field, every one of them at once.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from evaluation.errors import SuiteError
from evaluation.suite_checks import check_examples, check_solutions
from evaluation.task import Task

__all__ = [
    "FIELDS",
    "FileSuite",
    "check_examples",
    "check_solutions",
    "load_suite_file",
    "task_from_mapping",
]

FIELDS: dict[str, str] = {
    "id": "a unique, non-empty string",
    "spec": "the spec the agent sees, a non-empty string",
    "tests": "hidden tests: a string of asserts, of pytest-style test functions, of Test* or "
    "unittest.TestCase classes, or a list of such strings",
    "entry_point": "the name of the function to write",
    "category": "a non-empty string",
    "setup": "code the tests run first (imports, helpers)",
    "solution": "a known-good solution",
    "code": "code the user already has, defining the entry point (a failing cell)",
    "examples": "how many examples the spec states, a whole number >= 0",
}
"""Every field of a task, with what it must be (the error messages quote it)."""

REQUIRED = ("id", "spec", "tests")
"""The fields a task must have."""

SUFFIXES = (".jsonl", ".yaml", ".yml")
"""File names a suite file may end with."""

_DEF = re.compile(r"\bdef\s+([A-Za-z_]\w*)\s*\(")
_CODE_CALL = re.compile(r"`([A-Za-z_]\w*)\(")


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field!r}: {problem}")


def _text(raw: dict[str, Any], field: str, *, required: bool = False) -> str | None:
    value = raw.get(field)
    if value is None:
        if required:
            raise _Bad(field, f"missing; it must be {FIELDS[field]}")
        return None
    if not isinstance(value, str) or (field != "setup" and not value.strip()):
        raise _Bad(field, f"got {type(value).__name__} {value!r:.60}; it must be {FIELDS[field]}")
    return value


def _parse(field: str, code: str, what: str = "") -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        where = f" ({what})" if what else ""
        raise _Bad(field, f"not valid Python{where}: {exc.msg} at its line {exc.lineno}") from None


def _split_tests(tests: Any) -> list[str]:
    """The reference tests of the ``tests`` field (see the module docstring)."""
    if isinstance(tests, list):
        if not tests or not all(isinstance(t, str) and t.strip() for t in tests):
            raise _Bad("tests", f"a list must hold non-empty strings; it must be {FIELDS['tests']}")
        out: list[str] = []
        for i, code in enumerate(tests):
            out += _runs(code, _parse("tests", code, f"item {i}"), f" (item {i})")
        return out
    if not isinstance(tests, str) or not tests.strip():
        raise _Bad("tests", f"got {type(tests).__name__}; it must be {FIELDS['tests']}")
    return _runs(tests, _parse("tests", tests))


def _is_test_class(node: ast.ClassDef) -> bool:
    """``class Test*`` (pytest's), or a subclass of ``unittest.TestCase`` (by its base's name)."""
    bases = [ast.unparse(b) for b in node.bases]
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


def _takes_nothing(fn: ast.FunctionDef, *, method: bool) -> bool:
    a = fn.args
    positional = a.posonlyargs + a.args
    return not (a.kwonlyargs or a.vararg or a.kwarg or len(positional) != int(method))


def _runs(tests: str, module: ast.Module, where: str = "") -> list[str]:
    """One reference test per test function, per test method of a ``Test*`` or
    ``unittest.TestCase`` class (each the whole text, then the call that runs that one test),
    or the text itself when it is plain statements that check something."""
    body = tests.strip("\n") + "\n"
    runners: list[str] = []
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            if not _takes_nothing(node, method=False):
                raise _Bad(
                    "tests",
                    f"test function {node.name}(){where} takes arguments; pytest fixtures are "
                    "not supported, so test functions take none",
                )
            runners.append(f"{node.name}()")
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            runners += _class_runners(node, where)
    if runners:
        return [f"{body}\n\n{run}\n" for run in runners]
    if not _checks(module):
        raise _Bad(
            "tests",
            f"the hidden test{where} runs nothing that checks a value (no assert, no raise, no "
            "test function or test class with a test_ method); a test that runs nothing would "
            "pass any code",
        )
    return [body]


def _class_runners(cls: ast.ClassDef, where: str) -> list[str]:
    """The lines that run each ``test*`` method of a test class, with its set-up and
    tear-down: ``TestCase(name).debug()`` for ``unittest``, else pytest's ``setup_method``."""
    unit = any(ast.unparse(b).endswith("TestCase") for b in cls.bases)
    out: list[str] = []
    for fn in cls.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")):
            continue
        if not _takes_nothing(fn, method=True):
            raise _Bad(
                "tests",
                f"test method {cls.name}.{fn.name}(){where} takes arguments besides self; "
                "pytest fixtures are not supported",
            )
        c, m = cls.name, fn.name
        if unit:
            out.append(
                f"{c}.setUpClass()\ntry:\n    {c}({m!r}).debug()\nfinally:\n    {c}.tearDownClass()"
            )
        else:
            out.append(
                f"_sh_case = {c}()\ngetattr(_sh_case, 'setup_method', lambda m: None)(_sh_case.{m})\ntry:\n"
                f"    _sh_case.{m}()\nfinally:\n    getattr(_sh_case, 'teardown_method', lambda m: None)(_sh_case.{m})"
            )
    if not out:
        raise _Bad("tests", f"test class {cls.name}{where} has no test_ method to run")
    return out


def _checks(module: ast.Module) -> bool:
    """Statements that check a value when they run: an assert or raise outside any function
    and class, an ``assert*`` call, or a call of a function the text defines (HumanEval's
    ``check(candidate)``)."""
    defined = {n.name for n in module.body if isinstance(n, ast.FunctionDef)}
    for stmt in module.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.Assert | ast.Raise):
                return True
            if isinstance(n, ast.Call):
                f = n.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name.startswith("assert") or name in defined:
                    return True
    return False


def _entry_point(raw: dict[str, Any], spec: str) -> str:
    given = _text(raw, "entry_point")
    if given is not None:
        if not given.isidentifier():
            raise _Bad("entry_point", f"{given!r} is not a Python name")
        return given
    names = list(dict.fromkeys(_DEF.findall(spec)))
    if len(names) > 1:
        raise _Bad("entry_point", f"missing, and the spec defines {', '.join(names)}: name one")
    names = names or _CODE_CALL.findall(spec)[:1]
    if not names:
        raise _Bad(
            "entry_point",
            "missing, and the spec shows no signature to take it from (`def NAME(` or `NAME(`)",
        )
    return names[0]


def _given_code(raw: dict[str, Any], entry: str) -> str | None:
    code = _text(raw, "code")
    if code is not None:
        tree = _parse("code", code)
        if entry not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}:
            raise _Bad("code", f"defines no function {entry}(); it must be {FIELDS['code']}")
    return code


def _count(raw: dict[str, Any], field: str) -> int | None:
    value = raw.get(field)
    if value is not None and (type(value) is not int or value < 0):
        raise _Bad(field, f"got {value!r:.60}; it must be {FIELDS[field]}")
    return value


def task_from_mapping(raw: Any, *, suite: str) -> Task:
    """One task of a suite file. Raises ``ValueError`` naming the first bad field."""
    if not isinstance(raw, dict):
        raise ValueError(f"a task must be a mapping of fields, got {type(raw).__name__}")
    try:
        unknown = sorted(set(map(str, raw)) - set(FIELDS))
        if unknown:
            raise _Bad(unknown[0], f"unknown; the fields are {', '.join(FIELDS)}")
        task_id = _text(raw, "id", required=True)
        spec = _text(raw, "spec", required=True)
        assert task_id is not None and spec is not None
        if "tests" not in raw:
            raise _Bad("tests", f"missing; it must be {FIELDS['tests']}")
        tests = _split_tests(raw["tests"])
        setup = _text(raw, "setup") or ""
        if setup.strip():
            _parse("setup", setup)
            tests = [setup.strip("\n") + "\n\n" + t for t in tests]
        solution = _text(raw, "solution")
        if solution is not None:
            _parse("solution", solution)
        entry = _entry_point(raw, spec)
        return Task(
            id=task_id,
            suite=suite,
            category=_text(raw, "category") or "default",
            prompt=spec.strip() + "\n",
            entry_point=entry,
            reference_tests=tuple(tests),
            canonical_solution=solution,
            code=_given_code(raw, entry),
            examples=_count(raw, "examples"),
        )
    except _Bad as bad:
        raise ValueError(str(bad)) from None


def _entries(path: Path, text: str) -> list[tuple[int, Any]]:
    """``(line number, parsed task)`` of every task of the file; a line that does not parse
    is ``(line, SuiteError)``."""
    if path.suffix == ".jsonl":
        entries: list[tuple[int, Any]] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                entries.append(
                    (number, SuiteError(f"not valid JSON: {exc.msg} (column {exc.colno})"))
                )
        return entries
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None or not isinstance(root, yaml.SequenceNode):
            raise SuiteError(f"{path}: a YAML suite is a list of tasks (`- id: ...`).")
        return [(node.start_mark.line + 1, loader.construct_document(node)) for node in root.value]
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path} is not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def load_suite_file(path: Path | str, *, suite: str | None = None) -> list[Task]:
    """Every task of the suite file at ``path``, in file order. Raises ``SuiteError`` listing
    every malformed task with its line number and field."""
    p = Path(path)
    name = suite or str(path)
    if p.suffix not in SUFFIXES:
        raise SuiteError(f"{p}: a suite file ends with {', '.join(SUFFIXES)}.")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"Cannot read the suite file {p}: {exc}") from None
    tasks: list[Task] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for number, raw in _entries(p, text):
        try:
            if isinstance(raw, SuiteError):
                raise ValueError(str(raw))
            task = task_from_mapping(raw, suite=name)
        except ValueError as exc:
            problems.append(f"  line {number}: {exc}")
            continue
        if task.id in first_line:
            problems.append(
                f"  line {number}: field 'id': {task.id!r} is already the id of line "
                f"{first_line[task.id]}; ids must be unique"
            )
            continue
        first_line[task.id] = number
        tasks.append(task)
    if problems:
        shown = problems[:20] + ([f"  ... and {len(problems) - 20} more"] * (len(problems) > 20))
        raise SuiteError(
            f"The suite file {p} has {len(problems)} malformed task(s):\n"
            + "\n".join(shown)
            + "\nFix them (the format: docs/evaluation.md, 'Your own suite')."
        )
    if not tasks:
        raise SuiteError(f"The suite file {p} holds no task.")
    return tasks


class FileSuite:
    """A suite read from a file (``--suite PATH``); ``name`` is what records call it."""

    def __init__(self, path: Path | str, *, name: str | None = None) -> None:
        self._path = Path(path)
        self._name = name or str(path)

    @property
    def name(self) -> str:
        return self._name

    @property
    def path(self) -> Path:
        return self._path

    def tasks(self) -> list[Task]:
        return load_suite_file(self._path, suite=self._name)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m evaluation.suite_file PATH``: check a suite file, and that each task's
    ``solution`` passes its hidden tests."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m evaluation.suite_file PATH", file=sys.stderr)
        return 2
    try:
        tasks = load_suite_file(args[0])
    except SuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failures = check_solutions(tasks)
    with_solution = sum(t.canonical_solution is not None for t in tasks)
    misread = check_examples(tasks)
    for task_id, why in [*failures.items(), *misread.items()]:
        print(f"FAIL {task_id}: {why}")
    print(
        f"{len(tasks)} tasks; {with_solution - len(failures)} of {with_solution} solutions "
        f"pass their hidden tests; {len(misread)} task(s) whose examples are misread."
    )
    return 1 if failures or misread else 0


if __name__ == "__main__":
    raise SystemExit(main())
