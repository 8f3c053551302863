"""Supervision of the local llama-server, with a stand-in server (tests/local/fake_llama_server.py)
so it runs in seconds without the model: lazy start, the key, shared servers, a crash at start,
a server that never gets healthy, kill -9 between and during requests (one restart, then a
clear error), dying with a parent killed by SIGKILL, stopping at exit, and finding the binary.
Every test checks that no server process is left behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from selfheal.errors import ConfigError, MissingDependency, ProviderUnavailable
from selfheal.llm import Message, build_provider, resolve_model_string
from selfheal.local import server as ls
from selfheal.local import settings as setup
from selfheal.local.provider import LocalProvider

FAKE = Path(__file__).with_name("fake_llama_server.py")
ROOT = Path(__file__).resolve().parents[2]
HI = [Message(role="user", content="hi")]


def _fake_servers() -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        with_fake = any(str(FAKE) in part for part in (proc.info["cmdline"] or []))
        if with_fake and proc.status() != psutil.STATUS_ZOMBIE:
            out.append(proc)
    return out


def _gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An executable ``llama-server`` that runs the fake; logs go to tmp_path."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    exe = tmp_path / "bin" / "llama-server"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    exe.chmod(0o755)
    yield exe
    ls.shutdown_all()
    for server in list(ls._STARTED):
        server.stop(timeout=5)
    ls._STARTED.clear()
    ls._SERVERS.clear()
    leftover = _fake_servers()
    for proc in leftover:
        proc.kill()
    assert not leftover, f"server processes left behind: {leftover}"


@pytest.fixture
def settings(binary: Path, tmp_path: Path) -> setup.ServerSettings:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    return setup.ServerSettings(
        binary=str(binary),
        model_path=str(model),
        alias="tiny",
        slots=2,
        ctx_per_slot=512,
        threads=1,
    )


def _provider(server: ls.LocalServer, **options: Any) -> LocalProvider:
    return LocalProvider(model="tiny", server=server, model_id="local:tiny", **options)


def test_starts_on_first_request_with_a_private_key(settings: setup.ServerSettings) -> None:
    server = ls.LocalServer(settings)
    p = _provider(server)
    assert server.pid is None and p.base_url is None  # nothing runs before the first call
    c = p.complete(HI, max_tokens=3)
    assert c.text == "www" and c.model == "local:tiny"
    assert server.alive and server.port and p.base_url == f"http://127.0.0.1:{server.port}/v1"
    cmdline = " ".join(psutil.Process(server.pid).cmdline())
    assert server.api_key not in cmdline  # the key travels in the environment, not argv
    assert "--parallel 2" in cmdline and "--ctx-size 1024" in cmdline
    refused = httpx.post(f"{p.base_url}/chat/completions", json={"max_tokens": 1}, timeout=5)
    assert refused.status_code == 401
    assert server.health()
    log = server.log_path.read_text()
    assert "=== selfheal:" in log and "request /v1/chat/completions" in log
    assert (
        server.log_path.parent == Path(os.environ["XDG_STATE_HOME"]) / "selfheal" / "llama-server"
    )
    server.stop()
    assert not server.alive and _gone(server.pid or 0)


def test_samples_of_one_prompt_are_one_request_and_forget_prompts_starts_a_fresh_server(
    settings: setup.ServerSettings,
) -> None:
    """Two samples of one long prompt go to the supervised server as one request for ``n=2``
    (its settings' ``one_request``; the second choice finds the prompt processed for the
    first); ``forget_prompts`` starts a fresh server (a new process on a new port, not counted
    as a restart after a death), so the next request finds nothing cached. The server is
    started without ``--slot-save-path``: llama-server then refuses every ``/slots`` action."""
    server = ls.LocalServer(settings)
    p = _provider(server)
    p.forget_prompts()  # not started: nothing to forget, nothing started
    assert server.pid is None
    long = [Message(role="system", content="You write careful Python. " * 40), *HI]
    first, second = p.complete_many(long, n=2, max_tokens=2, temperature=0.5, seed=3)
    assert "completion n=2" in server.log_path.read_text()
    assert second.cached_tokens == second.prompt_tokens and first.text == second.text == "ww"
    off = _provider(server, one_request=False)
    off.complete_many(long, n=2, max_tokens=2, temperature=0.5, seed=3)
    assert server.log_path.read_text().count("completion n=1") == 2
    assert p.complete(long, max_tokens=1).cached_tokens > 0
    pid = server.pid
    assert "--slot-save-path" not in psutil.Process(pid).cmdline()
    p.forget_prompts()
    assert server.pid != pid and _gone(pid or 0) and server.restarts == 0
    assert p.complete(long, max_tokens=1).cached_tokens == 0
    server.stop()


def test_one_shared_server_per_settings(settings: setup.ServerSettings) -> None:
    a, b = ls.shared_server(settings), ls.shared_server(settings)
    assert a is b
    other = ls.shared_server(settings.model_copy(update={"slots": 3}))
    assert other is not a
    _provider(a).complete(HI, max_tokens=1)
    _provider(b).complete(HI, max_tokens=1)
    assert a.restarts == 0 and len([s for s in ls._STARTED if s.alive]) == 1


def test_concurrent_first_calls_start_one_server(settings: setup.ServerSettings) -> None:
    server = ls.LocalServer(settings)
    p = _provider(server)
    results = p.complete_many(HI, n=4, max_tokens=2, temperature=0.7)
    assert [c.text for c in results] == ["ww"] * 4
    assert len(_fake_servers()) == 1


def test_started_from_a_short_lived_thread_outlives_it(settings: setup.ServerSettings) -> None:
    """PR_SET_PDEATHSIG fires when the *thread* that forked the server ends: the pipeline's
    first call may come from a pool thread that ends right after, so the server is started
    from a keeper thread instead."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    server = ls.LocalServer(settings)
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join()  # the thread that started the server is gone
    with ThreadPoolExecutor(2) as pool:  # and so are these, after the first calls
        assert pool.submit(_provider(server).complete, HI, max_tokens=1).result().text == "w"
        threads = [worker.native_id, *(t.native_id for t in pool._threads)]
    pid = server.pid
    # wait until the kernel has seen those threads end (the moment PR_SET_PDEATHSIG fires),
    # then the server must still be the same process: a signal sent then kills it before the
    # next request, which would need a restart
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/self/task/{tid}").exists() for tid in threads):
        assert time.monotonic() < deadline, "the threads did not end"
        time.sleep(0.01)
    p = _provider(server)
    assert p.complete(HI, max_tokens=2).text == "ww"
    assert server.alive and server.pid == pid and server.restarts == 0


