"""Fixtures for the evaluation harness tests: a real kernel pool and the builtin tasks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evaluation.suites import BuiltinSuite, Task
from selfheal.kernel_sandbox import KernelPool


@pytest.fixture(scope="session")
def pool() -> Iterator[KernelPool]:
    with KernelPool(size=1) as p:
        yield p


@pytest.fixture(scope="session")
def builtin_tasks() -> list[Task]:
    return BuiltinSuite().tasks()
