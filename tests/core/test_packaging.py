"""The built wheel ships the prompts and finds them when installed in a fresh venv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    """The wheel built from this checkout, installed into a fresh venv."""

    wheel: Path
    venv: Path
    names: tuple[str, ...]
    """The wheel's files."""

    def run(
        self, *argv: str, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / argv[0]), *argv[1:]],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, **(env or {})},
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the wheel and install it with ``--no-deps`` into a fresh venv whose dependencies
    come from the test environment through a ``.pth`` file (installing them all from an index
    takes minutes and a network); the editable selfheal of the test environment is not on that
    path (its own ``.pth`` is not processed there)."""
    pytest.importorskip("build")
    tmp_path = tmp_path_factory.mktemp("wheel")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )  # --no-isolation: the dev extra installs hatchling, the build backend
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    wheels = list(dist.glob("selfheal-*.whl"))
    assert len(wheels) == 1
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheels[0])], check=True)
    # the dependencies come from the test environment, but not selfheal itself
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return Installed(wheels[0], venv, tuple(zipfile.ZipFile(wheels[0]).namelist()))


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_finds_the_prompts(installed: Installed) -> None:
    names = installed.names
    venv = installed.venv
    tmp_path = venv.parent
    py = venv / "bin" / "python"
    shipped = sorted(n for n in names if n.startswith("selfheal/prompts/") and n.endswith(".yaml"))
    repo_prompts = sorted(f"selfheal/prompts/{p.name}" for p in (ROOT / "prompts").glob("*.yaml"))
    assert shipped == repo_prompts and shipped
    partials = sorted(
        f"selfheal/prompts/partials/{p.name}" for p in (ROOT / "prompts/partials").iterdir()
    )
    assert partials and set(partials) <= set(names)
    assert "selfheal/py.typed" in names

    out = subprocess.run(
        [
            str(py),
            "-c",
            "import selfheal, selfheal.llm.prompts as p; t = p.load_prompt('generator'); "
            "print(selfheal.__file__); print(t.path); print(t.version)",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert out[0].startswith(str(venv)), f"selfheal was imported from {out[0]}, not the wheel"
    assert out[1].startswith(str(venv)) and out[1].endswith("selfheal/prompts/generator.yaml")
    assert int(out[2]) >= 1


@pytest.mark.slow
def test_pip_alone_installs_the_cli_the_local_model_steps_and_the_harness(
    installed: Installed, tmp_path: Path
) -> None:
    """What a pip user has: `selfheal install` (its steps, dry), a mock heal, and the
    benchmark harness with the example suite, all run from the wheel in a fresh venv."""
    names = set(installed.names)
    assert {"evaluation/run_benchmark.py", "evaluation/suites/example.jsonl"} <= names
    assert "evaluation/tasks/intervals_merge.yaml" in names
    assert not [n for n in names if n.startswith("evaluation/results/")]
    assert {
        "selfheal/_install/install_llama_server.sh",
        "selfheal/_install/llama_smoke.py",
    } <= names

    plan = installed.run("selfheal", "install", "--dry-run", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "[1/3] the model" in plan.stdout and "[3/3] the smoke test" in plan.stdout
    script = str(installed.venv / "lib")  # the script runs from the wheel, not the checkout
    assert "install_llama_server.sh" in plan.stdout and script in plan.stdout
    assert "Dry run: nothing was run." in plan.stdout

    env = {"SELFHEAL_RUNS_DIR": str(tmp_path / "runs")}
    healed = installed.run(
        "selfheal", "heal", "--provider", "mock", "--quiet", cwd=tmp_path, env=env
    )
    assert healed.returncode == 0, healed.stderr
    assert "VERIFIED" in healed.stdout and "def median" in healed.stdout

    where = installed.run(
        "python", "-c", "import evaluation; print(evaluation.__file__)", cwd=tmp_path
    )
    assert where.stdout.startswith(str(installed.venv)), where
    script_file = tmp_path / "replies.yaml"
    script_file.write_text(
        "generator:\n  - |\n    ```python\n    def parse_log_line(line):\n        return None\n    ```\n"
        "  - |\n    ```python\n    def expand_cron_field(field, low, high):\n        return []\n    ```\n",
        encoding="utf-8",
    )
    out = tmp_path / "bench"
    bench = installed.run(
        "python", "-m", "evaluation.run_benchmark", "--suite", "example", "--provider",
        f"mock:{script_file}", "--modes", "single_shot", "--limit", "2", "--out", str(out),
        "--no-progress", "--no-hash", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-3000:]
    summary = json.loads((out / "results.json").read_text())
    assert summary["settings"]["suite"] == "example" and summary["complete"]
    assert summary["metrics"]["single_shot"]["tasks"] == 2
    assert (
        summary["metrics"]["single_shot"]["passed"] == 0
        and summary["metrics"]["single_shot"]["leaks"] == 0
    )
    assert "| single_shot | 2 | 0 (0.0%)" in (out / "results.md").read_text()
