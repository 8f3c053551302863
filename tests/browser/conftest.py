"""Fixtures of the real-browser tests (marker ``browser``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_env import ARTIFACTS_ENV, Lab, missing_app, missing_browser_parts, running_lab


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the screenshots go to: ``$SELFHEAL_BROWSER_ARTIFACTS`` or a temporary one."""
    where = os.environ.get(ARTIFACTS_ENV)
    path = Path(where) if where else tmp_path_factory.mktemp("browser-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab 4 server, then a Notebook 7 server, on 127.0.0.1."""
    why = missing_browser_parts() or missing_app(request.param)
    if why:
        pytest.skip(why)
    with running_lab(tmp_path_factory.mktemp(request.param), app=request.param) as server:
        yield server
