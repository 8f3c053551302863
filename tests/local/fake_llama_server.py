"""A stand-in for llama-server, for supervision tests without the real model.

Parses the llama-server arguments selfheal passes (``--port``, ``--alias``, ``--parallel``),
requires the key from ``LLAMA_API_KEY`` like the real server, answers ``/health``, streams chat
completions (one word every ``FAKE_TOKEN_DELAY`` seconds; ``n`` choices as llama-server streams
them, each chunk one choice's, each choice's usage after its last chunk, at most
``--parallel``) or answers them whole (``stream`` false). Each slot holds the prompt it last
processed, and a completion (on slot 0 unless pinned with ``id_slot``) reports the prompt tokens
it found cached there (about 4 characters a token). ``FAKE_MODE=crash`` makes it exit at start
with an error on stdout (which goes to the log), ``FAKE_MODE=hang`` never becomes healthy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default="fake")
    parser.add_argument("--parallel", type=int, default=1)
    args, _unknown = parser.parse_known_args()
    mode = os.environ.get("FAKE_MODE", "ok")
    print(f"fake llama-server pid {os.getpid()} port {args.port} mode {mode}", flush=True)
    if mode == "crash":
        print("error: failed to load model 'nope.gguf'", flush=True)
        sys.exit(1)
    key = os.environ.get("LLAMA_API_KEY", "")
    delay = float(os.environ.get("FAKE_TOKEN_DELAY", "0.01"))
    slots = [""] * max(1, args.parallel)  # the prompt each slot last processed (its KV cache)
    lock = threading.Lock()

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
            prompt = json.dumps(body.get("messages", []))
            slot = body.get("id_slot", -1)
            slot = slot if isinstance(slot, int) and 0 <= slot < len(slots) else 0
            with lock:
                held = slots[slot]
                # character by character, as intended: a prompt prefix, not a path
                cached = len(os.path.commonprefix([held, prompt])) // 4  # noqa: RUF071
                slots[slot] = prompt
            n = int(body.get("n", 1))
            if not 1 <= n <= len(slots):
                refusal = f"Value must be between 1 <= value <= {len(slots)}, but got {n}"
                self._json(400, {"error": {"code": 400, "message": refusal}})
                return
            print(f"completion n={n}", flush=True)  # before any answer: the tests read it
            words = ["w"] * int(body.get("max_tokens", 4))
            usage: dict[str, Any] = {
                "prompt_tokens": max(3, len(prompt) // 4),
                "completion_tokens": len(words),
                "total_tokens": max(3, len(prompt) // 4) + len(words),
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            if not body.get("stream"):
                message = {"role": "assistant", "content": "".join(words)}
                self._json(
                    200,
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 0,
                        "model": args.alias,
                        "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
                        "usage": usage,
                        "timings": {"cache_n": cached},
                    },
                )
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for word in words:
                time.sleep(delay)
                for i in range(n):
                    chunk = {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": args.alias,
                        "choices": [
                            {"index": i, "delta": {"content": word}, "finish_reason": None}
                        ],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            for i in range(n):  # each choice's usage, as llama-server counts it
                final = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": args.alias,
                    "choices": [{"index": i, "delta": {}, "finish_reason": "length"}],
                }
                own = usage if i == 0 else {**usage, "prompt_tokens_details": {"cached_tokens": 0}}
                tail = {"id": "c", "object": "chat.completion.chunk", "created": 0,
                        "model": args.alias, "choices": [], "usage": own,
                        "timings": {"cache_n": own["prompt_tokens_details"]["cached_tokens"]}}  # fmt: skip
                self.wfile.write(
                    f"data: {json.dumps(final)}\n\ndata: {json.dumps(tail)}\n\n".encode()
                )
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    httpd.serve_forever()


if __name__ == "__main__":
    main()
