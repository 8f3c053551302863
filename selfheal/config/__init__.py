"""``HealConfig``: every knob of one heal run, frozen and recorded with its result."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import ValidationError, ValidationInfo, ValidatorFunctionWrapHandler, model_validator
from pydantic.fields import FieldInfo

from selfheal._record import Record
from selfheal.config.groups import ROLES as ROLES
from selfheal.config.groups import (
    Approval,
    Budgets,
    Calls,
    Generation,
    Group,
    Reads,
    Repairs,
    SandboxLimits,
    Selection,
    Storage,
    Tests,
)
from selfheal.config.groups import RoleName as RoleName
from selfheal.errors import ConfigError


class HealConfig(Record):
    """How a heal run behaves, in groups by the part of the run that reads them; every result
    records it. A setting is read through its group (``config.generation.candidates``); flat
    names set it (``HealConfig(candidates=4)``, ``changed``, ``model_copy``): docs/usage.md."""

    generation: Generation = Generation()
    """The first round's candidates."""
    tests: Tests = Tests()
    """Tests and probes."""
    selection: Selection = Selection()
    """Choosing the answer."""
    repairs: Repairs = Repairs()
    """The repair rounds."""
    calls: Calls = Calls()
    """The model calls."""
    limits: SandboxLimits = SandboxLimits()
    """The sandbox."""
    budgets: Budgets = Budgets()
    """The run's budgets."""
    storage: Storage = Storage()
    """Run logs and memory."""
    approval: Approval = Approval()
    """Human approval."""

    if TYPE_CHECKING:  # at run time pydantic's own __init__ (a custom one would drop context)

        def __init__(self, **settings: Any) -> None:
            """``HealConfig(candidates=4)``, ``HealConfig(generation={"candidates": 4})``, or
            both: every setting by its flat name or in its group."""

    @model_validator(mode="wrap")
    @classmethod
    def _clear_errors(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """Flat names go to their group. A bad value is a ``ConfigError`` that names the option
        (and its group) and what it must be, not a pydantic traceback.
        ``context={"names": {field: "--flag"}}`` names options the way the caller spells them
        (the CLI's flags)."""
        try:
            return handler(_grouped(data))
        except ValidationError as exc:
            names = (info.context or {}).get("names", {})
            raise ConfigError(config_problems(exc, names)) from None

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            """``config.candidates``, the old flat read: the field through its group, with a
            ``DeprecationWarning`` that names the group (hidden from type checkers, so the
            package cannot read a setting this way)."""
            group = FIELD_GROUP.get(name)
            if group is None:
                return super().__getattr__(name)
            warnings.warn(
                f"HealConfig.{name} is the old flat read: read config.{group}.{name}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(getattr(self, group), name)

    def changed(self, **settings: Any) -> HealConfig:
        """A copy with ``settings`` (flat names or groups: ``changed(candidates=4)``), checked
        as ``HealConfig(...)`` checks them (a bad value is a ``ConfigError``): how the package
        rewrites a config."""
        return type(self).model_validate({**dict(self), **settings})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update``, whose fields may be named flat (``{"candidates": 4}``)."""
        rest, flat = _split(update or {})
        for group, part in flat.items():
            rest[group] = rest.get(group, getattr(self, group)).model_copy(update=part)
        return super().model_copy(update=rest, deep=deep)

    def flat(self) -> dict[str, Any]:
        """Every field by its flat name."""
        return {name: getattr(getattr(self, g), name) for name, g in FIELD_GROUP.items()}

    @classmethod
    def single_shot(cls, **changes: object) -> HealConfig:
        """One generation, no tests, no repair: the baseline the harness compares against."""
        base: dict[str, object] = {
            "max_iterations": 1,
            "candidates": 1,
            "first_sample": 1,
            "probes": False,
            "example_tests": False,
            "spec_blind_tests": False,
            "adversarial_tests": False,
            "critic": False,
            "lessons": False,
            "repair": False,
            "run_tests": False,
        }
        base.update(changes)
        return cls.model_validate(base)


GROUPS: Mapping[str, type[Group]] = {
    name: info.annotation  # type: ignore[misc]
    for name, info in HealConfig.model_fields.items()
}
"""Each group of ``HealConfig`` by its name."""

FIELD_GROUP: Mapping[str, str] = {
    field: group for group, cls in GROUPS.items() for field in cls.model_fields
}
"""Each setting's flat name -> its group (``candidates`` -> ``generation``)."""
assert len(FIELD_GROUP) == sum(len(c.model_fields) for c in GROUPS.values()), "a name twice"
assert not set(FIELD_GROUP) & set(GROUPS), "a setting named like a group"


def field_info(name: str) -> FieldInfo:
    """The pydantic field of the setting ``name`` (flat), in its group."""
    return GROUPS[FIELD_GROUP[name]].model_fields[name]


def reads_of(name: str) -> tuple[str, ...]:
    """The nodes that read the setting ``name`` (its ``Reads``, else its group's ``reads``)."""
    marks = [m.nodes for m in field_info(name).metadata if isinstance(m, Reads)]
    return marks[0] if marks else GROUPS[FIELD_GROUP[name]].reads


def flat_settings(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored config (grouped, or flat as older records have it) by flat names, as stored."""
    out = {k: v for k, v in stored.items() if k not in GROUPS}
    for group in GROUPS:
        if isinstance(part := stored.get(group), Mapping):
            out.update(part)
    return out


def _split(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``data``'s flat names by their group, apart from the rest (groups, unknown names)."""
    rest: dict[str, Any] = {}
    flat: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if key in FIELD_GROUP:
            flat.setdefault(FIELD_GROUP[key], {})[key] = value
        else:
            rest[key] = value
    return rest, flat


def _grouped(data: Any) -> Any:
    """``data`` to validate as a ``HealConfig``, its flat names moved into their groups (on
    top of a group it also gives); anything else is left for validation to judge."""
    if not isinstance(data, Mapping):
        return data
    out, flat = _split(data)
    for group, part in flat.items():
        given = out.get(group, {})
        if isinstance(given, Group):  # what it was given, so the fields set stay the set ones
            given = {name: getattr(given, name) for name in given.model_fields_set}
        if isinstance(given, Mapping):
            out[group] = {**given, **part}
    return out


AUTO_CANDIDATES = 4
"""The population of ``candidates="auto"`` when the backend says it decodes fewer at once (or
nothing): the samples then wait their turn, but fewer candidates would verify less."""


def population_size(batch_hint: int | None) -> int:
    """``candidates="auto"`` for a backend that decodes ``batch_hint`` answers at once: that
    many, at least :data:`AUTO_CANDIDATES` and at most 16."""
    return min(16, max(AUTO_CANDIDATES, batch_hint or AUTO_CANDIDATES))


def candidates_of(config: HealConfig) -> int:
    """``config.generation.candidates`` as a number (``auto`` before a run resolved it:
    :data:`AUTO_CANDIDATES`)."""
    count = config.generation.candidates
    return count if isinstance(count, int) else AUTO_CANDIDATES


def default_runs_dir() -> Path:
    """``$SELFHEAL_RUNS_DIR``, else ``$XDG_STATE_HOME/selfheal/runs``, else ``~/.local/state/selfheal/runs``."""
    env = os.environ.get("SELFHEAL_RUNS_DIR")
    if env:
        return Path(env).expanduser()
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "selfheal" / "runs"


def runs_dir_for(configured: str | None) -> Path:
    """The runs directory of a config's ``runs_dir`` (None: the default)."""
    return Path(configured).expanduser() if configured else default_runs_dir()


def memory_path_for(config: HealConfig) -> Path:
    """Where ``config``'s memory lives: ``memory_path``, else ``$SELFHEAL_MEMORY``, else
    ``memory.sqlite3`` beside the run logs in its runs directory."""
    if config.storage.memory_path:
        return Path(config.storage.memory_path).expanduser()
    env = os.environ.get("SELFHEAL_MEMORY")
    if env:
        return Path(env).expanduser()
    return runs_dir_for(config.storage.runs_dir) / "memory.sqlite3"


_REQUIREMENTS = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be greater than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "literal_error": "must be one of {expected}",
    "extra_forbidden": "is not an option of HealConfig (see help(HealConfig))",
}
"""What a pydantic error type says about a bad option (its ``ctx`` filled in)."""


def _requirement(err: Mapping[str, Any]) -> str:
    template = _REQUIREMENTS.get(err.get("type", ""))
    if template is not None:
        return template.format(**(err.get("ctx") or {}))
    msg = str(err.get("msg", "is not valid"))
    return msg[:1].lower() + msg[1:]


def config_problems(exc: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """One sentence per bad option of a ``HealConfig``, e.g. ``--max-iterations 0: must be at
    least 1``; ``names`` maps field names to how the caller spells them."""
    names = names or {}
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ())]
        field = ".".join(loc) or "HealConfig"
        given = err.get("input")
        named = [x for x in loc if not x.isdigit()]  # a list's item: its setting's name
        name = names.get(named[-1]) if named else None
        item = f" (item {int(loc[-1]) + 1})" if loc and loc[-1].isdigit() else ""
        shown = f"{name}{item} {given}" if name else f"{field}={given!r}"
        parts.append(f"{shown}: {_requirement(err)}")
    return "Invalid option: " + "; ".join(parts) + "."
