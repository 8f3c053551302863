"""A stand-in for llama-server, for supervision tests without the real model.

Parses the llama-server arguments selfheal passes (``--port``, ``--alias``), requires the key
from ``LLAMA_API_KEY`` like the real server, answers ``/health`` and streams chat completions
(one word every ``FAKE_TOKEN_DELAY`` seconds). ``FAKE_MODE=crash`` makes it exit at start with
an error on stdout (which goes to the log), ``FAKE_MODE=hang`` never becomes healthy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default="fake")
    args, _unknown = parser.parse_known_args()
    mode = os.environ.get("FAKE_MODE", "ok")
    print(f"fake llama-server pid {os.getpid()} port {args.port} mode {mode}", flush=True)
    if mode == "crash":
        print("error: failed to load model 'nope.gguf'", flush=True)
        sys.exit(1)
    key = os.environ.get("LLAMA_API_KEY", "")
    delay = float(os.environ.get("FAKE_TOKEN_DELAY", "0.01"))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: Any) -> None:
            print("request", self.path, flush=True)

        def _json(self, status: int, data: Any) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                if mode == "hang":
                    self._json(503, {"error": {"message": "Loading model", "code": 503}})
                else:
                    self._json(200, {"status": "ok"})
            else:
                self._json(404, {"error": {"message": "not found", "code": 404}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if key and self.headers.get("authorization") != f"Bearer {key}":
                self._json(401, {"error": {"message": "Invalid API Key", "code": 401}})
                return
            words = ["w"] * int(body.get("max_tokens", 4))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for word in words:
                time.sleep(delay)
                chunk = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": args.alias,
                    "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}],
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            final = {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": args.alias,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": 3,
                    "completion_tokens": len(words),
                    "total_tokens": 3 + len(words),
                },
            }
            self.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    httpd.serve_forever()


if __name__ == "__main__":
    main()
