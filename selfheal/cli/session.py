"""What one command of the command line knows while it runs (for its error report), and
the exit codes."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from selfheal.graph.runner import Run
from selfheal.result import HealResult

EXIT_VERIFIED, EXIT_NOT_VERIFIED, EXIT_ERROR, EXIT_AWAITING = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""stdout was closed early (``| head``): the shell's code for a process ended by SIGPIPE."""

DEBUG_ENV = "SELFHEAL_DEBUG"
"""Set to 1 to print the traceback of every error (the same as ``--debug``)."""


@dataclass
class Session:
    """What one command knows while it runs, for its error report: a failing command still
    says which run it was and what code there is (with ``--json``: in the one JSON object)."""

    json: bool = False
    """Whether stdout is one JSON object (``--json``)."""
    debug: bool = False
    """Whether errors print their traceback (``--debug``, ``SELFHEAL_DEBUG=1``)."""
    run: Run | None = None
    """The run the command started or loaded, once there is one."""
    result: HealResult | None = None
    """The run's result, once there is one."""

    def known(self) -> HealResult | None:
        if self.result is not None:
            return self.result
        return self.run.result if self.run is not None else None


def session_of(args: argparse.Namespace) -> Session:
    session = getattr(args, "session", None)
    return session if isinstance(session, Session) else Session()
