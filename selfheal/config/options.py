"""The settings as command-line options and ``name=value`` words, derived from the groups'
fields: the flag from the name (or its ``Flag``), the type, the ``Literal`` choices, the help
from the docstring's first sentence and the default; pydantic checks the bounds. A new field
gets its option without an edit here, in the CLI or in the magics."""

from __future__ import annotations

import argparse
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from selfheal.config import FIELD_GROUP, GROUPS, field_info
from selfheal.config.groups import Flag
from selfheal.errors import ConfigError


def _flag(name: str) -> str | None:
    marks = [m.name for m in field_info(name).metadata if isinstance(m, Flag)]
    return marks[0] if marks else "--" + name.replace("_", "-")


FLAGS: Mapping[str, str] = {name: f for name in FIELD_GROUP if (f := _flag(name)) is not None}
"""Each setting that has a flag -> its flag (``--name-with-dashes`` unless its ``Flag`` says
otherwise); errors name the flag."""


def _kinds(name: str) -> tuple[list[type], list[str]]:
    """The setting's types (None left out) and the words of its ``Literal``s."""
    kinds: list[type] = []
    words: list[str] = []

    def walk(t: Any) -> None:
        origin = get_origin(t)
        if origin is Literal:
            words.extend(get_args(t))
        elif origin in (Union, types.UnionType):
            for arg in get_args(t):
                walk(arg)
        elif t is not type(None):
            kinds.append(origin or t)

    walk(field_info(name).annotation)
    return kinds, words


def default_text(name: str) -> str:
    """``(default X)`` of a setting, read from its field so a help text cannot drift from the
    real default: on/off for a switch, none for no limit."""
    value = field_info(name).get_default(call_default_factory=True)
    if isinstance(value, bool) or value is None or value == ():
        return f"(default {({True: 'on', False: 'off', None: 'none', (): 'none'})[value]})"
    return f"(default {value})"


def _help(name: str) -> str:
    text = " ".join((field_info(name).description or "").split()).replace("``", "`")
    return f"{text.split('. ')[0].rstrip('.')} {default_text(name)}".replace("%", "%%")


def _number(kind: type, words: list[str]) -> Callable[[str], Any]:
    """A number of ``kind``, or one of ``words`` (``--candidates auto``)."""

    def convert(text: str) -> Any:
        if text.strip().lower() in words:
            return text.strip().lower()
        try:
            return kind(text)
        except ValueError:
            either = "".join(f" or {w}" for w in words)
            raise argparse.ArgumentTypeError(
                f"invalid {kind.__name__} value: {text!r} (it needs a number{either})"
            ) from None

    return convert


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """One option per setting in ``FLAGS``: ``--x/--no-x`` for a switch, ``choices`` for a
    ``Literal``, else the field's type; left out, an option keeps the config's default."""
    sections = {g: parser.add_argument_group(f"{g} settings", c.__doc__) for g, c in GROUPS.items()}
    for name, flag in FLAGS.items():
        kinds, words = _kinds(name)
        how: dict[str, Any] = {"type": kinds[0]} if kinds else {"choices": words}
        if bool in kinds:
            how = {"action": argparse.BooleanOptionalAction}
        elif kinds and kinds[0] in (int, float):
            how = {"type": _number(kinds[0], words), "metavar": "N"}
        elif kinds and kinds[0] is tuple:  # comma-separated; the field's validator splits it
            how = {"type": str, "metavar": "LIST"}
        sections[FIELD_GROUP[name]].add_argument(flag, dest=name, help=_help(name), **how)


def config_values(args: argparse.Namespace) -> dict[str, Any]:
    """The settings ``args`` (parsed with ``add_config_options``) gives, by flat name."""
    return {n: v for n in FLAGS if (v := getattr(args, n, None)) is not None}


def setting(word: str) -> tuple[str, Any]:
    """``name=value``: a setting and its value (``none`` unsets it; ``true``/``false`` and
    ``on``/``off`` are booleans for a switch, as in ``memory=off``; the rest pydantic
    validates)."""
    key, sep, raw = word.partition("=")
    key = key.strip().replace("-", "_")
    if not sep:
        raise ConfigError(
            f"Expected key=value, got {word!r}. Example: %selfheal_config autonomy=review_repairs "
            "max_iterations=3 model=mock"
        )
    if key not in FIELD_GROUP:
        raise ConfigError(
            f"Unknown setting {key!r}. Known settings: {', '.join(sorted(FIELD_GROUP))}."
        )
    low = raw.lower()
    if low in ("none", "null", ""):
        return key, None
    if low in ("true", "false", "on", "off") and bool in _kinds(key)[0]:
        return key, low in ("true", "on")
    return key, raw
