"""Hand-written fakes for the LLM tests: a scripted Provider and a real HTTP server on
127.0.0.1 whose answers a handler function decides."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from selfheal.llm.base import Completion, CompletionRequest, Message


class ScriptedProvider:
    """Implements the Provider protocol; each call pops the next scripted reply.

    A reply is a text, or ``(text, finish_reason)``. Every call's messages and keyword
    arguments are recorded in ``calls``.
    """

    def __init__(self, replies: Sequence[str | tuple[str, str]], name: str = "fake:scripted"):
        self._replies = list(replies)
        self._name = name
        self.calls: list[dict[str, Any]] = []

    @property
    def model_id(self) -> str:
        return self._name

    def complete(self, messages: Sequence[Message], /, **options: Any) -> Completion:
        """The next scripted reply. ``options`` are the ``CompletionRequest`` fields, as the
        protocol takes them (an unknown one is a ``TypeError``, as for the real providers)."""
        request = CompletionRequest.of(messages, **options)
        self.calls.append(
            {
                "messages": list(messages),
                "max_tokens": request.max_tokens,
                "temperature": request.temperature,
                "stop": options.get("stop"),
                "schema": request.schema,
                "options": dict(options),
            }
        )
        if not self._replies:
            raise AssertionError("ScriptedProvider ran out of replies")
        reply = self._replies.pop(0)
        text, finish = (reply, "stop") if isinstance(reply, str) else reply
        if request.on_token is not None:
            request.on_token(text)
        return Completion(
            text=text,
            prompt_tokens=sum(len(m.content) for m in messages) // 4,
            completion_tokens=len(text) // 4,
            model=self._name,
            finish_reason=finish,
        )

    async def acomplete(self, messages: Sequence[Message], /, **options: Any) -> Completion:
        return self.complete(messages, **options)


# --------------------------------------------------------------- a real HTTP test server


@dataclass
class Request:
    """One request the fake server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Response:
    """What the fake server answers: a status, headers, and a body given whole or as
    chunks (each written and flushed in turn, after ``chunk_delay`` seconds)."""

    status: int = 200
    body: bytes | list[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0

    @classmethod
    def json(cls, data: Any, status: int = 200, **headers: str) -> Response:
        return cls(
            status=status,
            body=json.dumps(data).encode(),
            headers={"content-type": "application/json", **headers},
        )


Handler = Callable[[Request], Response]


class FakeServer:
    """A real HTTP server on 127.0.0.1 in a thread; ``handler`` decides each answer."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                server.requests.append(request)
                response = server.handler(request)
                if response.delay:
                    time.sleep(response.delay)
                try:
                    self.send_response(response.status)
                    for key, value in response.headers.items():
                        self.send_header(key, value)
                    if isinstance(response.body, bytes):
                        self.send_header("content-length", str(len(response.body)))
                        self.end_headers()
                        self.wfile.write(response.body)
                    else:
                        self.send_header("connection", "close")
                        self.end_headers()
                        for chunk in response.body:
                            if response.chunk_delay:
                                time.sleep(response.chunk_delay)
                            self.wfile.write(chunk)
                            self.wfile.flush()
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = _serve
            do_POST = _serve
            do_DELETE = _serve
            do_HEAD = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def openai_stream(
    pieces: Sequence[str] = (),
    *,
    tool: str | None = None,
    call_id: str = "call_7",
    prompt_tokens: int = 120,
    completion_tokens: int = 14,
) -> Response:
    """A streamed chat completion in the OpenAI wire format, as llama-server sends it: text
    ``pieces``; or, with ``tool``, a tool call whose id and name come first and whose
    arguments arrive in ``pieces`` (``finish_reason: tool_calls``); then the usage."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    if tool is None:
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": p}) for p in pieces]
        events.append(chunk({}, "stop"))
    else:
        first = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": ""},
                }
            ],
        }
        events = [chunk(first)]
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces
        ]
        events.append(chunk({}, "tool_calls"))
    events.append(
        {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )
    body = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
    return Response(status=200, body=body, headers={"content-type": "text/event-stream"})


def started_servers() -> Iterator[Callable[[Handler], FakeServer]]:
    """The ``http_server`` fixture: start fake servers with ``http_server(handler)``; all are
    stopped after the test."""
    started: list[FakeServer] = []

    def start(handler: Handler) -> FakeServer:
        server = FakeServer(handler)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
