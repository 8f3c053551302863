"""Near-miss shapes: a parsed JSON value validated as a pydantic model, strictly first, then
after fixes a small model's reply often needs (each one recorded): a number in a string, a
choice in the wrong case, one string where a list of strings is expected, unknown keys of a
closed record, an answer wrapped in one extra object, a bare list for a one-list record.
Nothing is invented: a missing field stays missing, an unknown choice is not guessed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)


def _strip_optional(annotation: Any) -> Any:
    """``X | None`` → ``X``."""
    origin = get_origin(annotation)
    if origin is Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_str_sequence(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset) or (
        origin is not None and getattr(origin, "__name__", "") == "Sequence"
    ):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        return len(args) == 1 and args[0] is str
    return False


def _coerce(value: Any, model: type[BaseModel], path: str, repairs: list[str]) -> Any:
    """Fix near-miss shapes field by field, recording each fix. Never joins a list into a
    string where a list is expected; never invents a missing field."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    fields = model.model_fields
    if model.model_config.get("extra") == "forbid":
        aliases = {info.alias for info in fields.values()}
        unknown = [k for k in out if k not in fields and k not in aliases]
        for key in unknown:
            del out[key]
            repairs.append(f"dropped unknown key {path}{key}")
    for name, info in fields.items():
        key = info.alias or name
        if key not in out:
            continue
        item = out[key]
        annotation = _strip_optional(info.annotation)
        where = f"{path}{key}"
        if get_origin(annotation) is Literal and isinstance(item, str):
            choices = [c for c in get_args(annotation) if isinstance(c, str)]
            if item not in choices:
                folded = [c for c in choices if c.lower() == item.strip().lower()]
                if len(folded) == 1:
                    out[key] = folded[0]
                    repairs.append(f"read {item!r} as the choice {folded[0]!r} for {where}")
        elif annotation is str:
            if isinstance(item, list) and all(isinstance(x, str) for x in item) and item:
                out[key] = "\n".join(item)
                repairs.append(f"joined a list of strings into the string {where}")
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                out[key] = str(item)
                repairs.append(f"turned the number {where} into a string")
        elif _is_str_sequence(annotation) and isinstance(item, str):
            out[key] = [item]
            repairs.append(f"wrapped the string {where} in a one-element list")
        elif annotation in (int, float) and isinstance(item, str):
            try:
                number: int | float = annotation(item.strip())
            except ValueError:
                continue
            out[key] = number
            repairs.append(f"read the string {where} as a number")
        elif _is_model(annotation):
            out[key] = _coerce(item, annotation, f"{where}.", repairs)
        elif get_origin(annotation) in (list, tuple) and isinstance(item, list):
            args = [a for a in get_args(annotation) if a is not Ellipsis]
            if len(args) == 1 and _is_model(_strip_optional(args[0])):
                inner = _strip_optional(args[0])
                out[key] = [
                    _coerce(x, inner, f"{where}[{i}].", repairs) for i, x in enumerate(item)
                ]
    return out


def _sole_list_field(model: type[BaseModel]) -> str | None:
    """The key of the model's only list-typed field, if it has exactly one."""
    keys = [
        info.alias or name
        for name, info in model.model_fields.items()
        if get_origin(_strip_optional(info.annotation)) in (list, tuple, set, frozenset)
    ]
    return keys[0] if len(keys) == 1 else None


def _unwrap(obj: dict[str, Any], model: type[T]) -> tuple[T, tuple[str, ...]] | None:
    """``{"answer": {...}}`` → the inner object, when that validates."""
    if len(obj) != 1:
        return None
    key, inner = next(iter(obj.items()))
    if not isinstance(inner, dict):
        return None
    unwrapped = validate_shape(inner, model)
    if isinstance(unwrapped, str):
        return None
    return unwrapped[0], (f"unwrapped the object under {key!r}", *unwrapped[1])


def validate_shape(obj: Any, model: type[T]) -> tuple[T, tuple[str, ...]] | str:
    """Validate strictly first, then after near-miss coercion. Returns the value and the
    repairs, or the validation error text."""
    if isinstance(obj, list):
        key = _sole_list_field(model)
        if key is None:
            return "a JSON array where an object was expected"
        wrapped = validate_shape({key: obj}, model)
        if isinstance(wrapped, str):
            return wrapped
        return wrapped[0], (f"wrapped a bare list as {key}", *wrapped[1])
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    keys = {info.alias or name for name, info in model.model_fields.items()}
    if obj and keys and not set(obj) & keys:
        # Records whose fields all have defaults would accept any object: demand overlap.
        unwrapped = _unwrap(obj, model)
        if unwrapped is not None:
            return unwrapped
        return f"none of the expected keys ({', '.join(sorted(keys))}) is present"
    with contextlib.suppress(ValidationError, TypeError, ValueError):
        return model.model_validate_json(json.dumps(obj, ensure_ascii=False), strict=True), ()
    repairs: list[str] = []
    fixed = _coerce(obj, model, "", repairs)
    try:
        value = model.model_validate_json(json.dumps(fixed, ensure_ascii=False), strict=True)
        return value, tuple(repairs)
    except (ValidationError, TypeError, ValueError):
        pass
    try:
        value = model.model_validate(fixed)
    except ValidationError as exc:
        unwrapped = _unwrap(obj, model)
        return unwrapped if unwrapped is not None else _error_text(exc)
    return value, (*repairs, "coerced types (lax validation)")


def _error_text(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"{loc}: {err['msg']}")
    return "; ".join(lines)


def fold_choice(choices: Sequence[str], otherwise: str) -> Callable[[Any], Any]:
    """A before-validator for a reply field with fixed choices
    (``Annotated[Literal[...], BeforeValidator(fold_choice(...))]``): a choice in another case
    or with spaces around is read as that choice, any other string as ``otherwise``. The
    field's JSON schema still lists the choices (constrained decoding keeps to them), and a
    small model's near miss costs no retry."""
    by_folded = {c.lower(): c for c in choices}

    def fold(value: Any) -> Any:
        if not isinstance(value, str):
            return value  # validation says what is wrong
        return by_folded.get(value.strip().lower(), otherwise)

    return fold
