"""The base of every selfheal record, public for code built on selfheal (the benchmark in
``evaluation/``, your own tools): frozen, keyword-only pydantic models with a docstring under
every field.

>>> from selfheal.records import Record
>>> class Point(Record):
...     x: int
...     '''Across.'''
"""

from __future__ import annotations

from selfheal._record import Record

__all__ = ["Record"]
