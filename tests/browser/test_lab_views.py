"""The views of a finished run in a real JupyterLab (and Notebook 7), one case each: the
evidence line and the candidates panel show what the run's own result says.

The notebook heals the demo spec with full autonomy, as the quickstart does: in a live kernel
``heal()`` shows the view, updates it while the run goes, and returns the result; a second
cell prints the facts the views must show, from the result itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lab_env import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Lab,
    open_notebook,
    run_cell,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(600)]

CELL_HEAL = """import selfheal
from selfheal.demo import DEMO_SPEC
result = selfheal.heal(DEMO_SPEC)"""

CELL_FACTS = """chosen = next(a.candidate for a in reversed(result.attempts) if a.candidate)
print("FACT status", result.status)
print("FACT evidence", result.evidence.summary)
print("FACT chosen", chosen)
print("FACT candidates", " ".join(f"{c.id}:{c.origin}" for c in result.candidates))"""


@dataclass(frozen=True)
class FinishedView:
    """A page showing the finished run's view, and what the result says (from the kernel)."""

    page: Any
    lab: Lab
    facts: dict[str, str]
    artifacts: Path


@pytest.fixture(scope="module")
def finished(lab: Lab, artifacts: Path) -> Iterator[FinishedView]:
    from playwright.sync_api import expect, sync_playwright

    name = write_notebook(lab.root, "views.ipynb", [CELL_HEAL, CELL_FACTS])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            open_notebook(page, lab, name)
            run_cell(page, 0)
            header = page.locator(".selfheal-header")
            expect(header).to_contain_text("verified", timeout=120_000)
            run_cell(page, 1)
            out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output")
            expect(out).to_contain_text("FACT candidates", timeout=60_000)
            facts = dict(
                line.split(" ", 2)[1:]
                for line in out.inner_text().splitlines()
                if line.startswith("FACT ")
            )
            yield FinishedView(page=page, lab=lab, facts=facts, artifacts=artifacts)
        except Exception:
            page.screenshot(path=str(artifacts / f"{lab.app}_views_failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def test_the_evidence_line_states_what_the_status_rests_on(finished: FinishedView) -> None:
    from playwright.sync_api import expect

    page, facts = finished.page, finished.facts
    assert facts["status"] == "verified"
    line = page.locator(".selfheal-header .selfheal-evidence")
    expect(line).to_have_count(1)
    assert line.inner_text().strip() == f"Evidence: {facts['evidence']}"
    assert re.match(r"\d+/\d+ trusted tests pass; \d+ of \d+ candidates", facts["evidence"])
    header = page.locator(".selfheal-header")
    header.scroll_into_view_if_needed()
    header.screenshot(path=str(finished.artifacts / f"{finished.lab.app}_evidence.png"))


def test_the_candidates_panel_lists_every_candidate_and_marks_the_chosen_one(
    finished: FinishedView,
) -> None:
    from playwright.sync_api import expect

    page, facts = finished.page, finished.facts
    page.locator(".selfheal-view .lm-TabBar-tab", has_text="Candidates").first.click()
    panel = page.locator(".selfheal-candidates")
    expect(panel).to_be_visible(timeout=30_000)
    expected = [tuple(item.split(":")) for item in facts["candidates"].split()]
    rows = panel.locator("tr[data-candidate]")
    expect(rows).to_have_count(len(expected))
    shown = [
        (rows.nth(i).get_attribute("data-candidate"), rows.nth(i).locator("td").nth(3).inner_text())
        for i in range(rows.count())
    ]
    assert shown == expected
    chosen = panel.locator("tr.selfheal-chosen")
    expect(chosen).to_have_count(1)
    assert chosen.get_attribute("data-candidate") == facts["chosen"]
    expect(panel).to_contain_text(f"{facts['chosen']} (")  # the verdict names the winner
    expect(panel.locator(".selfheal-evidence")).to_contain_text(facts["evidence"])
    view = page.locator(".selfheal-view")
    view.scroll_into_view_if_needed()
    view.screenshot(path=str(finished.artifacts / f"{finished.lab.app}_view.png"))
