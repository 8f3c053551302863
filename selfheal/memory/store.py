"""``Memory``: lessons and verified solutions kept across runs, in one SQLite file (WAL mode,
FTS5 retrieval: docs/memory.md, "Where it lives"). Every connection is opened for one operation
and closed, so a ``Memory`` can be shared by threads."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selfheal.errors import ConfigError, MemoryUnavailable
from selfheal.memory.entries import (
    Learning,
    MemoryEntry,
    MemoryLesson,
    MemorySolution,
    lesson_from_row,
    parse_id,
    solution_from_row,
)
from selfheal.memory.learn import Learnt, learnt_from
from selfheal.memory.match import fts_query, similarity, spec_key
from selfheal.memory.schema import SCHEMA, SCHEMA_VERSION
from selfheal.state import HealState, Remembered

BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another process's write to finish."""
RECALLED_LESSONS = 3
"""Most remembered lessons that go into one run's prompts."""
LESSON_SIMILARITY = 0.2
"""A lesson is recalled only for a spec sharing at least this share of keywords with the spec
it was learnt on (Jaccard similarity of the keyword sets)."""
SOLUTION_SIMILARITY = 0.8
"""A verified solution joins a run only for a spec this close to its own (and with the same
function name, when both are known)."""
MAX_HARM = 2
"""A lesson that led to a worse result this many times is no longer recalled; each such result
halves its rank before that."""


