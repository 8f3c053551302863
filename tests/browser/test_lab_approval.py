"""A real JupyterLab in headless Chromium: the live view renders, updates, and Approve resumes
the run; the finished view shows its evidence and the candidates with the chosen one marked; the
healed function works in the next cell."""

from __future__ import annotations

from pathlib import Path

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
from selfheal.llm.mock import DEMO_SPEC
h = selfheal.notebook.start(DEMO_SPEC, config=selfheal.HealConfig(autonomy="review_repairs"))"""

CELL_RESULT = """r = await h
median = r.function
print("RESULT", r.status, r.verified, median([4, 1, 3, 2]))"""


def test_live_view_approve_in_the_browser(lab: Lab, artifacts: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    name = write_notebook(lab.root, "approval.ipynb", [CELL_HEAL, CELL_RESULT])
    shot = artifacts / f"{lab.app}_approval.png"
    done_shot = artifacts / f"{lab.app}_done.png"
    candidates_shot = artifacts / f"{lab.app}_candidates.png"
    print(f"\nscreenshots: {shot} {candidates_shot} {done_shot}\nlab log: {lab.log}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            open_notebook(page, lab, name)
            run_cell(page, 0)
            view = page.locator(".selfheal-view")
            expect(view).to_have_count(1, timeout=60_000)
            rows = page.locator(".selfheal-timeline .selfheal-row")
            expect(rows.first).to_be_visible(timeout=60_000)
            approve = page.locator(".selfheal-approve")
            expect(approve).to_be_visible(timeout=60_000)
            before = rows.count()
            expect(page.locator(".selfheal-row-waiting")).to_have_count(1)
            expect(page.locator(".selfheal-header")).to_contain_text("waiting for your approval")
            assert "Diagnosis" in page.locator(".selfheal-approval").inner_text()
            # a click on a row shows its detail
            page.locator(".selfheal-timeline .selfheal-row", has_text="diagnose").first.click()
            expect(page.locator(".selfheal-detail")).to_contain_text("diagnosis")
            # a repair round proposes several candidates: approving runs them all
            expect(page.locator(".selfheal-approval")).to_contain_text(
                "The round proposes 3 candidates"
            )
            page.locator(".selfheal-view").scroll_into_view_if_needed()
            page.locator(".selfheal-approval").scroll_into_view_if_needed()
            page.screenshot(path=str(shot), full_page=False)
            approve.click()
            expect(page.locator(".selfheal-header")).to_contain_text("verified", timeout=60_000)
            after = rows.count()
            assert after > before, (before, after)  # the timeline kept updating after approval
            expect(page.locator(".selfheal-row-waiting")).to_have_count(0)
            # the finished view leads with the evidence; the Candidates tab marks the chosen one
            expect(page.locator(".selfheal-header")).to_contain_text("Evidence: 2/2 trusted")
            page.locator(".selfheal-view .lm-TabBar-tab", has_text="Candidates").first.click()
            panel = page.locator(".selfheal-candidates")
            expect(panel).to_be_visible(timeout=30_000)
            expect(panel.locator("tr.selfheal-chosen")).to_have_count(1)
            expect(panel.locator("tr.selfheal-chosen")).to_contain_text("c5")
            expect(panel).to_contain_text("cluster 0 won with 3 of 3")
            page.locator(".selfheal-view").scroll_into_view_if_needed()
            page.screenshot(path=str(candidates_shot), full_page=False)
            run_cell(page, 1)
            out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output")
            expect(out).to_contain_text("RESULT verified True 2.5", timeout=60_000)
            page.screenshot(path=str(done_shot), full_page=False)
        except Exception:
            failed = artifacts / f"{lab.app}_failure.png"
            page.screenshot(path=str(failed), full_page=True)
            print(f"failure screenshot: {failed}")
            print("notebook text:\n" + page.locator(".jp-Notebook").inner_text()[-4000:])
            raise
        finally:
            browser.close()
