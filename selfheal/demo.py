"""The scripted demo: ``selfheal heal --provider mock`` and the tutorials heal ``DEMO_SPEC`` (a
median function) with the mock provider replaying ``DEMO_SCRIPT``: a first population that
fails the even-length example, then a repair round that agrees.

The command line and the notebooks take the demo from here, not from the test double."""

from __future__ import annotations

from selfheal.llm.mock import DEMO_SCRIPT, DEMO_SPEC

__all__ = ["DEMO_SCRIPT", "DEMO_SPEC"]