def test_crash_at_start_quotes_the_log(
    settings: setup.ServerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "crash")
    with pytest.raises(ProviderUnavailable) as info:
        _provider(ls.LocalServer(settings)).complete(HI)
    message = str(info.value)
    assert "did not start" in message and "exited with code 1" in message
    assert "failed to load model" in message  # the log's tail


def test_never_healthy_is_stopped_after_the_startup_timeout(
    settings: setup.ServerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    server = ls.LocalServer(settings, startup_timeout=1.5)
    with pytest.raises(ProviderUnavailable) as info:
        server.start()
    assert "not healthy after 1.5 s" in str(info.value)
    assert not server.alive and _gone(server.pid or 0)


def test_killed_between_requests_restarts_once_then_fails_clearly(
    settings: setup.ServerSettings,
) -> None:
    server = ls.LocalServer(settings)
    p = _provider(server)
    p.complete(HI, max_tokens=1)
    first = server.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert _gone(first)
    assert p.complete(HI, max_tokens=2).text == "ww"  # restarted
    assert server.restarts == 1 and server.pid != first
    second = server.pid
    assert second is not None
    os.kill(second, signal.SIGKILL)
    assert _gone(second)
    with pytest.raises(ProviderUnavailable) as info:
        p.complete(HI, max_tokens=2)
    message = str(info.value)
    assert "died again" in message and "killed by SIGKILL" in message
    assert str(server.log_path) in message


def test_killed_mid_request_is_retried_after_one_restart(
    settings: setup.ServerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TOKEN_DELAY", "0.1")
    server = ls.LocalServer(settings)
    p = _provider(server)
    p.complete(HI, max_tokens=1)
    victim = server.pid
    assert victim is not None
    requests_before = server.log_path.read_text().count("request /v1/chat")

    async def go() -> str:
        task = asyncio.ensure_future(p.acomplete(HI, max_tokens=30))
        while server.log_path.read_text().count("request /v1/chat") == requests_before:
            await asyncio.sleep(0.02)  # wait until the server is answering this request
        os.kill(victim, signal.SIGKILL)
        return (await task).text

    assert asyncio.run(go()) == "w" * 30
    assert server.restarts == 1 and server.pid != victim


def test_killed_after_tokens_were_streamed_fails_with_the_reason(
    settings: setup.ServerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TOKEN_DELAY", "0.05")
    server = ls.LocalServer(settings)
    p = _provider(server)
    p.complete(HI, max_tokens=1)
    victim = server.pid
    assert victim is not None

    def kill_on_first_token(piece: str) -> None:
        if server.pid == victim and server.alive:
            os.kill(victim, signal.SIGKILL)

    with pytest.raises(ProviderUnavailable) as info:
        p.complete(HI, max_tokens=40, on_token=kill_on_first_token)
    message = str(info.value)
    assert "connection to the local model server broke" in message
    assert "already streamed" in message and "killed by SIGKILL" in message
    assert p.complete(HI, max_tokens=1).text == "w"  # the next call restarts it


def _child(
    code: str, settings: setup.ServerSettings, env_extra: dict[str, str]
) -> subprocess.Popen[str]:
    script = textwrap.dedent(
        f"""
        import sys, time
        from selfheal.local import server as ls
        from selfheal.local.settings import ServerSettings
        settings = ServerSettings.model_validate_json({settings.model_dump_json()!r})
        server = ls.shared_server(settings).start()
        print(server.pid, flush=True)
        {code}
        """
    )
    env = {**os.environ, **env_extra, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )


def test_server_dies_with_a_parent_killed_by_sigkill(settings: setup.ServerSettings) -> None:
    child = _child("time.sleep(600)", settings, {})
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline())
        assert psutil.pid_exists(pid)
        child.kill()  # SIGKILL: no atexit, no cleanup code runs in the parent
        child.wait(10)
        assert _gone(pid), "the server outlived its parent"
    finally:
        child.kill()


def test_server_stops_when_its_parent_exits(settings: setup.ServerSettings) -> None:
    child = _child("sys.exit(0)", settings, {})
    assert child.stdout is not None
    pid = int(child.stdout.readline())
    assert child.wait(30) == 0
    assert _gone(pid, timeout=2.0)


# ----------------------------------------------------------------- binary, settings, routing


def test_find_server_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("SELFHEAL_LLAMA_SERVER", raising=False)
    assert setup.find_server_binary() is None
    builds = tmp_path / "cache" / "llama-server"
    for i, key in enumerate(["aaa", "bbb"]):
        exe = builds / key / "bin" / "llama-server"
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        (builds / key / "build.json").write_text('{"cmake_args": "-DGGML_AVX2=ON"}')
        os.utime(builds / key / "build.json", (1000 + i, 1000 + i))
    assert setup.find_server_binary() == builds / "bbb" / "bin" / "llama-server"  # the newest
    (builds / "current").write_text("aaa\n")
    found = setup.find_server_binary()
    assert found == builds / "aaa" / "bin" / "llama-server"  # the one install chose
    assert setup.build_info(found) == {"cmake_args": "-DGGML_AVX2=ON"}
    monkeypatch.setenv("SELFHEAL_LLAMA_SERVER", str(tmp_path / "missing"))
    with pytest.raises(ConfigError):
        setup.find_server_binary()


def test_settings_from_the_environment(binary: Path, tmp_path: Path) -> None:
    model = tmp_path / "x.gguf"
    model.write_bytes(b"GGUF")
    env = {
        "SELFHEAL_LOCAL_SLOTS": "3",
        "SELFHEAL_LOCAL_CTX": "2048",
        "SELFHEAL_LOCAL_THREADS": "1",
        "SELFHEAL_LLAMA_SERVER_ARGS": "--flash-attn on",
        "SELFHEAL_LOCAL_ONE_REQUEST": "off",
    }
    s = setup.server_settings(model, binary=binary, env=env)
    assert (s.slots, s.ctx_per_slot, s.threads, s.alias) == (3, 2048, 1, "x")
    assert not s.one_request and setup.server_settings(model, binary=binary, env={}).one_request
    assert not LocalProvider(server=ls.LocalServer(s)).one_request
    argv = s.argv(8080)
    assert argv[-2:] == ["--flash-attn", "on"]
    assert argv[argv.index("--ctx-size") + 1] == "6144"
    assert "--jinja" in argv  # the model's chat template: native tool calls need it
    assert setup.server_settings(model, binary=binary, env={}).slots == setup.DEFAULT_SLOTS
    with pytest.raises(ConfigError):
        setup.server_settings(model, binary=binary, env={"SELFHEAL_LOCAL_SLOTS": "many"})


def test_ngram_drafts_are_on_unless_the_environment_says_none(binary: Path, tmp_path: Path) -> None:
    model = tmp_path / "x.gguf"
    model.write_bytes(b"GGUF")
    default = setup.server_settings(model, binary=binary, env={}).argv(8080)
    assert default[default.index("--spec-type") + 1] == "ngram-simple"
    off = setup.server_settings(model, binary=binary, env={"SELFHEAL_LOCAL_DRAFTS": "none"})
    assert off.drafts == "none" and "--spec-type" not in off.argv(8080)
    mod = setup.server_settings(model, binary=binary, env={"SELFHEAL_LOCAL_DRAFTS": "ngram-mod"})
    assert mod.argv(8080)[mod.argv(8080).index("--spec-type") + 1] == "ngram-mod"
    with pytest.raises(ConfigError, match=r"SELFHEAL_LOCAL_DRAFTS='eagle'.*none turns"):
        setup.server_settings(model, binary=binary, env={"SELFHEAL_LOCAL_DRAFTS": "eagle"})


def test_no_binary_is_a_missing_dependency_naming_make_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("SELFHEAL_LLAMA_SERVER", raising=False)
    monkeypatch.delenv("SELFHEAL_LOCAL_URL", raising=False)
    model = tmp_path / "x.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(MissingDependency) as info:
        build_provider(f"local:{model}")
    assert "make install" in str(info.value) and info.value.package == "llama-server"


def test_local_url_reuses_a_running_server(monkeypatch: pytest.MonkeyPatch) -> None:
    p = build_provider(
        "local", env={"SELFHEAL_LOCAL_URL": "http://127.0.0.1:8099/v1", "SELFHEAL_LOCAL_KEY": "k"}
    )
    assert isinstance(p, LocalProvider)
    assert p.server is None and p.base_url == "http://127.0.0.1:8099/v1"
    assert p.model_id.startswith("local:")
    assert p.max_concurrency == setup.DEFAULT_SLOTS  # what `selfheal serve` runs by default
    eight = build_provider(
        "local", env={"SELFHEAL_LOCAL_URL": "http://127.0.0.1:8099/v1", "SELFHEAL_LOCAL_SLOTS": "8"}
    )
    assert eight.max_concurrency == 8  # type: ignore[attr-defined]
    assert (
        resolve_model_string(
            None, env={"SELFHEAL_LOCAL_URL": "http://x/v1", "OLLAMA_HOST": "127.0.0.1:9"}
        )
        == "local"
    )


def test_local_provider_on_the_shared_server(
    binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SELFHEAL_LLAMA_SERVER", str(binary))
    monkeypatch.delenv("SELFHEAL_LOCAL_URL", raising=False)
    model = tmp_path / "my-model.gguf"
    model.write_bytes(b"GGUF")
    p = build_provider(f"local:{model}")
    q = build_provider(f"local:{model}")
    assert isinstance(p, LocalProvider) and isinstance(q, LocalProvider)
    assert p.server is q.server and p.model_id == "local:my-model" and p.server is not None
    assert p.max_concurrency == p.server.settings.slots  # the pipeline's parallelism
    assert p.complete(HI, max_tokens=2).text == "ww"
    assert q.server is not None and q.server.alive


def test_selfheal_serve_is_shared_through_env(binary: Path, tmp_path: Path) -> None:
    """`selfheal serve` in one process; another uses it through SELFHEAL_LOCAL_URL/KEY."""
    model = tmp_path / "shared.gguf"
    model.write_bytes(b"GGUF")
    env = {**os.environ, "SELFHEAL_LLAMA_SERVER": str(binary), "PYTHONPATH": str(ROOT)}
    serve = subprocess.Popen(
        [sys.executable, "-m", "selfheal.cli", "serve", "--model", str(model), "--slots", "2"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert serve.stdout is not None
        printed = dict(serve.stdout.readline().strip().split("=", 1) for _ in range(4))
        assert printed["OPENAI_BASE_URL"] == printed["SELFHEAL_LOCAL_URL"]
        assert printed["OPENAI_API_KEY"] == printed["SELFHEAL_LOCAL_KEY"]
        p = build_provider(
            "local",
            env={
                "SELFHEAL_LOCAL_URL": printed["SELFHEAL_LOCAL_URL"],
                "SELFHEAL_LOCAL_KEY": printed["SELFHEAL_LOCAL_KEY"],
            },
        )
        assert p.complete(HI, max_tokens=3).text == "www"
        wrong = build_provider(
            "local",
            env={"SELFHEAL_LOCAL_URL": printed["SELFHEAL_LOCAL_URL"], "SELFHEAL_LOCAL_KEY": "x"},
        )
        from selfheal.errors import AuthenticationFailed

        with pytest.raises(AuthenticationFailed):
            wrong.complete(HI, max_tokens=1)
        assert len(_fake_servers()) == 1
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0
        deadline = time.monotonic() + 10
        while _fake_servers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _fake_servers()
    finally:
        serve.kill()
