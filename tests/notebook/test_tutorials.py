"""The tutorials as files: stored with small outputs, listed where a reader looks, and the
Colab notebook opens in Colab. (``pytest --nbmake notebooks`` executes them; CI does.)"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import re
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _store_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "store_tutorials", ROOT / "scripts" / "store_tutorials.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_five_tutorials_are_there() -> None:
    names = [p.stem for p in NOTEBOOKS]
    assert names == [
        "01_quickstart",
        "02_colab_t4_gpu",
        "03_human_in_the_loop",
        "04_magics",
        "05_benchmark",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_tutorials_have_small_outputs_only(path: Path) -> None:
    """Executed (so GitHub and Colab show what each cell does), without widget state,
    timestamps, big outputs or unexpected errors: ``scripts/store_tutorials.py`` stores them so."""
    assert _store_script().problems(path) == []


def _png(width: int, height: int) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def test_slim_drops_widget_state_and_timestamps_and_narrows_images(tmp_path: Path) -> None:
    store = _store_script()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("view", execution_count=1)
    cell.metadata["execution"] = {"iopub.status.busy": "2026-11-23T00:00:00Z"}
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                store.WIDGET_MIME: {"model_id": "abc", "version_major": 2, "version_minor": 0},
                "text/markdown": "**selfheal** verified",
                "text/plain": "selfheal verified",
            },
        ),
        nbformat.v4.new_output("display_data", data={"image/png": _png(1200, 800)}),
    ]
    nb.cells = [cell]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    found = store.problems(path)
    assert any("widget state" in p for p in found)
    assert any("timestamps" in p for p in found)
    assert any("widget view" in p for p in found)

    nbformat.write(store.slim(nbformat.read(path, as_version=4)), path)
    assert store.problems(path) == []
    stored = json.loads(path.read_text())["cells"][0]["outputs"]
    kept = {mime: "".join(value) for mime, value in stored[0]["data"].items()}
    assert kept == {"text/markdown": "**selfheal** verified", "text/plain": "selfheal verified"}
    from PIL import Image

    img = Image.open(io.BytesIO(base64.b64decode(stored[1]["data"]["image/png"])))
    assert img.width == store.IMAGE_WIDTH


def test_an_error_is_stored_only_where_the_cell_is_tagged_to_raise(tmp_path: Path) -> None:
    store = _store_script()
    nb = nbformat.v4.new_notebook()
    error = nbformat.v4.new_output("error", ename="IndexError", evalue="x", traceback=[])
    tagged = nbformat.v4.new_code_cell("median([])", execution_count=1, outputs=[error])
    tagged.metadata["tags"] = [store.ERROR_TAG]
    untagged = nbformat.v4.new_code_cell("oops", execution_count=2, outputs=[error])
    nb.cells = [tagged, untagged]
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    assert store.problems(path) == ["t.ipynb cell 1: stored with an error (IndexError)"]


def test_the_colab_notebook_opens_in_colab_on_a_t4() -> None:
    nb = json.loads((ROOT / "notebooks" / "02_colab_t4_gpu.ipynb").read_text())
    first = "".join(nb["cells"][0]["source"])
    badge = re.search(
        r"\(https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/main/"
        r"notebooks/02_colab_t4_gpu\.ipynb\)",
        first,
    )
    assert badge, "the first cell carries the Open in Colab badge, linking to this notebook"
    assert "placeholder" in first, "a placeholder owner/repo is said to be one"
    assert nb["metadata"]["colab"]["gpuType"] == "T4" and nb["metadata"]["accelerator"] == "GPU"


def test_every_tutorial_is_listed_in_the_readme_and_the_notebook_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    doc = (ROOT / "docs" / "notebook.md").read_text()
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in readme, path.name
        assert f"notebooks/{path.name}" in doc, path.name
