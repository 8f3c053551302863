"""Memory across runs: lessons and verified solutions, remembered, recalled for new specs, shown
and removable (``Memory``, ``default_path``; docs/memory.md)."""

from __future__ import annotations

from pathlib import Path

from selfheal.config import HealConfig, memory_path_for
from selfheal.memory.learn import Learnt, LessonNote, SolutionNote, learnt_from
from selfheal.memory.match import keywords, similarity
from selfheal.memory.store import (
    LESSON_SIMILARITY,
    MAX_HARM,
    RECALLED_LESSONS,
    SOLUTION_SIMILARITY,
    Learning,
    Memory,
    MemoryEntry,
    MemoryLesson,
    MemorySolution,
)

__all__ = [
    "LESSON_SIMILARITY",
    "MAX_HARM",
    "RECALLED_LESSONS",
    "SOLUTION_SIMILARITY",
    "Learning",
    "Learnt",
    "LessonNote",
    "Memory",
    "MemoryEntry",
    "MemoryLesson",
    "MemorySolution",
    "SolutionNote",
    "default_path",
    "keywords",
    "learnt_from",
    "open_memory",
    "similarity",
]


def default_path(config: HealConfig | None = None) -> Path:
    """Where ``config``'s memory lives (default config: ``$SELFHEAL_MEMORY``, else
    ``memory.sqlite3`` in the runs directory)."""
    return memory_path_for(config or HealConfig())


def open_memory(config: HealConfig) -> Memory | None:
    """The memory a run with ``config`` uses, or None when ``config.storage.memory`` is off."""
    return Memory(memory_path_for(config)) if config.storage.memory else None
