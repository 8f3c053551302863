"""Helpers of the real-browser tests: a JupyterLab server on 127.0.0.1 and headless Chromium.

Install what they need with ``scripts/install_browser.sh`` (Debian's chromium, JupyterLab,
Playwright for Python, a kernelspec for this venv). Without chromium or Playwright the tests
skip and say so (a failure under ``CI=true``: tests/required_components.py).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nbformat

REPO = Path(__file__).resolve().parents[2]
DEBIAN_CHROMIUM = Path("/usr/lib/chromium/chromium")
"""Where Debian's ``chromium`` package puts the browser itself (``/usr/bin/chromium`` is its
launcher script)."""


def find_chromium() -> str | None:
    """The Chromium to drive: ``$SELFHEAL_CHROMIUM``, else ``chromium`` (or Ubuntu's
    ``chromium-browser``) on ``PATH``, else Debian's package; None if there is none."""
    if env := os.environ.get("SELFHEAL_CHROMIUM"):
        return env if Path(env).exists() else None
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    return str(DEBIAN_CHROMIUM) if DEBIAN_CHROMIUM.exists() else None


CHROMIUM = find_chromium()
ARTIFACTS_ENV = "SELFHEAL_BROWSER_ARTIFACTS"
"""Where the tests save their screenshots when set (scripts/docs_images.sh sets it); a
temporary folder of the session otherwise: the tests never write into the repository."""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def missing_browser_parts() -> str:
    """Why the browser tests cannot run here ("" when they can)."""
    if CHROMIUM is None:
        where = os.environ.get("SELFHEAL_CHROMIUM") or "PATH or /usr/lib/chromium"
        return f"chromium not found ({where}): run scripts/install_browser.sh"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: run scripts/install_browser.sh"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "jupyterlab is not installed: run scripts/install_browser.sh"
    return ""


def missing_app(app: str) -> str:
    """Why ``app`` (``jupyterlab`` or ``notebook``) cannot be started ("" when it can)."""
    import importlib.util

    if importlib.util.find_spec(app) is None:
        return f"{app} is not installed: run scripts/install_browser.sh"
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab server."""

    url: str
    token: str
    root: Path
    log: Path

    app: str = "jupyterlab"
    """``jupyterlab`` (JupyterLab 4) or ``notebook`` (Notebook 7)."""

    def notebook_url(self, name: str) -> str:
        where = "lab/tree" if self.app == "jupyterlab" else "notebooks"
        return f"{self.url}/{where}/{name}?token={self.token}"


@contextmanager
def running_lab(root: Path, app: str = "jupyterlab") -> Iterator[Lab]:
    """JupyterLab (or Notebook 7 with ``app="notebook"``) serving ``root`` on a free 127.0.0.1 port, token set, no browser; its
    kernels see this checkout (PYTHONPATH) and the mock model (``SELFHEAL_MODEL=mock``)."""
    port = free_port()
    token = secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        SELFHEAL_MODEL="mock",
        SELFHEAL_RUNS_DIR=str(root / ".runs"),
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        JUPYTER_CONFIG_DIR=str(root / ".jupyter"),
        JUPYTER_RUNTIME_DIR=str(root / ".runtime"),
    )
    env.pop("SELFHEAL_HEADLESS", None)
    log = root / "lab.log"
    cmd = [
        sys.executable,
        "-m",
        app,
        "--no-browser",
        f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.disable_check_xsrf=True",
        "--ServerApp.allow_root=True",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
            try:
                r = httpx.get(f"{url}/api/status", params={"token": token}, timeout=2)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start in 90 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield Lab(url=url, token=token, root=root, log=log, app=app)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def write_notebook(root: Path, name: str, cells: list[str]) -> str:
    """A notebook of code ``cells`` in ``root`` for this venv's ``python3`` kernel; its name."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, root / name)
    return name


def run_cell(page: Any, index: int) -> None:
    """Run cell ``index`` with Shift+Enter, retrying while the kernel is still connecting."""
    run_this_cell(page, page.locator(".jp-Notebook .jp-Cell").nth(index))


def run_this_cell(page: Any, cell: Any) -> None:
    """Run the cell ``cell`` (a locator) with Shift+Enter, retrying while the kernel is still
    connecting (a cell found by its text stays the same cell when cells are inserted above)."""
    prompt = cell.locator(".jp-InputArea-prompt")
    for _ in range(6):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if re.search(r"\[(\*|\d+)\]", prompt.inner_text()):
                return
            time.sleep(0.2)
    raise AssertionError(f"the cell never started running: {cell}")


def forget_workspaces(lab: Lab) -> None:
    """Delete JupyterLab's saved workspaces, so a page opens only the notebook asked for (a
    workspace reopens the notebooks of earlier pages, in tabs of their own)."""
    if lab.app != "jupyterlab":
        return
    api = f"{lab.url}/lab/api/workspaces"
    found = httpx.get(api, params={"token": lab.token}, timeout=10).json()
    for workspace in found.get("workspaces", {}).get("ids", []):
        httpx.delete(f"{api}/{workspace}", params={"token": lab.token}, timeout=10)


def open_notebook(page: Any, lab: Lab, name: str) -> None:
    """Open ``name`` (alone) and wait for its cells; dismiss the "Jupyter news?" toast if
    shown."""
    forget_workspaces(lab)
    # JupyterLab asks which kernel to start when its list of kernels is late (a loaded
    # machine): take the one it proposes, the notebook's own (before any click it would block)
    choose = page.locator(".jp-Dialog", has_text="Select Kernel")
    page.add_locator_handler(choose, lambda d: d.locator(".jp-mod-accept").click())
    page.goto(lab.notebook_url(name), timeout=60_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    no_news = page.get_by_role("button", name="No", exact=True)
    if no_news.count():
        no_news.first.click()
