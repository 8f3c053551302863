"""Fixtures of the real-browser tests (marker ``browser``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lab_env import Lab, missing_browser_parts, running_lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    why = missing_browser_parts()
    if why:
        pytest.skip(why)
    with running_lab(tmp_path_factory.mktemp("lab")) as server:
        yield server
