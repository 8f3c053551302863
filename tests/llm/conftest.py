"""Fixtures of the LLM tests."""

from __future__ import annotations

import socket

import pytest
from llm_fakes import ScriptedProvider, started_servers


@pytest.fixture
def scripted() -> type[ScriptedProvider]:
    """The ScriptedProvider class, to build fakes with their replies."""
    return ScriptedProvider


http_server = pytest.fixture(started_servers, name="http_server")


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port
