"""Generated text kept between two markers in the docs (``<!-- name:begin -->`` ...
``<!-- name:end -->``): print it, ``--write`` it into the files, or ``--check`` that they hold
it (exit 1 if not). ``graph_diagram.py`` and ``settings_table.py`` are its two uses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, kw_only=True)
class Embedded:
    """One generated block and the files that hold it."""

    name: str
    """The markers' name: ``<!-- {name}:begin -->`` and ``<!-- {name}:end -->``."""
    files: tuple[Path, ...]
    """The files that hold the block."""
    make: Callable[[], str]
    """Generates the block from its source of truth."""
    source: str
    """What the block is generated from, for the ``--check`` message."""

    @property
    def markers(self) -> tuple[str, str]:
        return f"<!-- {self.name}:begin -->", f"<!-- {self.name}:end -->"

    def embedded(self, text: str) -> str | None:
        """The block between the markers of ``text`` (None without markers)."""
        begin, end = self.markers
        if begin not in text or end not in text:
            return None
        return text.split(begin, 1)[1].split(end, 1)[0].strip()

    def replaced(self, text: str, new: str) -> str:
        """``text`` with ``new`` between its markers."""
        begin, end = self.markers
        head, rest = text.split(begin, 1)
        return f"{head}{begin}\n{new}\n{end}{rest.split(end, 1)[1]}"

    def stale(self, files: tuple[Path, ...] | None = None) -> list[str]:
        """The files whose block is missing or differs from what ``make`` generates."""
        want = self.make()
        paths = self.files if files is None else files
        return [str(p.relative_to(ROOT)) for p in paths if self.embedded(p.read_text()) != want]

    def main(self, argv: list[str] | None, doc: str | None) -> int:
        """The script's command line (print, ``--write``, ``--check``)."""
        parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--write", action="store_true", help="update the files' blocks")
        mode.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
        args = parser.parse_args(argv)
        if args.write:
            for p in self.files:
                p.write_text(self.replaced(p.read_text(), self.make()))
            return 0
        if args.check:
            bad = self.stale()
            script = f"scripts/{self.name.replace('-', '_')}.py"
            for name in bad:
                print(
                    f"{name}: the {self.name} differs from {self.source}; run "
                    f"python {script} --write",
                    file=sys.stderr,
                )
            return 1 if bad else 0
        print(self.make())
        return 0
