"""One benchmark problem (its own module: the suites, the suite files and the scorer all read
it, and none of them may import another for it)."""

from __future__ import annotations

from selfheal.records import Record


class Task(Record):
    """One benchmark problem."""

    id: str
    """Unique id within its suite, e.g. ``HumanEval/0`` or ``intervals/merge``."""
    suite: str
    """Name of the suite the task comes from."""
    category: str
    """Group used for the per-category breakdown (``humaneval`` tasks use one category)."""
    prompt: str
    """The only text the agent sees: the plain-language spec with the signature."""
    entry_point: str
    """Name of the function the agent must define."""
    reference_tests: tuple[str, ...]
    """Scoring tests, Python statements run after the candidate, one sandbox test each.
    Never shown to the agent."""
    context_code: str = ""
    """Code given in the prompt that the candidate may rely on (imports, helper functions);
    it is loaded before the candidate when scoring, and before the reference tests so a
    candidate cannot replace a helper that the reference tests themselves use."""
    canonical_solution: str | None = None
    """A known-good full solution (loaded after ``context_code``), when the suite has one."""
    code: str | None = None
    """Code the user already has, to heal (a failing notebook cell): given to the agent as
    ``heal(..., code=...)`` and ``--code`` give it, so it is public, like ``prompt``."""
    examples: int | None = None
    """How many examples the prompt states, when the suite says: ``python -m
    evaluation.suite_file`` checks that selfheal reads that many as trusted tests."""
