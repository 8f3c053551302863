"""Fixtures of the LLM tests."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest
from llm_fakes import FakeServer, Handler, ScriptedProvider


@pytest.fixture
def scripted() -> type[ScriptedProvider]:
    """The ScriptedProvider class, to build fakes with their replies."""
    return ScriptedProvider


@pytest.fixture
def http_server() -> Iterator[Callable[[Handler], FakeServer]]:
    """Start fake servers with ``http_server(handler)``; all are stopped after the test."""
    started: list[FakeServer] = []

    def start(handler: Handler) -> FakeServer:
        server = FakeServer(handler)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port
