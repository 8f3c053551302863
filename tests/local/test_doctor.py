"""selfheal.doctor against real surroundings: env vars, a real HTTP server, real files."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from required_components import local_model_missing

from selfheal.doctor import DoctorReport, doctor, format_report


class _Tags(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"models": [{"name": "qwen2.5-coder:7b"}]}).encode()
        self.send_response(200 if self.path == "/api/tags" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def ollama_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Tags)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "cache"))
    for name in (
        "SELFHEAL_MODEL_PATH",
        "SELFHEAL_MODEL",
        "SELFHEAL_LOCAL_URL",
        "SELFHEAL_LLAMA_SERVER",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no llama-server on PATH
    return tmp_path / "cache"


def _by_name(report: DoctorReport) -> dict[str, bool]:
    return {p.name: p.usable for p in report.providers}


def test_nothing_available(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")  # discard port: nothing answers
    report = doctor(load_model=False)
    usable = _by_name(report)
    assert set(usable) == {"anthropic", "ollama", "hf", "openai", "local"}
    assert not usable["anthropic"] and not usable["ollama"] and not usable["local"]
    assert not usable["openai"]
    assert report.model.path is None
    assert "make install" in report.model.error
    assert report.server.binary is None and "make install" in report.server.error
    text = format_report(report)
    assert "ANTHROPIC_API_KEY is not set" in text
    assert "not installed" in text and "not built" in text
    assert report.cpu_count >= 1


def test_key_and_ollama_server_are_seen(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch, ollama_server: str
) -> None:
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("OLLAMA_HOST", ollama_server)
    report = doctor(load_model=False)
    usable = _by_name(report)
    assert usable["anthropic"] and usable["ollama"]
    assert "qwen2.5-coder:7b" in format_report(report)
    assert report.auto_choice.startswith("anthropic")


@pytest.mark.slow  # hashes a 1.1 GB (sparse) file
def test_corrupt_model_is_reported(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from selfheal.local.weights import DEFAULT_MODEL, default_model_path

    path = default_model_path()
    path.parent.mkdir(parents=True)
    with path.open("wb") as fh:  # right size, wrong content (sparse file)
        fh.truncate(DEFAULT_MODEL.size)
    report = doctor(load_model=False)
    assert report.model.path == str(path)
    assert report.model.verified is False
    assert "corrupt" in report.model.error
    assert not _by_name(report)["local"]
    assert "CORRUPT" in format_report(report)


def test_openai_compatible_server_from_env(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    report = doctor(load_model=False)
    assert _by_name(report)["openai"]
    assert "OPENAI_BASE_URL=http://127.0.0.1:8000/v1" in format_report(report)


@pytest.mark.local_model
def test_real_server_starts_and_generates(monkeypatch: pytest.MonkeyPatch) -> None:
    if why := local_model_missing():
        pytest.skip(why)
    monkeypatch.delenv("SELFHEAL_LOCAL_URL", raising=False)
    monkeypatch.setenv("SELFHEAL_LOCAL_SLOTS", "1")
    report = doctor(load_model=True)
    assert report.model.loads is True, (report.model.error, report.server.error)
    assert report.model.tokens_per_second and report.model.tokens_per_second > 0
    assert "def add" in report.model.sample
    server = report.server
    assert server.healthy and server.port and server.slots == 1 and server.one_request
    assert server.drafts == "ngram-simple"  # the real build accepts --spec-type
    assert "GGML_" in server.cmake_args and server.version.startswith("version")
    assert _by_name(report)["local"]
    text = format_report(report)
    assert "health     ok on port" in text and "tokens/s" in text
    assert "samples    one request for n" in text


def test_the_sandbox_boundary_in_force_is_reported(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from selfheal.kernel_sandbox import boundary

    monkeypatch.setenv("SELFHEAL_SANDBOX", "auto")
    text = format_report(doctor(load_model=False))
    if boundary.landlock_abi() >= 1:
        assert "sandbox    landlock (SELFHEAL_SANDBOX=auto): Landlock ABI " in text
    monkeypatch.setattr(boundary, "landlock_abi", lambda: 0)
    text = format_report(doctor(load_model=False))
    assert "sandbox    fallback, WEAKER than Landlock (SELFHEAL_SANDBOX=auto)" in text
    monkeypatch.setenv("SELFHEAL_SANDBOX", "strict")
    assert "sandbox    NONE: SELFHEAL_SANDBOX=strict needs Landlock" in format_report(
        doctor(load_model=False)
    )
