"""The notebook view of a heal run: pure view models (``viewmodel``, ``candidates``, ``detail``),
rendered as text (``text``) or live ipywidgets (``view.HealView``); docs/architecture.md."""

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
