#!/usr/bin/env python3
"""Execute the tutorials with the scripted mock model and store them with small outputs.

    python scripts/store_tutorials.py                 # every notebooks/*.ipynb
    python scripts/store_tutorials.py notebooks/04_magics.ipynb
    python scripts/store_tutorials.py --check         # exit 1 if a stored notebook breaks a rule

The notebooks on GitHub (and in Colab before you run them) then show what each cell does.
Stored outputs stay small: no widget state (a view's text and markdown twins are kept), no
execution timestamps, every text output and image under a size limit, the whole notebook
too. ``tests/notebook/test_tutorials.py`` runs ``--check``; ``pytest --nbmake notebooks``
(CI) executes the notebooks afresh either way.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

MAX_NOTEBOOK_BYTES = 80_000
"""A stored tutorial, outputs included."""
MAX_TEXT_CHARS = 10_000
"""One output's text (a stream, or one mime type of a display)."""
MAX_IMAGE_BYTES = 40_000
"""One stored image, base64-encoded."""
IMAGE_WIDTH = 560
"""Wider images are scaled down to this (and to a 64-colour palette) before storing."""
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
ERROR_TAG = "raises-exception"


def _shrink_png(data: str) -> str:
    """A base64 PNG scaled down to ``IMAGE_WIDTH`` with a 64-colour palette (a chart stays
    legible at about a third of the bytes); as is without Pillow or when narrow already."""
    try:
        from PIL import Image
    except ImportError:
        return data
    img = Image.open(io.BytesIO(base64.b64decode(data)))
    if img.width <= IMAGE_WIDTH:
        return data
    height = round(img.height * IMAGE_WIDTH / img.width)
    small = (
        img.convert("RGB")
        .resize((IMAGE_WIDTH, height), Image.Resampling.LANCZOS)
        .quantize(colors=64)
    )
    buf = io.BytesIO()
    small.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def slim(nb: Any) -> Any:
    """``nb`` without widget state or timestamps, its images scaled down."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            data = out.get("data")
            if not data:
                continue
            data.pop(WIDGET_MIME, None)
            if "image/png" in data:
                data["image/png"] = _shrink_png(data["image/png"])
    return nb


def problems(path: Path) -> list[str]:
    """What breaks the storage rules in the notebook at ``path`` (empty when none)."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    name = path.name
    found = []
    if len(text.encode()) > MAX_NOTEBOOK_BYTES:
        found.append(f"{name}: {len(text.encode())} bytes, over {MAX_NOTEBOOK_BYTES}")
    if "widgets" in nb.get("metadata", {}):
        found.append(f"{name}: widget state is stored")
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        where = f"{name} cell {i}"
        if "execution" in cell.get("metadata", {}):
            found.append(f"{where}: execution timestamps are stored")
        if cell.get("execution_count") is None:
            found.append(f"{where}: not executed (run scripts/store_tutorials.py)")
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            if out["output_type"] == "error" and ERROR_TAG not in tags:
                found.append(f"{where}: stored with an error ({out.get('ename')})")
            texts = [out.get("text", "")]
            for mime, value in (out.get("data") or {}).items():
                if mime == WIDGET_MIME:
                    found.append(f"{where}: a widget view is stored")
                elif mime.startswith("image/"):
                    if len(value) > MAX_IMAGE_BYTES:
                        found.append(f"{where}: a {len(value)}-byte image")
                else:
                    texts.append(value)
            for t in texts:
                size = len(t if isinstance(t, str) else "".join(t))
                if size > MAX_TEXT_CHARS:
                    found.append(f"{where}: a {size}-character output")
    return found


def store(path: Path, *, timeout: int = 600) -> None:
    """Execute ``path`` top to bottom with the mock model and write it back, slimmed."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {
        "SELFHEAL_MODEL": "mock",
        "SELFHEAL_RUNS_DIR": tempfile.mkdtemp(prefix="selfheal-store-runs-"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nbformat.write(slim(nb), path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--check", action="store_true", help="only check the stored notebooks")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    if not args.check:
        for path in paths:
            print(f"executing {path.name} with the mock model ...", flush=True)
            store(path)
    found = [p for path in paths for p in problems(path)]
    for p in found:
        print(p, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
