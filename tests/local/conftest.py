"""Fixtures of the local engine's tests: the fake HTTP servers of the LLM tests
(tests/llm/llm_fakes.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from llm_fakes import started_servers

http_server = pytest.fixture(started_servers, name="http_server")