class Memory:
    """The memory across runs, in the SQLite file at ``path`` (made on first use)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._unavailable(exc) from exc
        with self._connect() as conn:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise MemoryUnavailable(
                    f"The memory at {self.path} cannot use SQLite's WAL mode (it is {mode!r}), "
                    "which keeps it safe for two processes and a kill. Put it on a local disk: "
                    "set SELFHEAL_MEMORY to a file there."
                )
        with self._connect(write=True) as conn:
            for statement in SCHEMA:
                conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise MemoryUnavailable(
                    f"The memory at {self.path} has schema {row[0]}; this selfheal reads "
                    f"schema {SCHEMA_VERSION}. Move the file away (a new memory is made) or set "
                    "SELFHEAL_MEMORY to another file."
                )

    def __repr__(self) -> str:
        return f"Memory({str(self.path)!r})"

    def _unavailable(self, exc: BaseException) -> MemoryUnavailable:
        hint = (
            "Move the file away (a new memory is made)"
            if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc)
            else "Check that the file and its directory are writable"
        )
        return MemoryUnavailable(
            f"The memory at {self.path} cannot be used ({type(exc).__name__}: {exc}). {hint}, "
            "set SELFHEAL_MEMORY to another file, or turn memory off: HealConfig(memory=False), "
            "`selfheal heal --no-memory`, `%selfheal_config memory=off`."
        )

    @contextmanager
    def _connect(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One connection for one operation; with ``write``, one ``BEGIN IMMEDIATE``
        transaction, committed at the end or rolled back on an error."""
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from exc
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA secure_delete = ON")  # forgotten text is overwritten
            conn.execute("PRAGMA synchronous = FULL")
            if write:
                conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if write:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from exc
        finally:
            conn.close()

    _LESSON_COLUMNS = """l.*,
        (SELECT COUNT(*) FROM uses u WHERE u.lesson_id = l.id) AS uses,
        (SELECT COUNT(*) FROM harms h WHERE h.lesson_id = l.id) AS harm"""

    def lessons_for(self, spec: str, k: int = RECALLED_LESSONS) -> list[MemoryLesson]:
        """At most ``k`` lessons for ``spec``, best first: ranked by ``bm25()`` over the
        lesson and the spec it was learnt on, halved for each worse result it led to
        (``harm``) and for a run that did not end verified; only lessons learnt on a spec
        sharing at least ``LESSON_SIMILARITY`` of its keywords, and harmed fewer than
        ``MAX_HARM`` times."""
        query = fts_query(spec)
        if k < 1 or not query:
            return []
        with self._connect() as conn:
            rows = conn.execute(
                f"SELECT {self._LESSON_COLUMNS}, bm25(lessons_fts) AS rank FROM lessons_fts "
                "JOIN lessons l ON l.id = lessons_fts.rowid WHERE lessons_fts MATCH ? "
                "ORDER BY rank LIMIT 200",
                (query,),
            ).fetchall()
        ranked: list[tuple[float, MemoryLesson]] = []
        for row in rows:
            close = similarity(spec, row["spec"])
            if close < LESSON_SIMILARITY or row["harm"] >= MAX_HARM:
                continue
            weight = 0.5 ** row["harm"] * (1.0 if row["verified"] else 0.5)
            ranked.append((-row["rank"] * weight, lesson_from_row(row, round(close, 3))))
        ranked.sort(key=lambda pair: (-pair[0], pair[1].created))
        best: dict[str, MemoryLesson] = {}  # the same lesson learnt on several specs: once
        for _, lesson in ranked:
            best.setdefault(lesson.text, lesson)
        return list(best.values())[:k]

    def solutions_for(
        self, spec: str, *, entry_point: str | None = None, k: int = 1
    ) -> list[MemorySolution]:
        """At most ``k`` verified solutions of specs very similar to ``spec`` (at least
        ``SOLUTION_SIMILARITY``) with the same function name when both are known, closest
        first."""
        query = fts_query(spec)
        if k < 1 or not query:
            return []
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT s.* FROM solutions_fts JOIN solutions s ON s.id = solutions_fts.rowid "
                "WHERE solutions_fts MATCH ? ORDER BY bm25(solutions_fts) LIMIT 50",
                (query,),
            ).fetchall()
        found: list[MemorySolution] = []
        for row in rows:
            if entry_point and row["entry_point"] and row["entry_point"] != entry_point:
                continue
            close = similarity(spec, row["spec"])
            if close >= SOLUTION_SIMILARITY:
                found.append(solution_from_row(row, round(close, 3)))
        found.sort(key=lambda s: (-s.score, -s.created))
        return found[:k]

    def lessons(self) -> list[MemoryLesson]:
        """Every lesson, oldest first."""
        with self._connect() as conn:
            rows = conn.execute(
                f"SELECT {self._LESSON_COLUMNS} FROM lessons l ORDER BY l.id"
            ).fetchall()
        return [lesson_from_row(r) for r in rows]

    def solutions(self) -> list[MemorySolution]:
        """Every verified solution, oldest first."""
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM solutions ORDER BY id").fetchall()
        return [solution_from_row(r) for r in rows]

    def entries(self) -> list[MemoryEntry]:
        """Every lesson and solution, oldest first."""
        both: list[MemoryEntry] = [*self.lessons(), *self.solutions()]
        return sorted(both, key=lambda e: (e.created, e.id))

    def show(self, entry_id: str) -> MemoryEntry:
        """The lesson (``L3``) or solution (``S2``) with this id."""
        kind, number = parse_id(entry_id)
        with self._connect() as conn:
            if kind == "L":
                row = conn.execute(
                    f"SELECT {self._LESSON_COLUMNS} FROM lessons l WHERE l.id = ?", (number,)
                ).fetchone()
            else:
                row = conn.execute("SELECT * FROM solutions WHERE id = ?", (number,)).fetchone()
        if row is None:
            raise ConfigError(
                f"The memory at {self.path} holds no {kind}{number}. List what it holds with "
                "`selfheal memory list`."
            )
        return lesson_from_row(row) if kind == "L" else solution_from_row(row)

    def runs(self) -> int:
        """How many runs have written to this memory."""
        with self._connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def recall(self, state: HealState) -> tuple[Remembered, ...]:
        """What a run of ``state``'s spec should be shown: at most ``RECALLED_LESSONS``
        lessons and at most one verified solution of a very similar spec."""
        spec = state.spec
        out = [
            Remembered(
                id=x.id, kind="lesson", text=x.text, run_id=x.run_id, spec=x.spec, score=x.score
            )
            for x in self.lessons_for(spec.text)
        ]
        out += [
            Remembered(
                id=s.id, kind="solution", text=s.code, run_id=s.run_id, spec=s.spec, score=s.score
            )
            for s in self.solutions_for(spec.text, entry_point=spec.entry_point)
        ]
        return tuple(out)

    def learn(self, state: HealState) -> Learning:
        """Write down what the finished run ``state`` teaches (``learnt_from``)."""
        return self.remember(learnt_from(state))

    def remember(self, learnt: Learnt) -> Learning:
        """Write ``learnt`` in one transaction: the run, its lessons, its verified solution,
        which remembered lessons it used, and the lessons its outcome shows to lead to worse
        results. A run already written is left alone (``Learning.already``)."""
        key = spec_key(learnt.spec)
        now = time.time()
        with self._connect(write=True) as conn:
            added = conn.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?)",
                (learnt.run_id, key, learnt.status, int(learnt.verified), now),
            ).rowcount
            if not added:
                return Learning(run_id=learnt.run_id, already=True)
            lessons: list[str] = []
            for note in learnt.lessons:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO lessons (text, spec, spec_key, entry_point, failure, "
                    "source, verified, run_id, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        note.text,
                        learnt.spec,
                        key,
                        learnt.entry_point,
                        note.failure,
                        note.source,
                        int(learnt.verified),
                        learnt.run_id,
                        now,
                    ),
                )
                if cur.rowcount:
                    lessons.append(f"L{cur.lastrowid}")
            solution = None
            if learnt.solution is not None:
                s = learnt.solution
                cur = conn.execute(
                    "INSERT OR IGNORE INTO solutions (spec, spec_key, entry_point, signature, "
                    "code, evidence, tests, run_id, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        learnt.spec,
                        key,
                        learnt.entry_point,
                        s.signature,
                        s.code,
                        json.dumps(s.evidence),
                        json.dumps(list(s.tests)),
                        learnt.run_id,
                        now,
                    ),
                )
                if cur.rowcount:
                    solution = f"S{cur.lastrowid}"
            for number in learnt.used:
                conn.execute(
                    "INSERT OR IGNORE INTO uses SELECT id, ? FROM lessons WHERE id = ?",
                    (learnt.run_id, number),
                )
            harmed = self._harms(conn, learnt, key)
        return Learning(
            run_id=learnt.run_id,
            lessons=tuple(lessons),
            solution=solution,
            down_weighted=tuple(f"L{n}" for n in sorted(harmed)),
        )

    @staticmethod
    def _harms(conn: sqlite3.Connection, learnt: Learnt, key: str) -> set[int]:
        """Record each (lesson, run) where a run that used the lesson ended not verified
        while a run of the same spec without it was verified."""
        harmed: set[int] = set()
        if not learnt.verified:
            for number in learnt.used:
                better = conn.execute(
                    "SELECT 1 FROM runs r WHERE r.spec_key = ? AND r.verified = 1 AND "
                    "r.run_id NOT IN (SELECT run_id FROM uses WHERE lesson_id = ?) LIMIT 1",
                    (key, number),
                ).fetchone()
                if better is not None:
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO harms SELECT id, ? FROM lessons WHERE id = ?",
                        (learnt.run_id, number),
                    )
                    if cur.rowcount:
                        harmed.add(number)
            return harmed
        worse = conn.execute(
            "SELECT u.lesson_id, u.run_id FROM uses u JOIN runs r ON r.run_id = u.run_id "
            "WHERE r.spec_key = ? AND r.verified = 0",
            (key,),
        ).fetchall()
        for lesson_id, run_id in worse:
            if lesson_id in learnt.used:
                continue
            cur = conn.execute("INSERT OR IGNORE INTO harms VALUES (?, ?)", (lesson_id, run_id))
            if cur.rowcount:
                harmed.add(lesson_id)
        return harmed

    def forget(self, entry_id: str) -> MemoryEntry:
        """Remove the lesson or solution ``entry_id``; its text is overwritten in the file, not
        only unlinked (as far as no other process holds the file open at that moment: a
        reader keeps the old log frames until it lets go). Returns what was removed."""
        entry = self.show(entry_id)
        kind, number = parse_id(entry_id)
        table = "lessons" if kind == "L" else "solutions"
        with self._connect(write=True) as conn:
            conn.execute(f"DELETE FROM {table} WHERE id = ?", (number,))
        self._scrub()
        return entry

    def _scrub(self) -> None:
        """After a removal: merge the full-text indexes (their old segments still hold the
        removed words) and fold the write-ahead log into the file (its old frames still hold
        the removed text); ``secure_delete`` has zeroed the freed pages."""
        with self._connect(write=True) as conn:
            for index in ("lessons_fts", "solutions_fts"):
                conn.execute(f"INSERT INTO {index}({index}) VALUES ('optimize')")
        with self._connect() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def clear(self) -> int:
        """Remove every lesson, solution and run record; returns how many lessons and
        solutions were removed."""
        with self._connect(write=True) as conn:
            n = sum(
                int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in ("lessons", "solutions")
            )
            for table in ("harms", "uses", "lessons", "solutions", "runs"):
                conn.execute(f"DELETE FROM {table}")
        self._scrub()
        return n
