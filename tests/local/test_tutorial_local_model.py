"""The quickstart tutorial runs top to bottom with the real local model, not only the mock.

CI's ``pytest --nbmake notebooks`` runs every tutorial with the scripted mock; this runs
``notebooks/01_quickstart.ipynb`` in a real kernel with ``SELFHEAL_MODEL=local``: its cells
heal the median spec three times (the API, the cell magic, a reviewed run), use the healed
function, and fail the test if any cell raises. Every model call must have gone to the local
model.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from required_components import local_model_missing

from selfheal.graph.checkpoint import list_runs, read_states

pytestmark = [pytest.mark.local_model, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_quickstart.ipynb"


def test_quickstart_notebook_runs_with_the_local_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if why := local_model_missing():
        pytest.skip(why)
    runs = tmp_path / "runs"
    monkeypatch.setenv("SELFHEAL_MODEL", "local")
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(runs))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(
        nb, timeout=1500, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError on the first cell that fails

    printed = "\n".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []))
    assert "verified:   True" in printed, printed[-3000:]
    logs = list_runs(str(runs))
    assert len(logs) >= 3, f"expected the API, magic and review runs, found {len(logs)}"
    models = {
        e.model for log in logs for e in read_states(log)[-1].events if e.kind == "llm" and e.model
    }
    assert models and all(m.startswith("local:") for m in models), models
