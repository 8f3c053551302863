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


def test_bench_gpu_first_round_and_first_calls(tmp_path: Path) -> None:
    """The rows issue 45's GPU check reads: the first round asked as the pipeline asks it, and
    each batch size's first call with and without the warm-up (the model made once)."""
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tiny = ["--hidden", "32", "--intermediate", "64", "--layers", "1", "--device", "cpu"]
    tiny += ["--tokens", "4", "--model-dir", str(tmp_path / "model")]
    rounds = bench.main([*tiny, "--sizes", "1", "4", "--no-sequential", "--first-round"])
    assert list(rounds["seconds"])[-2:] == [
        "first round, 2 greedy (first_sample=2)",
        "first round, all 4 (first_sample=4)",
    ]
    warm = bench.main([*tiny, "--sizes", "4", "--first-calls", "--warm", "load"])["seconds"]
    assert list(warm) == [
        "warm-up of sizes [1, 4] (16 tokens each)",
        "first complete_many(4), warm=load",
        "second complete_many(4), warm=load",
    ]
    cold = bench.main([*tiny, "--sizes", "4", "--first-calls"])["seconds"]
    assert list(cold) == ["first complete_many(4), warm=none", "second complete_many(4), warm=none"]
