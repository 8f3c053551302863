"""Optional SDKs: importing selfheal.llm needs none; building a provider without its SDK
raises MissingDependency naming the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from selfheal.errors import MissingDependency
from selfheal.llm.router import build_provider

ROOT = Path(__file__).resolve().parents[2]


def test_import_needs_no_optional_sdk() -> None:
    code = (
        "import sys, selfheal.llm\n"
        "heavy = [m for m in ('anthropic', 'ollama', 'torch', 'transformers', 'openai')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    ("model", "blocked", "package", "extra"),
    [
        ("ollama:m", "ollama", "ollama", "ollama"),
        ("anthropic:claude-x", "anthropic", "anthropic", "anthropic"),
        ("hf:/nowhere", "transformers", "transformers", "hf"),
    ],
)
def test_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, model: str, blocked: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)  # makes `import blocked` fail
    with pytest.raises(MissingDependency) as info:
        build_provider(model, env={"ANTHROPIC_API_KEY": "k"})
    assert info.value.package == package
    assert info.value.extra == extra
    assert f'pip install "selfheal[{extra}]"' in str(info.value)
    assert isinstance(info.value, ImportError)
