"""The components ``make test`` installs and the suite must exercise (a pytest plugin).

Under ``CI=true`` a skipped test of a required component is a failure whose message names the
component and what installs it: CI cannot go green by skipping the local model, llama-server,
the browser, the sandbox kernels, the network namespace (where the host allows one) or a
package of ``make install``'s extras. Outside CI a skip stays a skip, and the summary at the
end of the run lists, per component, how many of its tests ran and how many were skipped.

The same hooks check that the run wrote nothing into the repository (tests write only under
temporary folders): files that ``git status`` shows at the end and did not at the start are
listed in the summary, and fail the run under ``CI=true``.

``tests/conftest.py`` loads these hooks; a test of the plugin itself loads it with
``-p required_components``. :func:`local_model_missing` is the one reason the real-model tests
skip for.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("SELFHEAL_CHECKOUT") or Path(__file__).resolve().parents[1])
"""The checkout the tests must not write into (``$SELFHEAL_CHECKOUT``: another one, for the
plugin's own tests)."""
CACHES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".import_linter_cache")
"""Folders tools write caches to: not what a test wrote."""

DEFAULT_EXTRAS = "anthropic,ollama,hf,eval,dask,data,dev"
"""The extras ``scripts/install.sh`` installs unless ``SELFHEAL_EXTRAS`` says otherwise."""


