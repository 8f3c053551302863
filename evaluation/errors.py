"""Errors the evaluation harness raises (all subclasses of selfheal's ``ConfigError``)."""

from __future__ import annotations

from selfheal.errors import ConfigError

__all__ = ["ResultsFileError", "SuiteError"]


class SuiteError(ConfigError):
    """A suite or task cannot be loaded or selected as asked."""


class ResultsFileError(ConfigError):
    """An existing results file cannot be resumed (different suite/model, or unreadable)."""
