"""What the memory holds, as records: a lesson, a verified solution, and what one run added."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Literal

from selfheal._record import Record
from selfheal.errors import ConfigError


class MemoryLesson(Record):
    """A remembered lesson."""

    id: str
    """``L`` and its number, e.g. ``L3``."""
    text: str
    """The lesson."""
    spec: str
    """The spec it was learnt on."""
    entry_point: str | None = None
    """That spec's function name."""
    failure: str = ""
    """The failure it came from (the tests the diagnosed code failed)."""
    source: Literal["lessons", "diagnosis"] = "lessons"
    """Written by the lessons role, or taken from a diagnosis."""
    verified: bool = False
    """Whether the run it came from ended verified."""
    run_id: str
    """The run it came from."""
    created: float
    """When it was written (Unix time)."""
    uses: int = 0
    """Runs whose prompts it went into."""
    harm: int = 0
    """Runs it led to a worse result: the run ended not verified while a run of the same spec
    without it was verified. Each halves its rank; at ``MAX_HARM`` it is no longer recalled."""
    score: float = 0.0
    """For a query (``lessons_for``): the keyword similarity of its spec to the query's."""


class MemorySolution(Record):
    """A remembered verified solution."""

    id: str
    """``S`` and its number, e.g. ``S2``."""
    spec: str
    """The spec it solves."""
    entry_point: str | None = None
    """The function's name."""
    signature: str = ""
    """The spec's ``def`` line, when known."""
    code: str
    """The verified code."""
    evidence: dict[str, Any]
    """The evidence record its run ended with."""
    tests: tuple[str, ...] = ()
    """The tests it passed in that run (trusted ones first)."""
    run_id: str
    """The run that verified it."""
    created: float
    """When it was written (Unix time)."""
    score: float = 0.0
    """For a query (``solutions_for``): the keyword similarity of its spec to the query's."""


MemoryEntry = MemoryLesson | MemorySolution


class Learning(Record):
    """What one run left in the memory."""

    run_id: str
    """The run."""
    lessons: tuple[str, ...] = ()
    """Ids of the lessons it added (a lesson already known is not added twice)."""
    solution: str | None = None
    """Id of the verified solution it added."""
    down_weighted: tuple[str, ...] = ()
    """Ids of lessons this run showed to lead to a worse result."""
    already: bool = False
    """The run had already been written (a resumed ``finish``): nothing was added."""

    def summary(self, path: Path | str) -> str:
        """One line for the timeline."""
        if self.already:
            return f"run {self.run_id} was already in the memory ({path})"
        parts = []
        if self.lessons:
            parts.append(f"{len(self.lessons)} lesson(s) ({', '.join(self.lessons)})")
        if self.solution:
            parts.append(f"the verified solution ({self.solution})")
        said = "remembered " + " and ".join(parts) if parts else "nothing new to remember"
        if self.down_weighted:
            said += (
                f"; down-weighted {', '.join(self.down_weighted)} (a run of this spec that used "
                "it was not verified, while one without it was)"
            )
        return f"{said} in {path}"


def _columns(row: sqlite3.Row, record: type[Record]) -> dict[str, Any]:
    """The columns of ``row`` that are fields of ``record``, by name."""
    return {k: row[k] for k in row.keys() if k in record.model_fields}  # noqa: SIM118 (a Row iterates values)


def lesson_from_row(row: sqlite3.Row, score: float = 0.0) -> MemoryLesson:
    """A row of ``lessons`` (with its ``uses`` and ``harm`` counts) as a record."""
    fields = {**_columns(row, MemoryLesson), "id": f"L{row['id']}", "score": score}
    return MemoryLesson.model_validate(fields)


def solution_from_row(row: sqlite3.Row, score: float = 0.0) -> MemorySolution:
    """A row of ``solutions`` as a record (its evidence and tests stored as JSON)."""
    fields = {**_columns(row, MemorySolution), "id": f"S{row['id']}", "score": score}
    stored = {"evidence": json.loads(row["evidence"]), "tests": json.loads(row["tests"])}
    return MemorySolution.model_validate({**fields, **stored})


def parse_id(entry_id: str) -> tuple[Literal["L", "S"], int]:
    """``"L3"`` -> ``("L", 3)``; a ``ConfigError`` that says what ids look like otherwise."""
    text = entry_id.strip().upper()
    kind, digits = text[:1], text[1:]
    if kind not in ("L", "S") or not digits.isdigit():
        raise ConfigError(
            f"{entry_id!r} is not a memory id: they look like L3 (a lesson) or S2 (a verified "
            "solution). List them with `selfheal memory list`."
        )
    return ("L" if kind == "L" else "S"), int(digits)
