"""The memory's SQLite schema: lessons and solutions with their FTS5 indexes (kept in step by
triggers), the runs that wrote to it, which run used which lesson, and which lessons led to a
worse result. Ids use ``AUTOINCREMENT``, so an id names one thing forever, even after
``forget``."""

from __future__ import annotations

SCHEMA_VERSION = 1
"""Bumped when the tables change; a memory of another version is refused with what to do."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS lessons (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        text TEXT NOT NULL,
        spec TEXT NOT NULL,
        spec_key TEXT NOT NULL,
        entry_point TEXT,
        failure TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL,
        verified INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        created REAL NOT NULL,
        UNIQUE (spec_key, text))""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS lessons_fts USING fts5(
        text, spec, content='lessons', content_rowid='id', tokenize='porter unicode61')""",
    """CREATE TRIGGER IF NOT EXISTS lessons_added AFTER INSERT ON lessons BEGIN
        INSERT INTO lessons_fts(rowid, text, spec) VALUES (new.id, new.text, new.spec);
    END""",
    """CREATE TRIGGER IF NOT EXISTS lessons_removed AFTER DELETE ON lessons BEGIN
        INSERT INTO lessons_fts(lessons_fts, rowid, text, spec)
        VALUES ('delete', old.id, old.text, old.spec);
    END""",
    """CREATE TABLE IF NOT EXISTS solutions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        spec TEXT NOT NULL,
        spec_key TEXT NOT NULL,
        entry_point TEXT,
        signature TEXT NOT NULL DEFAULT '',
        code TEXT NOT NULL,
        evidence TEXT NOT NULL,
        tests TEXT NOT NULL,
        run_id TEXT NOT NULL,
        created REAL NOT NULL,
        UNIQUE (spec_key, code))""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS solutions_fts USING fts5(
        spec, content='solutions', content_rowid='id', tokenize='porter unicode61')""",
    """CREATE TRIGGER IF NOT EXISTS solutions_added AFTER INSERT ON solutions BEGIN
        INSERT INTO solutions_fts(rowid, spec) VALUES (new.id, new.spec);
    END""",
    """CREATE TRIGGER IF NOT EXISTS solutions_removed AFTER DELETE ON solutions BEGIN
        INSERT INTO solutions_fts(solutions_fts, rowid, spec) VALUES ('delete', old.id, old.spec);
    END""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        spec_key TEXT NOT NULL,
        status TEXT NOT NULL,
        verified INTEGER NOT NULL,
        finished REAL NOT NULL)""",
    *(  # which runs used a lesson, and which it led to a worse result: the same shape
        f"""CREATE TABLE IF NOT EXISTS {table} (
        lesson_id INTEGER NOT NULL REFERENCES lessons(id) ON DELETE CASCADE,
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        PRIMARY KEY (lesson_id, run_id))"""
        for table in ("uses", "harms")
    ),
    "CREATE INDEX IF NOT EXISTS runs_by_spec ON runs(spec_key)",
)
"""Every statement, idempotent (``IF NOT EXISTS``), run in one transaction at open."""
