"""Prompts are data: one YAML file per role (``version``, ``role``, ``system``, ``user`` as Jinja2
templates with strict undefined variables, ``reply``: ``code`` or ``json``), shipped inside the
wheel and re-read when they change on disk. Every role's messages open with the shared partials
(``prompts/partials/``) so the server's prompt cache reuses them; a JSON reply's schema comes
from the role's pydantic reply model, never the file. A user directory
(``SELFHEAL_PROMPTS_DIR`` or ``set_prompts_dir``) overrides a role's file of the same name."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import jinja2
import yaml

from selfheal._record import Record
from selfheal.errors import ConfigError
from selfheal.llm.base import Message

_REQUIRED = ("version", "role", "system", "user", "reply")
_OPTIONAL = ("description",)


def _partial(name: str) -> tuple[str, str, Callable[[], bool]] | None:
    """A shared partial (``prompts/partials/<name>``), the user's folder first."""
    for d in prompts_dirs():
        path = d / "partials" / name
        if path.is_file():
            return path.read_text(encoding="utf-8"), str(path), _unchanged(path)
    return None


def _unchanged(path: Path) -> Callable[[], bool]:
    """Jinja's up-to-date check: the partial is re-read once its file changes."""
    mtime = path.stat().st_mtime_ns
    return lambda: path.is_file() and path.stat().st_mtime_ns == mtime


_env = jinja2.Environment(
    loader=jinja2.FunctionLoader(_partial),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,
)
_lock = threading.Lock()
_cache: dict[Path, tuple[float, PromptTemplate]] = {}
_user_dir: Path | None = None


class PromptTemplate(Record):
    """A role's prompt as loaded from YAML."""

    role: str
    """The role it is for."""
    version: int
    """Bumped whenever the prompt changes meaning; recorded in events."""
    description: str = ""
    """What the role does."""
    system: str
    """System message template."""
    user: str
    """User message template."""
    reply: Literal["code", "json"]
    """``code``: a fenced Python block; ``json``: an object matching the role's reply model."""
    path: str = ""
    """The file it came from."""

    def render(self, **variables: Any) -> list[Message]:
        """System and user messages with ``variables`` filled in (missing ones raise)."""
        try:
            system = _env.from_string(self.system).render(**variables).strip()
            user = _env.from_string(self.user).render(**variables).strip()
        except jinja2.UndefinedError as exc:
            raise ConfigError(
                f"Prompt {self.path or self.role!r} uses a variable that was not given: {exc}. "
                "Fix the template or pass the variable."
            ) from exc
        except jinja2.TemplateNotFound as exc:
            raise ConfigError(
                f"Prompt {self.path or self.role!r} includes {exc.name!r}, which is in no "
                f"partials folder ({', '.join(str(d / 'partials') for d in prompts_dirs())}). "
                "Add the file or remove the include."
            ) from exc
        return [Message(role="system", content=system), Message(role="user", content=user)]


def set_prompts_dir(path: str | os.PathLike[str] | None) -> None:
    """Use ``path`` to override shipped prompts (a file ``<role>.yaml`` there wins)."""
    global _user_dir
    _user_dir = Path(path) if path is not None else None


def _shipped_dir() -> Path:
    packaged = resources.files("selfheal").joinpath("prompts")
    p = Path(str(packaged))
    if p.is_dir():
        return p
    # development checkout: prompts/ lives next to the package
    repo = Path(__file__).resolve().parents[2] / "prompts"
    if repo.is_dir():
        return repo
    raise ConfigError(
        "selfheal's prompts folder is missing from the installation. Reinstall selfheal "
        "(pip install --force-reinstall selfheal)."
    )


def prompts_dirs() -> list[Path]:
    """Folders searched for a role's prompt, first match wins."""
    given = (_user_dir, os.environ.get("SELFHEAL_PROMPTS_DIR"))
    return [*(Path(d) for d in given if d), _shipped_dir()]


def _find(role: str) -> Path:
    for d in prompts_dirs():
        p = d / f"{role}.yaml"
        if p.is_file():
            return p
    raise ConfigError(f"No prompt for role {role!r} in {', '.join(map(str, prompts_dirs()))}.")


def _parse(path: Path) -> PromptTemplate:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"Prompt file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"Prompt file {path} must hold a mapping with keys {_REQUIRED}.")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"Prompt file {path} lacks {missing}; every prompt needs {_REQUIRED}.")
    unknown = sorted(set(data) - {*_REQUIRED, *_OPTIONAL})
    if "schema" in unknown:
        raise ConfigError(
            f"Prompt file {path} has a schema: block. The reply schema comes from the role's "
            "reply model (selfheal/roles/), so a copy here could only drift from it: remove it."
        )
    if unknown:
        raise ConfigError(
            f"Prompt file {path} has unknown key(s) {unknown}; a prompt has {_REQUIRED} and "
            f"optionally {_OPTIONAL}."
        )
    if data["reply"] not in ("code", "json"):
        raise ConfigError(f"Prompt file {path}: reply must be code or json, not {data['reply']!r}.")
    for key in ("system", "user"):
        try:
            _env.parse(data[key])
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(
                f"Prompt file {path}, {key}: template error line {exc.lineno}: {exc}"
            ) from exc
    return PromptTemplate(
        role=str(data["role"]),
        version=int(data["version"]),
        description=str(data.get("description", "")),
        system=str(data["system"]),
        user=str(data["user"]),
        reply=data["reply"],
        path=str(path),
    )


def load_prompt(role: str) -> PromptTemplate:
    """The prompt for ``role``, re-read if its file changed since the last call."""
    path = _find(role)
    mtime = path.stat().st_mtime_ns
    with _lock:
        hit = _cache.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
    tpl = _parse(path)
    with _lock:
        _cache[path] = (mtime, tpl)
    return tpl


def render(role: str, **variables: Any) -> list[Message]:
    """Load ``role``'s prompt and render it."""
    return load_prompt(role).render(**variables)
