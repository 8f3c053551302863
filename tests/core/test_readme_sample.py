"""The README's sample output is what the scripted demo prints now (scripts/readme_sample.py
makes it from a real run; durations and the run id may differ, nothing else)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "readme_sample", ROOT / "scripts/readme_sample.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_sample_output_is_what_the_demo_prints() -> None:
    script = _script()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = script.readme_block(readme)
    fresh = script.sample()
    assert script.normalise(readme[start:end]) == script.normalise(fresh), (
        "update the README with `python scripts/readme_sample.py --write`"
    )
    # only durations and the run id are let go: a changed count is a difference
    assert script.normalise(fresh) != script.normalise(fresh.replace("on 11 probe", "on 13 probe"))
    assert script.normalise(fresh).count("T.TTs") == fresh.count("tok  ")
