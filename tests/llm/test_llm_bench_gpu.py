"""benchmarks/bench_gpu.py keeps working: a smoke run on a tiny random model on this CPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"


def test_bench_gpu_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "gpu.json"
    tiny = ["--hidden", "32", "--intermediate", "64", "--layers", "1", "--device", "cpu"]
    result = bench.main([*tiny, "--tokens", "5", "--sizes", "2", "3", "--json", str(out)])
    rows = result["seconds"]
    assert list(rows) == [
        "one",
        "2 one after another",
        "complete_many(2)",
        "3 one after another",
        "complete_many(3)",
    ]
    assert all(secs > 0 for secs in rows.values())
    assert result["llama_server"] == "skipped: no --gguf"
    assert json.loads(out.read_text())["seconds"] == rows
    printed = capsys.readouterr().out
    assert "complete_many(3)" in printed and "x one" in printed