def in_ci() -> bool:
    """True where skips of required components fail the run (``CI=true``, as CI services set)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def local_model_missing() -> str:
    """Why the real-model tests cannot run here ("" when they can): ``SELFHEAL_SKIP_MODEL=1``
    (the install skipped the model), no verified model file, or no llama-server binary."""
    if os.environ.get("SELFHEAL_SKIP_MODEL") == "1":
        return "SELFHEAL_SKIP_MODEL=1: the local model and llama-server were not installed"
    from selfheal.local.settings import find_server_binary
    from selfheal.local.weights import find_model

    if find_model() is None:
        return "the local model is not installed (python -m selfheal.local.weights install)"
    if find_server_binary() is None:
        return "llama-server is not built (bash scripts/install_llama_server.sh)"
    return ""


def _netns_required() -> bool:
    if os.environ.get("SELFHEAL_REQUIRE_NETNS") == "1":
        return True
    from selfheal.kernel_sandbox.containment import netns_available

    return netns_available()


def _extra_installed(extra: str) -> bool:
    extras = os.environ.get("SELFHEAL_EXTRAS", DEFAULT_EXTRAS)
    return extra in {e.strip() for e in extras.split(",")}


@dataclass(frozen=True, kw_only=True)
class Component:
    """A part of the install whose tests must run under CI."""

    name: str
    """What the failure message calls it."""

    install: str
    """The command that installs it."""

    markers: frozenset[str] = frozenset()
    """A test carrying one of these markers is one of its tests."""

    paths: tuple[str, ...] = ()
    """A test whose node id starts with (or, for a ``::name``, contains) one of these is one
    of its tests."""

    reason: str = ""
    """A skip whose reason matches this regular expression is one of its skips."""

    required: Callable[[], bool] = field(default=lambda: True)
    """Whether this host must run it (the network namespace only where the host allows one)."""

    def covers(self, nodeid: str, markers: set[str], reason: str) -> bool:
        """True if the test ``nodeid`` (with ``markers``), skipped for ``reason``, is ours."""
        if markers & self.markers:
            return True
        path = nodeid.replace(os.sep, "/")
        if any(path.startswith(p) or (p.startswith("::") and p in path) for p in self.paths):
            return True
        return bool(self.reason) and re.search(self.reason, reason) is not None


COMPONENTS: tuple[Component, ...] = (
    Component(
        name="the network namespace",
        install="run CI on a host that allows `unshare --net` (root or unprivileged user "
        "namespaces); SELFHEAL_REQUIRE_NETNS=1 requires it",
        paths=("::test_network_namespace",),
        required=_netns_required,
    ),
    Component(
        name="the local model and llama-server",
        install="make install (without SELFHEAL_SKIP_MODEL=1): python -m selfheal.local.weights "
        "install, bash scripts/install_llama_server.sh",
        markers=frozenset({"local_model"}),
        paths=(
            "tests/local/test_end_to_end.py",
            "tests/local/test_tutorial_local_model.py",
            "tests/local/test_local_model_server.py",
            "tests/llm/test_llm_local_model.py",
        ),
        reason=r"llama-server|local model",
    ),
    Component(
        name="Chromium and the browser tests",
        install="bash scripts/install_browser.sh (Debian's chromium, JupyterLab, Playwright)",
        markers=frozenset({"browser"}),
        paths=("tests/browser/",),
        reason=r"chromium|playwright|jupyterlab",
    ),
    Component(
        name="the sandbox kernels",
        install="make install (ipykernel, numpy in the venv the kernels start from)",
        paths=("tests/sandbox/", "tests/notebook/test_kernel_modes.py"),
    ),
    Component(
        name="the dask extra",
        install='make install (pip install -e ".[dask]")',
        paths=("tests/scale/",),
        required=lambda: _extra_installed("dask"),
    ),
    Component(
        name="the hf extra (torch, transformers)",
        install='make install (pip install -e ".[hf]")',
        paths=("tests/llm/test_llm_hf.py",),
        required=lambda: _extra_installed("hf"),
    ),
    Component(
        name="a package of make install's extras",
        install=f"make install (pip install -e '.[{DEFAULT_EXTRAS}]')",
        reason=r"could not import",
        required=lambda: os.environ.get("SELFHEAL_EXTRAS", DEFAULT_EXTRAS) == DEFAULT_EXTRAS,
    ),
)
"""Every required component; the first that covers a test is its component."""


def component_of(nodeid: str, markers: set[str], reason: str = "") -> Component | None:
    """The component the test ``nodeid`` belongs to (None: an ordinary test)."""
    return next((c for c in COMPONENTS if c.covers(nodeid, markers, reason)), None)


def failure_message(component: Component, reason: str) -> str:
    """Why a skip of ``component`` fails the run: it names the component and its install."""
    return (
        f"required component not exercised under CI=true: {component.name} "
        f"(skipped: {reason or 'no reason given'}). Install it: {component.install}"
    )


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


@dataclass
class _Tally:
    ran: int = 0
    skipped: int = 0


_TALLY: dict[str, _Tally] = {}
_COLLECT_FAILURES: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A skip of a required component's test becomes a failure under CI."""
    report: pytest.TestReport = yield
    markers = {m.name for m in item.iter_markers()}
    reason = _skip_reason(report) if report.skipped else ""
    component = component_of(item.nodeid, markers, reason)
    if component is None or hasattr(report, "wasxfail"):
        return report
    tally = _TALLY.setdefault(component.name, _Tally())
    if report.skipped:
        tally.skipped += 1
        if in_ci() and component.required():
            report.outcome = "failed"
            report.longrepr = failure_message(component, reason)
    elif report.when == "call":
        tally.ran += 1
    return report


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A skipped module of a required component (``importorskip`` at its top) fails the run
    under CI, at its end: failing its collection would stop every other test."""
    if not report.skipped:
        return
    reason = _skip_reason(report)
    component = component_of(report.nodeid, set(), reason)
    if component is None:
        return
    _TALLY.setdefault(component.name, _Tally()).skipped += 1
    if in_ci() and component.required():
        _COLLECT_FAILURES.append(f"{report.nodeid}: {failure_message(component, reason)}")


def repo_status() -> set[str] | None:
    """``git status`` of the checkout, ignored files included (None: not a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain=v1", "--ignored"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {line for line in out.stdout.splitlines() if not any(c in line for c in CACHES)}


_BEFORE: list[set[str] | None] = []
_WRITTEN: list[str] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _BEFORE.append(repo_status())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = _BEFORE[0] if _BEFORE else None
    after = repo_status() if before is not None else None
    if before is not None and after is not None:
        _WRITTEN.extend(sorted(after - before))
    failing = _COLLECT_FAILURES or (_WRITTEN and in_ci())
    if failing and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _WRITTEN:
        terminalreporter.section("written into the repository")
        for line in _WRITTEN:
            terminalreporter.write_line(line, red=in_ci())
        terminalreporter.write_line("tests write only under tmp_path (a failure under CI=true)")
    if not _TALLY:
        return
    terminalreporter.section("required components")
    for name, tally in _TALLY.items():
        terminalreporter.write_line(f"{name}: {tally.ran} ran, {tally.skipped} skipped")
    for message in _COLLECT_FAILURES:
        terminalreporter.write_line(f"FAILED {message}", red=True)
    if not in_ci() and any(t.skipped for t in _TALLY.values()):
        terminalreporter.write_line("(CI=true makes these skips failures)")
