"""Runs the tutorials with nbmake: ``pytest --nbmake notebooks/``.

Every ``*.ipynb`` in this folder is a test; adding a tutorial is adding a notebook, stored
with the small outputs of a mock run (``python scripts/store_tutorials.py NOTEBOOK``). A cell
that must raise carries the tag ``raises-exception``. The kernels inherit this environment:
the mock model by default
(``SELFHEAL_MODEL=mock``; set it to a real model to run the tutorials against one), run logs
in a temporary folder, and this checkout on ``PYTHONPATH`` so an uninstalled tree works.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("SELFHEAL_MODEL", "mock")
    os.environ.setdefault("SELFHEAL_RUNS_DIR", tempfile.mkdtemp(prefix="selfheal-nb-runs-"))
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
