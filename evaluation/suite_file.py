"""Your own tasks: a suite file (``--suite PATH``), JSONL with one task per line, or YAML with
a list of tasks.

Each task is a mapping with these fields (docs/evaluation.md, "Your own suite"):

* ``id`` (required): unique within the file;
* ``spec`` (required): the only text the agent sees, a plain-language spec, best with the
  signature (``def name(...)``);
* ``tests`` (required): the hidden tests, run only after the agent has finished, as
  HumanEval's are: a string of plain ``assert`` statements (one reference test), a string
  of pytest-style ``def test_...():`` functions (one reference test per function), or a
  list of strings (one reference test each);
* ``entry_point``: the function the agent must define (default: the one ``def NAME(`` of
  the spec, or else its first ``NAME(`` in backticks);
* ``category``: a group for the per-category breakdown (default ``default``);
* ``setup``: code the tests need (imports, helpers), run before each test, after the
  candidate, so the candidate cannot replace it; never shown to the agent;
* ``solution``: a known-good solution (optional; ``python -m evaluation.suite_file PATH``
  runs it against its tests in the sandbox).

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
from evaluation.suites import Task
from selfheal.kernel_sandbox.types import Executor

__all__ = ["FIELDS", "FileSuite", "check_solutions", "load_suite_file", "task_from_mapping"]

FIELDS: dict[str, str] = {
    "id": "a unique, non-empty string",
    "spec": "the spec the agent sees, a non-empty string",
    "tests": "hidden tests: a string of asserts or of pytest-style test functions, or a list "
    "of strings",
    "entry_point": "the name of the function to write",
    "category": "a non-empty string",
    "setup": "code the tests run first (imports, helpers)",
    "solution": "a known-good solution",
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
        for i, code in enumerate(tests):
            _parse("tests", code, f"item {i}")
        return [t.strip("\n") + "\n" for t in tests]
    if not isinstance(tests, str) or not tests.strip():
        raise _Bad("tests", f"got {type(tests).__name__}; it must be {FIELDS['tests']}")
    module = _parse("tests", tests)
    functions = [
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    ]
    for fn in functions:
        args = fn.args
        if args.posonlyargs or args.args or args.kwonlyargs or args.vararg or args.kwarg:
            raise _Bad(
                "tests",
                f"test function {fn.name}() takes arguments; pytest fixtures are not supported, "
                "so test functions take none",
            )
    body = tests.strip("\n") + "\n"
    if not functions:
        return [body]
    return [f"{body}\n\n{fn.name}()\n" for fn in functions]


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
        return Task(
            id=task_id,
            suite=suite,
            category=_text(raw, "category") or "default",
            prompt=spec.strip() + "\n",
            entry_point=_entry_point(raw, spec),
            reference_tests=tuple(tests),
            canonical_solution=solution,
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


def check_solutions(tasks: Sequence[Task], executor: Executor | None = None) -> dict[str, str]:
    """Run each task's ``solution`` against its hidden tests in the kernel sandbox (``executor``,
    default a pool of its own); return ``{task id: why it failed}`` for those that fail (tasks
    without one are skipped)."""
    from evaluation.scoring import score
    from selfheal.kernel_sandbox import KernelPool

    if executor is None:
        with KernelPool(size=1) as pool:
            return check_solutions(tasks, pool)
    failures: dict[str, str] = {}
    for task in tasks:
        if task.canonical_solution is not None:
            verdict = score(task, task.canonical_solution, executor)
            if not verdict.passed:
                failures[task.id] = verdict.message or verdict.outcome
    return failures


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
    for task_id, why in failures.items():
        print(f"FAIL {task_id}: {why}")
    print(
        f"{len(tasks)} tasks; {with_solution - len(failures)} of {with_solution} solutions "
        "pass their hidden tests."
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
