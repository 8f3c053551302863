"""CI cannot go green by skipping: under ``CI=true`` the required-components plugin
(tests/required_components.py) turns a skipped test of a required component into a failure that
names the component and its install; outside CI a skip stays a skip. Each case runs pytest on
a small suite in a temporary folder, with the plugin loaded as CI loads it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SUITE = {
    "test_model.py": """
        import pytest

        @pytest.mark.local_model
        def test_needs_the_model():
            pytest.skip("SELFHEAL_SKIP_MODEL=1: the local model and llama-server were not installed")

        def test_plain():
            assert 1 + 1 == 2

        @pytest.mark.skip(reason="an ordinary skip")
        def test_ordinary_skip():
            pass
    """,
    "test_browser.py": """
        import pytest

        pytestmark = pytest.mark.browser

        def test_in_chromium():
            pytest.skip("chromium not found (PATH or /usr/lib/chromium)")
    """,
}


def run_suite(
    tmp_path: Path, files: dict[str, str], **env: str
) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    local_model\n    browser\n")
    full = {k: v for k, v in os.environ.items() if k not in ("CI", "SELFHEAL_EXTRAS")}
    full.update(env, PYTHONPATH=f"{TESTS}{os.pathsep}{full.get('PYTHONPATH', '')}")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "required_components", "-p", "no:cacheprovider",
         "-rA", str(tmp_path)],
        cwd=tmp_path, env=full, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_under_ci_a_skipped_required_component_fails_naming_it_and_its_install(
    tmp_path: Path,
) -> None:
    ran = run_suite(tmp_path, SUITE, CI="true")
    out = ran.stdout
    assert ran.returncode == 1, out
    assert "2 failed, 1 passed, 1 skipped" in out, out
    assert (
        "required component not exercised under CI=true: the local model and llama-server "
        "(skipped: SELFHEAL_SKIP_MODEL=1" in out
    )
    assert "Install it: make install (without SELFHEAL_SKIP_MODEL=1)" in out
    assert "Chromium and the browser tests" in out and "scripts/install_browser.sh" in out
    assert "SKIPPED [1] test_model.py:" in out and "an ordinary skip" in out  # not required


def test_outside_ci_the_skips_stay_skips_and_the_summary_counts_them(tmp_path: Path) -> None:
    ran = run_suite(tmp_path, SUITE)
    assert ran.returncode == 0, ran.stdout
    assert "1 passed, 3 skipped" in ran.stdout
    assert "the local model and llama-server: 0 ran, 1 skipped" in ran.stdout
    assert "(CI=true makes these skips failures)" in ran.stdout


def test_under_ci_a_module_skipped_at_import_fails_the_run_without_stopping_it(
    tmp_path: Path,
) -> None:
    files = {
        "test_extra.py": """
            import pytest

            pytest.importorskip("selfheal_no_such_package")
        """,
        "test_other.py": "def test_runs():\n    assert True\n",
    }
    ran = run_suite(tmp_path, files, CI="true")
    assert ran.returncode == 1, ran.stdout
    assert "1 passed, 1 skipped" in ran.stdout  # the rest of the suite still ran
    assert (
        "FAILED test_extra.py: required component not exercised under CI=true: a package of "
        "make install's extras (skipped: could not import 'selfheal_no_such_package'" in ran.stdout
    )


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_suite_without_skips_of_required_components_passes_in_and_out_of_ci(
    tmp_path: Path, ci: str
) -> None:
    files = {
        "test_model.py": "import pytest\n\n@pytest.mark.local_model\ndef test_ok():\n    pass\n"
    }
    ran = run_suite(tmp_path, files, CI=ci)
    assert ran.returncode == 0, ran.stdout
    assert "the local model and llama-server: 1 ran, 0 skipped" in ran.stdout


def test_a_file_written_into_the_checkout_is_listed_and_fails_ci(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / "kept.txt").write_text("tracked\n")
    subprocess.run(["git", "-C", str(checkout), "add", "kept.txt"], check=True)
    suite = tmp_path / "suite"
    suite.mkdir()
    files = {
        "test_writes.py": f"""
            from pathlib import Path

            def test_writes_into_the_checkout():
                Path({str(checkout)!r}, "kept.txt").write_text("changed")
                Path({str(checkout)!r}, "new.png").write_bytes(b"png")
        """
    }
    ran = run_suite(suite, files, CI="true", SELFHEAL_CHECKOUT=str(checkout))
    assert ran.returncode == 1, ran.stdout
    assert "1 passed" in ran.stdout  # the test itself passed: the run fails for what it wrote
    assert "written into the repository" in ran.stdout
    assert "?? new.png" in ran.stdout and "AM kept.txt" in ran.stdout
