"""Model strings, auto-resolution (with a real fake Ollama server) and per-role routing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_fakes import FakeServer, Request, Response

from selfheal.errors import ConfigError
from selfheal.llm.router import (
    DEFAULT_ANTHROPIC_MODEL,
    ModelSpec,
    Router,
    ollama_base_url,
    parse_model_string,
    probe_ollama,
    resolve_model_string,
    resolve_provider,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ollama:qwen2.5-coder:7b", ModelSpec(provider="ollama", model="qwen2.5-coder:7b")),
        ("ollama", ModelSpec(provider="ollama", model="qwen2.5-coder:7b")),
        ("anthropic:claude-x-1", ModelSpec(provider="anthropic", model="claude-x-1")),
        ("anthropic", ModelSpec(provider="anthropic", model="")),
        (
            "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct",
            ModelSpec(provider="hf", model="Qwen/Qwen2.5-Coder-1.5B-Instruct"),
        ),
        ("local", ModelSpec(provider="local", model="")),
        ("local:/path/x.gguf", ModelSpec(provider="local", model="/path/x.gguf")),
        ("mock", ModelSpec(provider="mock", model="demo")),
        ("mock:script.yaml", ModelSpec(provider="mock", model="script.yaml")),
        ("  Ollama:llama3  ", ModelSpec(provider="ollama", model="llama3")),
        ("openai:gpt-4o-mini", ModelSpec(provider="openai", model="gpt-4o-mini")),
        ("openai:qwen2.5:7b", ModelSpec(provider="openai", model="qwen2.5:7b")),
    ],
)
def test_parse_model_string(text: str, expected: ModelSpec) -> None:
    assert parse_model_string(text) == expected


def test_parse_auto() -> None:
    assert parse_model_string("auto") is None
    assert parse_model_string("") is None


@pytest.mark.parametrize("text", ["vllm:gpt-4", "gpt-4", "ollama:", "hf", "openai"])
def test_parse_unknown_lists_valid_forms(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_string(text)
    message = str(info.value)
    if text == "openai":
        assert "openai:<model name" in message
        return
    assert "hf:" in message
    if text != "hf":
        assert "ollama:qwen2.5-coder:7b" in message
        assert "local:<path/to/model.gguf>" in message


def test_model_string_round_trip() -> None:
    for text in [
        "ollama:qwen2.5-coder:7b",
        "local",
        "local:/x.gguf",
        "hf:a/b",
        "mock:demo",
        "openai:m",
    ]:
        spec = parse_model_string(text)
        assert spec is not None
        assert spec.model_string == text


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://127.0.0.1:11434"),
        ("127.0.0.1:9999", "http://127.0.0.1:9999"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("http://example.internal:80/", "http://example.internal:80"),
        ("https://ollama.example", "https://ollama.example:443"),
        ("localhost", "http://localhost:11434"),
    ],
)
def test_ollama_base_url(host: str | None, url: str) -> None:
    env = {} if host is None else {"OLLAMA_HOST": host}
    assert ollama_base_url(env) == url


def _tags(*names: str) -> Any:
    def handler(request: Request) -> Response:
        if request.path == "/api/tags":
            return Response.json({"models": [{"name": n, "model": n} for n in names]})
        return Response(status=404)

    return handler


def _no_local_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Make sure the real local model cache is not consulted."""
    monkeypatch.delenv("SELFHEAL_MODEL_PATH", raising=False)
    monkeypatch.delenv("SELFHEAL_LOCAL_URL", raising=False)
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "empty-cache"))


def _fake_server_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SELFHEAL_LLAMA_SERVER", str(exe))
    return exe


def test_explicit_string_wins(closed_port: int) -> None:
    env = {"SELFHEAL_MODEL": "mock", "ANTHROPIC_API_KEY": "k"}
    assert resolve_model_string("ollama:x", env=env) == "ollama:x"


def test_env_selfheal_model_beats_api_key() -> None:
    env = {"SELFHEAL_MODEL": "ollama:codellama", "ANTHROPIC_API_KEY": "sk-test"}
    assert resolve_model_string(None, env=env) == "ollama:codellama"
    assert resolve_model_string("auto", env=env) == "ollama:codellama"


def test_api_key_picks_anthropic(closed_port: int) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-test", "OLLAMA_HOST": f"127.0.0.1:{closed_port}"}
    assert resolve_model_string(None, env=env) == f"anthropic:{DEFAULT_ANTHROPIC_MODEL}"
    env["SELFHEAL_ANTHROPIC_MODEL"] = "claude-other"
    assert resolve_model_string(None, env=env) == "anthropic:claude-other"
    assert resolve_model_string("anthropic", env=env) == "anthropic:claude-other"


def test_reachable_ollama_picks_a_coder_model(http_server: Any) -> None:
    server: FakeServer = http_server(_tags("llama3:8b", "nomic-embed-text", "deepseek-coder:6.7b"))
    env = {"OLLAMA_HOST": server.url}
    assert resolve_model_string(None, env=env) == "ollama:deepseek-coder:6.7b"
    assert server.paths() == ["/api/tags"]


