"""The notebook view of a heal run.

``viewmodel`` (with ``candidates`` and ``detail``) turns a state into rows (pure, no frontend
needed), ``text`` renders them as text and markdown, ``view.HealView`` as live ipywidgets, and
``approver.FutureApprover`` lets the view's buttons answer a proposal without blocking the kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selfheal.widgets.approver import FutureApprover
from selfheal.widgets.text import render_markdown, render_text

if TYPE_CHECKING:
    from selfheal.widgets.view import HealView

__all__ = ["FutureApprover", "HealView", "render_markdown", "render_text"]


def __getattr__(name: str) -> Any:
    if name == "HealView":  # ipywidgets is imported only when the view is used
        from selfheal.widgets.view import HealView

        return HealView
    raise AttributeError(name)
