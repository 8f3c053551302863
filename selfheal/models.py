"""Moved to :mod:`selfheal.llm.weights` (``WeightsSpec`` there; ``ModelSpec`` here is an alias).

Kept only so existing imports keep working; ``python -m selfheal.models`` still runs the same
command line as ``python -m selfheal.llm.weights``.
"""

from __future__ import annotations

from selfheal.llm.weights import *  # noqa: F403
from selfheal.llm.weights import WeightsSpec as ModelSpec
from selfheal.llm.weights import __all__ as _weights_all
from selfheal.llm.weights import main

__all__ = [*_weights_all, "ModelSpec"]

if __name__ == "__main__":
    raise SystemExit(main())
