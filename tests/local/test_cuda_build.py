"""llama.cpp with CUDA: the install script's choice of CMake flags from a faked environment
(fake ``nvcc`` / ``nvidia-smi`` on PATH, its ``--print-flags`` dry run), every layer offloaded
for a CUDA build, and ``selfheal doctor`` saying which build is in use."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from selfheal import doctor
from selfheal.local import probe
from selfheal.local.settings import GPU_LAYERS, server_settings

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_llama_server.sh"


def fake_tools(folder: Path, *, gpu: bool) -> Path:
    """``nvcc`` and an ``nvidia-smi`` that lists a T4 (``gpu``) or fails (no driver)."""
    folder.mkdir()
    (folder / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4'\n")
    listing = "echo 'GPU 0: Tesla T4 (UUID: GPU-0000)'" if gpu else "exit 9"
    (folder / "nvidia-smi").write_text(f"#!/bin/sh\n{listing}\n")
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return folder


def flags(tools: Path | None, **env: str) -> subprocess.CompletedProcess[str]:
    path = os.environ["PATH"] if tools is None else f"{tools}:{os.environ['PATH']}"
    return subprocess.run(
        ["bash", str(SCRIPT), "--print-flags"],
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_nvcc_and_a_gpu_choose_cuda_first_with_the_cpu_build_behind(tmp_path: Path) -> None:
    out = flags(fake_tools(tmp_path / "bin", gpu=True))
    assert out.returncode == 0, out.stderr
    *tried, why = out.stdout.splitlines()
    assert tried[0] == "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native"
    assert tried[1] == "-DGGML_CUDA=ON"
    assert len(tried) >= 3 and all("GGML_CUDA" not in t for t in tried[2:])  # the fallback
    assert why.startswith("why: nvcc and an NVIDIA GPU found")


def test_without_a_gpu_or_when_turned_off_the_build_is_for_the_cpu(tmp_path: Path) -> None:
    no_driver = flags(fake_tools(tmp_path / "nogpu", gpu=False))
    turned_off = flags(fake_tools(tmp_path / "gpu", gpu=True), SELFHEAL_LLAMA_CUDA="0")
    for out in (no_driver, turned_off):
        assert out.returncode == 0, out.stderr
        assert "GGML_CUDA" not in out.stdout


def test_cuda_required_without_a_gpu_fails_saying_why(tmp_path: Path) -> None:
    out = flags(fake_tools(tmp_path / "bin", gpu=False), SELFHEAL_LLAMA_CUDA="1")
    assert out.returncode != 0
    assert "SELFHEAL_LLAMA_CUDA=1 but nvcc or an NVIDIA GPU" in out.stderr
    only = flags(fake_tools(tmp_path / "gpu", gpu=True), SELFHEAL_LLAMA_CUDA="1")
    assert all("GGML_CUDA=ON" in line for line in only.stdout.splitlines()[:-1])
    bad = flags(None, SELFHEAL_LLAMA_CUDA="maybe")
    assert bad.returncode != 0 and "must be auto, 1 or 0" in bad.stderr


def fake_build(root: Path, cmake_args: str) -> Path:
    """A cached build as the script leaves it: bin/llama-server beside build.json."""
    (root / "bin").mkdir(parents=True)
    binary = root / "bin" / "llama-server"
    binary.write_text("#!/bin/sh\necho 'version: 1 (fake)'\n")
    binary.chmod(0o755)
    (root / "build.json").write_text(json.dumps({"cmake_args": cmake_args, "build_seconds": 3}))
    return binary


@pytest.mark.parametrize("cuda", [True, False])
def test_a_cuda_build_offloads_every_layer_and_doctor_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda: bool
) -> None:
    cmake = "-DGGML_CUDA=ON" if cuda else "-DGGML_NATIVE=OFF -DGGML_AVX2=ON"
    binary = fake_build(tmp_path / "build", "-DCMAKE_BUILD_TYPE=Release " + cmake)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    settings = server_settings(model, binary=binary, env={})
    argv = settings.argv(8080)
    if cuda:
        assert settings.gpu_layers == GPU_LAYERS == 99
        assert argv[argv.index("--n-gpu-layers") + 1] == "99"
    else:
        assert settings.gpu_layers is None and "--n-gpu-layers" not in argv
    monkeypatch.setattr(probe, "find_server_binary", lambda: binary)
    check = probe.server_build()
    assert check.cuda is cuda
    report = doctor.format_report(
        doctor.doctor(load_model=False).model_copy(update={"server": check})
    )
    (line,) = [x for x in report.splitlines() if x.strip().startswith("build ")]
    assert ("CUDA" in line and "--n-gpu-layers 99" in line) if cuda else line.split()[1] == "CPU"
