"""Fixtures of the real-browser tests (marker ``browser``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lab_env import Lab, missing_app, missing_browser_parts, running_lab


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab 4 server, then a Notebook 7 server, on 127.0.0.1."""
    why = missing_browser_parts() or missing_app(request.param)
    if why:
        pytest.skip(why)
    with running_lab(tmp_path_factory.mktemp(request.param), app=request.param) as server:
        yield server
