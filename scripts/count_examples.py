"""How many of the built-in suites' examples selfheal reads as trusted tests.

For each suite (``builtin``, ``humaneval``, ``example``, ``notebook``, ``demo``): the tasks,
the tasks with at least one example read, the examples read (``parse_spec(prompt,
entry_point=...)``, what a heal turns into trusted tests), and how many of those the suite's
reference solution passes when the example's test runs on the host (an example the reference
fails would be a misread; a DataFrame or array value compared with ``==`` fails too). No model,
no kernel. Run from the repository root::

    PYTHONPATH=. .venv/bin/python scripts/count_examples.py
"""

from __future__ import annotations

from evaluation.suites import get_suite
from selfheal.examples import example_assert
from selfheal.spec import parse_spec


def _passes(solution: str, test: str) -> bool | None:
    """Whether ``test`` passes on ``solution`` (None when the solution itself does not load)."""
    ns: dict[str, object] = {}
    try:
        exec(solution, ns)
    except Exception:
        return None
    try:
        exec(test, dict(ns))
    except Exception:
        return False
    return True


def main() -> None:
    print("| suite | tasks | tasks with an example read | examples read | reference passes |")
    print("|---|---:|---:|---:|---:|")
    for name in ("builtin", "humaneval", "example", "notebook", "demo"):
        tasks = get_suite(name).tasks()
        with_any = read = passed = checked = 0
        for task in tasks:
            examples = parse_spec(task.prompt, entry_point=task.entry_point).examples
            with_any += bool(examples)
            read += len(examples)
            if task.canonical_solution is None:
                continue
            solution = task.context_code + "\n" + task.canonical_solution
            for ex in examples:
                ok = _passes(solution, example_assert(ex))
                checked += ok is not None
                passed += bool(ok)
        print(f"| {name} | {len(tasks)} | {with_any} | {read} | {passed}/{checked} |")


if __name__ == "__main__":
    main()