def test_reachable_ollama_prefers_default_model(http_server: Any) -> None:
    server = http_server(_tags("codellama:7b", "qwen2.5-coder:7b"))
    assert resolve_model_string(None, env={"OLLAMA_HOST": server.url}) == "ollama:qwen2.5-coder:7b"


def test_ollama_model_override(http_server: Any) -> None:
    server = http_server(_tags("qwen2.5-coder:7b"))
    env = {"OLLAMA_HOST": server.url, "SELFHEAL_OLLAMA_MODEL": "mine:latest"}
    assert resolve_model_string(None, env=env) == "ollama:mine:latest"


def test_probe_ollama_unreachable_and_slow(http_server: Any, closed_port: int) -> None:
    assert probe_ollama(f"http://127.0.0.1:{closed_port}") is None
    slow = http_server(lambda r: Response(body=b'{"models": []}', delay=1.0))
    assert probe_ollama(slow.url, timeout=0.2) is None


def test_nothing_available_names_three_fixes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, closed_port: int
) -> None:
    _no_local_model(monkeypatch, tmp_path)
    env = {"OLLAMA_HOST": f"127.0.0.1:{closed_port}"}
    with pytest.raises(ConfigError) as info:
        resolve_provider(None, env=env)
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message
    assert "ollama serve" in message
    assert "ollama pull qwen2.5-coder:7b" in message
    assert "make install" in message
    assert f"no Ollama server answered at http://127.0.0.1:{closed_port}" in message
    assert "mock" in message  # listed among valid forms, never chosen silently


def test_ollama_without_models_falls_through(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, http_server: Any
) -> None:
    _no_local_model(monkeypatch, tmp_path)
    server = http_server(_tags())
    with pytest.raises(ConfigError) as info:
        resolve_model_string(None, env={"OLLAMA_HOST": server.url})
    assert "has no models" in str(info.value)


def test_installed_local_model_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, closed_port: int
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("SELFHEAL_MODEL_PATH", str(model))
    monkeypatch.delenv("SELFHEAL_LOCAL_URL", raising=False)
    _fake_server_binary(monkeypatch, tmp_path)
    env = {"OLLAMA_HOST": f"127.0.0.1:{closed_port}"}
    assert resolve_model_string(None, env=env) == f"local:{model}"


def test_installed_model_without_a_server_binary_is_not_chosen(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, closed_port: int
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("SELFHEAL_MODEL_PATH", str(model))
    monkeypatch.delenv("SELFHEAL_LOCAL_URL", raising=False)
    monkeypatch.delenv("SELFHEAL_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(ConfigError) as info:
        resolve_model_string(None, env={"OLLAMA_HOST": f"127.0.0.1:{closed_port}"})
    assert "llama-server is not built" in str(info.value)
    assert "make install" in str(info.value)


def test_resolve_provider_passes_provider_through(scripted: Any) -> None:
    fake = scripted(["x"])
    assert resolve_provider(fake) is fake


def test_resolve_mock_explicitly() -> None:
    provider = resolve_provider("mock", env={})
    assert provider.model_id == "mock:demo"


# ----------------------------------------------------------------------------- Router


def test_router_roles_env_and_cache(scripted: Any) -> None:
    fake = scripted(["x"], name="fake:given")
    env = {"SELFHEAL_MODEL_DEBUGGER": "mock", "SELFHEAL_MODEL_PATH": "/nowhere.gguf"}
    router = Router(default="mock", per_role={"critic": fake}, env=env)
    assert router.for_role("critic") is fake
    generator = router.for_role("generator")
    debugger = router.for_role("debugger")
    assert generator is debugger  # same model string: one instance
    assert router.describe() == {
        "default": "mock:demo",
        "critic": "fake:given",
        "debugger": "mock:demo",
        "generator": "mock:demo",
    }


def test_router_per_role_beats_env() -> None:
    env = {"SELFHEAL_MODEL_TEST_WRITER": "ollama:from-env"}
    router = Router(default="mock", per_role={"test_writer": "ollama:from-arg"}, env=env)
    assert router.model_string("test_writer") == "ollama:from-arg"
    router = Router(default="mock", env=env)
    assert router.model_string("test-writer") == "ollama:from-env"
    assert router.model_string("other") == "mock:demo"


def test_router_builds_real_ollama_provider_lazily(http_server: Any) -> None:
    server = http_server(_tags("qwen2.5-coder:7b"))
    router = Router(env={"OLLAMA_HOST": server.url})
    assert router.describe() == {"default": "ollama:qwen2.5-coder:7b"}
    provider = router.for_role("generator")
    assert provider.model_id == "ollama:qwen2.5-coder:7b"
    assert router.for_role("critic") is provider
    assert server.paths() == ["/api/tags"]  # auto resolved once


def test_router_auto_failure_is_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, closed_port: int
) -> None:
    _no_local_model(monkeypatch, tmp_path)
    router = Router(env={"OLLAMA_HOST": f"127.0.0.1:{closed_port}"})
    with pytest.raises(ConfigError):
        router.for_role("generator")
