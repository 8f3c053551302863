"""A finished run's output holds the finished run (issue 44, item 6): the live view is
displayed with a display id, and the end of the run replaces that output's text and markdown,
which a notebook saved without its widget state shows, by the final ones (they said "running
generate · 0 model call(s)" for good)."""

from __future__ import annotations

import pytest
from test_kernel_modes import PRELUDE, WIDGET, Kernel, kernel, kernel_env  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_displayed_output_is_updated_to_the_finished_run(kernel: Kernel) -> None:  # noqa: F811
    kernel.execute(PRELUDE)
    msgs = kernel.execute("r = selfheal.heal(DEMO_SPEC)\nprint(r.status)")
    (shown,) = [m for m in msgs if m["msg_type"] == "display_data"]
    assert WIDGET in shown["content"]["data"]
    first = shown["content"]["data"]["text/plain"]
    assert "median: verified" not in first  # what it said when the run started
    display_id = shown["content"].get("transient", {}).get("display_id")
    assert display_id, "the view was displayed without a display id: it can never be updated"
    updates = [
        m["content"]
        for m in msgs
        if m["msg_type"] == "update_display_data"
        and m["content"].get("transient", {}).get("display_id") == display_id
    ]
    assert updates, "the output was never updated"
    final = updates[-1]["data"]
    assert WIDGET in final  # still the live widget
    assert "median: verified" in final["text/plain"]
    assert "model call(s)" in final["text/plain"] and "0 model call(s)" not in final["text/plain"]
    assert "**Evidence:** 2/2 trusted tests pass" in final["text/markdown"]
