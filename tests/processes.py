"""Processes a test looks for among another's descendants."""

from __future__ import annotations

import contextlib

import psutil


def descendants_named(pid: int, part: str) -> list[psutil.Process]:
    """The descendants of ``pid`` whose name contains ``part``. One that exits between the
    listing and the reading of its name is gone, so it is not among them (reading the name
    of a process that has just been reaped raises ``NoSuchProcess``)."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if part in child.name():
                found.append(child)
    return found
