"""selfheal: turn a plain-language spec into working, tested Python code, and repair it.

>>> import selfheal
>>> result = selfheal.heal("Return the median of a list of numbers.", provider="local")
>>> result.code, result.verified, result.status, result.iterations
"""

from __future__ import annotations

import sys as _sys
from typing import Any

from selfheal import local as _local  # noqa: F401  (registers the local backend with the router)
from selfheal.api import aheal, heal, resume
from selfheal.approval import Approve, Approver, Edit, Reject
from selfheal.asking import Asker, NoneOfThese, Pick, Skip
from selfheal.config import HealConfig
from selfheal.errors import (
    ApprovalRequired,
    CandidateTimeout,
    ConfigError,
    ProviderError,
    SandboxError,
    SelfHealError,
)
from selfheal.graph.runner import Run
from selfheal.request import HealRequest
from selfheal.result import HealResult
from selfheal.scale import HealJob, HealOutcome, aheal_many, heal_many
from selfheal.state import HealState

__version__ = "0.1.0"

if "ipykernel" in _sys.modules:  # inside a Jupyter kernel, heal() shows the run's live view
    from selfheal import api as _api
    from selfheal.notebook import NotebookFrontend

    _api.use_frontend(NotebookFrontend())

__all__ = [
    "ApprovalRequired",
    "Approve",
    "Approver",
    "Asker",
    "CandidateTimeout",
    "ConfigError",
    "Edit",
    "HealConfig",
    "HealJob",
    "HealOutcome",
    "HealRequest",
    "HealResult",
    "HealState",
    "NoneOfThese",
    "Pick",
    "ProviderError",
    "Reject",
    "Run",
    "SandboxError",
    "SelfHealError",
    "Skip",
    "__version__",
    "aheal",
    "aheal_many",
    "heal",
    "heal_many",
    "load_ipython_extension",
    "resume",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext selfheal``: registers ``%%selfheal``, ``%selfheal`` and ``%selfheal_config``."""
    from selfheal.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from selfheal.magics import unload_ipython_extension as _unload

    _unload(ipython)
