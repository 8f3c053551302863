"""``selfheal install``: the local model's steps for a pip user, with progress, a dry run, and
a failing step named with how to go on; every install hint names it beside ``make install``."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError
from selfheal.local import install
from selfheal.local.install import Step, run_install


def _steps(tmp_path: Path, second_exit: int) -> list[Step]:
    mark = tmp_path / "ran.txt"
    write = f"open({str(mark)!r}, 'a').write('ran\\n')"
    return [
        Step("the model", done="a verified model is in the cache: /x.gguf"),
        Step("llama-server", commands=((sys.executable, "-c", write),)),
        Step(
            "the smoke test", commands=((sys.executable, "-c", f"raise SystemExit({second_exit})"),)
        ),
    ]


def test_install_runs_the_steps_not_done_yet_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "install_steps", lambda: _steps(tmp_path, 0))
    monkeypatch.setattr(install, "_smoke_step", lambda: _steps(tmp_path, 0)[2])
    out = io.StringIO()
    assert run_install(out=out) == 0
    text = out.getvalue()
    assert "[1/3] the model\n      done already: a verified model" in text
    assert "[2/3] llama-server\n      running: " in text and "Installed in" in text
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


def test_a_failing_step_is_named_and_a_dry_run_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "install_steps", lambda: _steps(tmp_path, 3))
    monkeypatch.setattr(install, "_smoke_step", lambda: _steps(tmp_path, 3)[2])
    with pytest.raises(ConfigError, match=r"step 3 \(the smoke test\) failed with exit code 3"):
        run_install(out=io.StringIO())
    (tmp_path / "ran.txt").unlink()
    out = io.StringIO()
    assert run_install(dry_run=True, out=out) == 0
    assert "would run: " in out.getvalue() and not (tmp_path / "ran.txt").exists()


def test_the_real_steps_point_at_the_shipped_scripts() -> None:
    steps = install.install_steps()
    assert [s.title.split(" (")[0] for s in steps] == [
        "the model",
        "llama-server",
        "the smoke test",
    ]
    (command,) = steps[1].commands
    assert command[0] == "bash" and Path(command[1]).name == "install_llama_server.sh"
    assert Path(command[1]).is_file() and steps[1].env == {"PYTHON": sys.executable}


def test_install_hints_name_selfheal_install_beside_make_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "selfheal install" in LOCAL_MODEL_INSTALL and "make install" in LOCAL_MODEL_INSTALL
    from selfheal.doctor import doctor

    monkeypatch.setenv("SELFHEAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    for var in ("SELFHEAL_MODEL_PATH", "SELFHEAL_LLAMA_SERVER", "SELFHEAL_LOCAL_URL"):
        monkeypatch.delenv(var, raising=False)
    report = doctor(load_model=False)
    assert report.model.error and "selfheal install" in report.model.error
    assert report.server.error and "selfheal install" in report.server.error
