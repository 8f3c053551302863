"""Run logs: every state the runner produces, one JSON line each, one file per run."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

from pydantic import ValidationError

from selfheal.config import runs_dir_for
from selfheal.errors import ConfigError
from selfheal.state import HealState


class RunLog:
    """Append-only JSON-lines file of states. A torn last line (a crash mid-write) is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_state(cls, state: HealState) -> RunLog:
        d = runs_dir_for(state.config.storage.runs_dir)
        d.mkdir(parents=True, exist_ok=True)
        return cls(d / f"{state.run_id}.jsonl")

    def append(self, state: HealState) -> None:
        line = state.model_dump_json() + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def states(self) -> list[HealState]:
        return read_states(self.path)


def read_states(path: Path) -> list[HealState]:
    """Every state in a run log (plain, or xz-compressed as ``*.jsonl.xz``), in order. A log
    that cannot be read is a ``ConfigError`` naming the file and the line."""
    if not path.is_file():
        raise ConfigError(f"No run log at {path}. List runs with `selfheal runs list`.")
    try:
        raw = path.read_bytes()
        if path.suffix == ".xz":  # an archived log (the benchmark keeps its paired bases so)
            raw = lzma.decompress(raw)
    except OSError as exc:
        raise ConfigError(f"Cannot read run log {path}: {exc.strerror or exc}.") from None
    except lzma.LZMAError as exc:
        raise ConfigError(f"Run log {path} is not a readable xz archive: {exc}.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Run log {path} is not UTF-8 text (byte offset {exc.start}): it is damaged or not "
            "a selfheal run log."
        ) from None
    out: list[HealState] = []
    lines = text.rstrip("\n").split("\n")  # not splitlines(): a spec may hold U+2028
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(HealState.model_validate_json(line))
        except (ValidationError, ValueError, ConfigError) as exc:
            if i == len(lines) - 1 and out:
                break  # torn write at a crash: the previous state is the checkpoint
            reason = str(exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else exc)[:200]
            raise ConfigError(f"Run log {path} is corrupt at line {i + 1}: {reason}") from None
    if not out:
        raise ConfigError(f"Run log {path} holds no state.")
    return out


def find_run(run: str | os.PathLike[str], runs_dir: str | None = None) -> Path:
    """A run log from a path, a run id, or a unique prefix of one."""
    p = Path(run)
    if p.suffix == ".jsonl" and p.is_file():
        return p
    d = runs_dir_for(runs_dir)
    name = str(run)
    logs = list_runs(runs_dir) if name and "/" not in name else []
    matches = [q for q in logs if q.stem == name] or sorted(
        q for q in logs if q.name.startswith(name)
    )
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigError(f"No run {name!r} in {d}. List runs with `selfheal runs list`.")
    raise ConfigError(f"{name!r} matches {len(matches)} runs in {d}; give more of the id.")


def list_runs(runs_dir: str | None = None) -> list[Path]:
    d = runs_dir_for(runs_dir)
    if not d.is_dir():
        return []
    found = []
    for p in d.glob("*.jsonl"):
        try:
            found.append((p.stat().st_mtime, p.name, p))
        except OSError:
            continue  # removed meanwhile
    return [p for _, _, p in sorted(found)]
