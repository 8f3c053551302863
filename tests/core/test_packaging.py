"""The built wheel ships the prompts and finds them when installed in a fresh venv."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_finds_the_prompts(tmp_path: Path) -> None:
    pytest.importorskip("build")
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
    names = zipfile.ZipFile(wheels[0]).namelist()
    shipped = sorted(n for n in names if n.startswith("selfheal/prompts/") and n.endswith(".yaml"))
    repo_prompts = sorted(f"selfheal/prompts/{p.name}" for p in (ROOT / "prompts").glob("*.yaml"))
    assert shipped == repo_prompts and shipped
    partials = sorted(
        f"selfheal/prompts/partials/{p.name}" for p in (ROOT / "prompts/partials").iterdir()
    )
    assert partials and set(partials) <= set(names)
    assert "selfheal/py.typed" in names

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
