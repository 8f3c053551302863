"""The README's sample output of ``selfheal heal --provider mock``, from a real run of the demo.

    python scripts/readme_sample.py            # print the block a fresh run gives
    python scripts/readme_sample.py --write    # put it into README.md
    python scripts/readme_sample.py --check    # exit 1 if README.md's block differs

The run uses a fresh runs directory (so nothing is remembered), shown as the default one. The
check ignores what changes from run to run (durations, the run id) and nothing else: a changed
count of tests, tokens or probes, or a changed line, fails it (tests/core/test_readme_sample.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMAND = "selfheal heal --provider mock"
START = f"```text\n$ {COMMAND}\n"
SHOWN_RUNS_DIR = "~/.local/state/selfheal/runs"
"""The default runs directory, as the sample shows it."""


def sample() -> str:
    """The block's text (without the fences): the command, its progress lines, the verdict
    line and the evidence, from a real run of the scripted demo."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        env = {**os.environ, "SELFHEAL_RUNS_DIR": str(runs), "PYTHONPATH": str(ROOT)}
        env.pop("SELFHEAL_MEMORY", None)  # the memory beside the runs, as by default
        done = subprocess.run(
            [sys.executable, "-m", "selfheal", *COMMAND.split()[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=300,
            check=True,
        )
    out = done.stdout.replace(str(runs), SHOWN_RUNS_DIR)
    err = done.stderr.replace(str(runs), SHOWN_RUNS_DIR)
    verdict = next(line for line in out.splitlines() if line.startswith("VERIFIED"))
    evidence = out.split("\nevidence: ", 1)[1].split("\n\n", 1)[0]
    lines = [f"$ {COMMAND}", *err.rstrip("\n").splitlines(), "", verdict, "..."]
    return "\n".join([*lines, f"evidence: {evidence}"]) + "\n"


def normalise(text: str) -> str:
    """What may differ between two runs of the demo: durations and the run id."""
    text = re.sub(r"\b\d+\.\d\ds\b", "T.TTs", text)
    return re.sub(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b", "RUN-ID", text)


def readme_block(readme: str) -> tuple[int, int]:
    """Start and end offsets of the sample's text inside README.md."""
    start = readme.find(START)
    if start < 0:
        raise SystemExit(f"README.md has no block starting with {START!r}")
    start += len("```text\n")
    end = readme.index("\n```", start) + 1
    return start, end


def main(argv: list[str]) -> int:
    fresh = sample()
    if not argv:
        print(fresh, end="")
        return 0
    readme = README.read_text(encoding="utf-8")
    start, end = readme_block(readme)
    if argv == ["--write"]:
        README.write_text(readme[:start] + fresh + readme[end:], encoding="utf-8")
        return 0
    if argv == ["--check"]:
        if normalise(readme[start:end]) == normalise(fresh):
            return 0
        print(
            "README.md's sample output differs from a run of the demo; update it with "
            "`python scripts/readme_sample.py --write`. A fresh run gives:\n" + fresh,
            file=sys.stderr,
        )
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
