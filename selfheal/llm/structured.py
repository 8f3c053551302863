"""Structured output and code that survive small models.

Two kinds of answer travel from a model to selfheal:

* **Records** (test plans, diagnoses, critiques) travel as JSON. :func:`parse_structured`
  salvages JSON from what small models actually produce (prose around it, code fences,
  single quotes, trailing commas, a truncated tail, near-miss types) and validates it with
  pydantic. :func:`ask_structured` asks a provider, salvages, and retries with the
  validation error shown to the model, a bounded number of times.
* **Code** travels in fenced ```python blocks, never inside JSON strings (escaping code in
  JSON is where small models break most). :func:`extract_code` picks the best block and
  :func:`ask_code` asks, checks the code parses and defines the entry point, and retries.

Salvage never invents a value: a truncated reply is closed only when what is missing is
closing quotes and brackets; a number or key cut off at the end is a failure.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from selfheal._record import Record
from selfheal.errors import MalformedReply
from selfheal.llm.base import Completion, Message, Provider

__all__ = [
    "CodeReply",
    "Parsed",
    "StructuredParseError",
    "StructuredReply",
    "aask_code",
    "aask_structured",
    "ask_code",
    "ask_structured",
    "extract_code",
    "parse_structured",
]

T = TypeVar("T", bound=BaseModel)

_MAX_FEEDBACK_CHARS = 1500
"""Longest validation-error text shown back to the model on a retry."""


class StructuredParseError(MalformedReply):
    """No JSON object matching the expected model could be salvaged from a reply.

    ``errors`` is the last validation or parse error, in the words shown to the model on a
    retry; ``raw`` is the reply."""

    def __init__(self, message: str, *, errors: str, raw: str = "") -> None:
        self.errors = errors
        super().__init__(message, raw=raw)


class Parsed(Record, Generic[T]):
    """A value salvaged from a model's reply, and what salvage it took."""

    value: T
    """The validated value."""
    degraded: bool = False
    """True when any salvage was needed (the reply was not clean JSON of the right shape)."""
    repairs: tuple[str, ...] = ()
    """What was done to the reply, in order, e.g. ``"extracted from code fence"``."""


class StructuredReply(Record, Generic[T]):
    """The result of :func:`ask_structured`."""

    value: T
    """The validated value."""
    completions: tuple[Completion, ...]
    """Every call made (first try and retries), for usage accounting."""
    degraded: bool = False
    """True when salvage or a retry was needed."""
    repairs: tuple[str, ...] = ()
    """Salvage applied to the reply that was finally used."""


class CodeReply(Record):
    """The result of :func:`ask_code`."""

    code: str
    """Python source that parses (and defines the entry point, when one was asked for)."""
    completions: tuple[Completion, ...]
    """Every call made (first try and retries), for usage accounting."""
    degraded: bool = False
    """True when a retry was needed or the code was not in a fenced block."""
    text: str = ""
    """The full reply the code came from, so prose such as explanations can be shown."""


# --------------------------------------------------------------------------- JSON salvage

_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _strip_thinking(text: str) -> str:
    """Drop ``<think>...</think>`` blocks that reasoning models put before the answer."""
    return _THINK_RE.sub("", text)


@dataclass
class _Frame:
    """One open bracket while scanning: which, what comes next, and (for lists) where the
    last complete item ends."""

    bracket: str
    state: str  # object: key, colon, value, after; list: value, after
    sep: int  # list: index of the "[" or of the last "," at this depth


def _scan_object(text: str, start: int) -> tuple[str, bool, str | None, bool]:
    """From the ``{`` (or ``[``) at ``start``, find the balanced object (or array).

    Returns ``(candidate, complete, closed, dropped)``: the text up to the matching bracket
    and True; or, when the text ends first, the rest of the text, False, and the same text
    closed safely (None when that would mean inventing a value), and whether a cut-off
    list item was dropped to close it. Closing is safe after a complete value or a comma.
    When the text ends inside a key, a string or a number (which may have been longer),
    the innermost list's cut-off last item is dropped, if an earlier item is complete;
    otherwise closing is refused. Understands both quote styles, so Python-literal dicts scan correctly too.
    """
    frames: list[_Frame] = []
    quote = ""
    string_is_key = False
    escaped = False
    literal = ""
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
                if frames:
                    frames[-1].state = "colon" if string_is_key else "after"
            i += 1
            continue
        if ch in " \t\r\n":
            literal = ""
        elif ch in "\"'":
            quote = ch
            string_is_key = bool(frames) and frames[-1].bracket == "{" and frames[-1].state == "key"
            literal = ""
        elif ch in "{[":
            frames.append(_Frame(ch, "key" if ch == "{" else "value", i))
            literal = ""
        elif ch in "}]":
            if not frames:
                return text[start:i], False, None, False
            frames.pop()
            literal = ""
            if not frames:
                return text[start : i + 1], True, None, False
            frames[-1].state = "after"
        elif ch == ":":
            if frames and frames[-1].bracket == "{":
                frames[-1].state = "value"
            literal = ""
        elif ch == ",":
            if frames:
                top = frames[-1]
                top.state = "key" if top.bracket == "{" else "value"
                if top.bracket == "[":
                    top.sep = i
            literal = ""
        else:
            literal += ch
            if frames:
                frames[-1].state = "after"
        i += 1

    rest = text[start:]
    if not frames:
        return rest, False, None, False
    # The text ended inside the object: decide whether closing it is safe.
    cut_value = bool(quote) or (
        bool(literal) and literal not in {"true", "false", "null", "True", "False", "None"}
    )
    dangling_key = frames[-1].bracket == "{" and frames[-1].state in {"colon", "value"}
    keep = frames
    body = rest
    dropped = False
    if cut_value or dangling_key:
        lists = [k for k, f in enumerate(frames) if f.bracket == "["]
        if not lists:
            return rest, False, None, False
        k = lists[-1]
        sep = frames[k].sep
        if text[sep] == "[":
            return rest, False, None, False  # nothing complete would be left in the list
        body = text[start:sep]
        keep = frames[: k + 1]
        dropped = True
    body = body.rstrip()
    if body.endswith(","):
        body = body[:-1]
    closing = "".join("}" if f.bracket == "{" else "]" for f in reversed(keep))
    return rest, False, body + closing, dropped


_CUT_OFF = (
    "the JSON object is cut off at the end, inside a key, a string value or a number; "
    "it cannot be completed without guessing"
)


def _candidates(text: str) -> list[tuple[str, tuple[str, ...], str]]:
    """JSON-ish object texts to try, best first, each with the repairs that produced it and
    a known reason it cannot work (empty when it may)."""
    out: list[tuple[str, tuple[str, ...], str]] = []
    seen: set[str] = set()

    def add(candidate: str, repairs: tuple[str, ...], problem: str = "") -> None:
        if candidate not in seen:
            seen.add(candidate)
            out.append((candidate, repairs, problem))

    cleaned = _strip_thinking(text).strip()
    pre: tuple[str, ...] = ("removed <think> block",) if cleaned != text.strip() else ()
    if cleaned.startswith("{") and cleaned.endswith("}"):
        add(cleaned, pre)

    sources: list[tuple[str, tuple[str, ...]]] = []
    fences = list(_FENCE_RE.finditer(cleaned))
    # JSON-tagged fences first, then untagged ones, then any other fence.
    for rank in (0, 1, 2):
        for fence in fences:
            lang = fence.group(1).lower()
            fence_rank = 0 if lang in {"json", "json5", "jsonc"} else 1 if not lang else 2
            if fence_rank == rank:
                sources.append((fence.group(2), (*pre, "extracted from code fence")))
    sources.append((cleaned, pre))

    for source, repairs in sources:
        resume = 0
        for match in re.finditer(r"\{", source):
            start = match.start()
            if start < resume or len(out) >= 24:
                continue
            candidate, complete, closed, dropped = _scan_object(source, start)
            around = source[:start].strip() or source[start + len(candidate) :].strip()
            note = (*repairs, "extracted from surrounding prose") if around else repairs
            if complete:
                add(candidate, note)
            elif closed is not None:
                cut = ("dropped the cut-off last list item",) if dropped else ()
                add(closed, (*note, *cut, "closed truncated object"))
            else:
                add(candidate, note, _CUT_OFF)
            if complete:
                resume = start + len(candidate)  # objects nested in it are not answers
    # A bare JSON array (some small models answer a one-list record with just the list).
    for source, repairs in sources:
        body = source.strip()
        if body.startswith("["):
            candidate, complete, closed, dropped = _scan_object(body, 0)
            if complete:
                add(candidate, repairs)
            elif closed is not None:
                cut = ("dropped the cut-off last list item",) if dropped else ()
                add(closed, (*repairs, *cut, "closed truncated object"))
    return out


def _remove_trailing_commas(text: str) -> str:
    """Drop commas that directly precede a closing bracket, outside strings."""
    out: list[str] = []
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch == ",":
            rest = text[i + 1 :].lstrip()
            if rest[:1] in {"}", "]"}:
                continue
        out.append(ch)
    return "".join(out)


_VALID_ESCAPES = set('"\\/bfnrtu')


def _fix_invalid_escapes(text: str) -> str:
    """Double backslashes that do not start a valid JSON escape (``"\\d"`` in a regex)."""
    out: list[str] = []
    in_string = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string and ch == "\\":
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if nxt in _VALID_ESCAPES:
                out.append(ch + nxt)
                i += 2
                continue
            out.append("\\\\")
            i += 1
            continue
        if ch == '"':
            in_string = not in_string
        out.append(ch)
        i += 1
    return "".join(out)


def _json_words_to_python(text: str) -> str:
    """Turn JSON's ``true``/``false``/``null`` into Python names, outside strings."""
    out: list[str] = []
    quote = ""
    escaped = False
    i = 0
    words = {"true": "True", "false": "False", "null": "None"}
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "\"'":
            quote = ch
            out.append(ch)
            i += 1
            continue
        match = re.match(r"[A-Za-z_]+", text[i:])
        if match:
            word = match.group(0)
            out.append(words.get(word, word))
            i += len(word)
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _load(candidate: str) -> tuple[Any, tuple[str, ...]] | str:
    """Parse one candidate, applying text repairs in order. Returns the object and the
    repairs, or the last parse error as text."""
    try:
        return json.loads(candidate), ()
    except json.JSONDecodeError as exc:
        error = f"invalid JSON: {exc}"
    try:
        return json.loads(candidate, strict=False), ("allowed raw control characters",)
    except json.JSONDecodeError:
        pass
    repairs: list[str] = []
    text = candidate
    for name, fix in (
        ("fixed invalid escapes", _fix_invalid_escapes),
        ("removed trailing commas", _remove_trailing_commas),
    ):
        fixed = fix(text)
        if fixed != text:
            text = fixed
            repairs.append(name)
            try:
                return json.loads(text, strict=False), tuple(repairs)
            except json.JSONDecodeError:
                pass
    for source in (candidate, _json_words_to_python(candidate)):
        try:
            value = ast.literal_eval(source)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value, ("read as a Python literal",)
    return error


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
        unknown = [k for k in out if k not in fields and not _is_alias(model, k)]
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


def _is_alias(model: type[BaseModel], key: str) -> bool:
    return any(info.alias == key for info in model.model_fields.values())


def _field_keys(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


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
    unwrapped = _validate(inner, model)
    if isinstance(unwrapped, str):
        return None
    return unwrapped[0], (f"unwrapped the object under {key!r}", *unwrapped[1])


def _validate(obj: Any, model: type[T]) -> tuple[T, tuple[str, ...]] | str:
    """Validate strictly first, then after near-miss coercion. Returns the value and the
    repairs, or the validation error text."""
    if isinstance(obj, list):
        key = _sole_list_field(model)
        if key is None:
            return "a JSON array where an object was expected"
        wrapped = _validate({key: obj}, model)
        if isinstance(wrapped, str):
            return wrapped
        return wrapped[0], (f"wrapped a bare list as {key}", *wrapped[1])
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    keys = _field_keys(model)
    if obj and keys and not set(obj) & keys:
        # Records whose fields all have defaults would accept any object: demand overlap.
        unwrapped = _unwrap(obj, model)
        if unwrapped is not None:
            return unwrapped
        return f"none of the expected keys ({', '.join(sorted(keys))}) is present"
    try:
        return model.model_validate_json(json.dumps(obj, ensure_ascii=False), strict=True), ()
    except (ValidationError, TypeError, ValueError):
        pass
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


def parse_structured(text: str, model: type[T]) -> Parsed[T]:
    """Salvage a ``model`` from a model's reply.

    Tries, in order: the reply as it is; JSON in code fences (```json first); the first
    balanced object inside prose; a truncated object closed where only closing quotes and
    brackets are missing. Each is read as JSON, then with invalid escapes and trailing
    commas fixed, then as a Python literal (single quotes, ``True``/``None``). The result is
    validated strictly, then after near-miss fixes (a number in a string, one string where a
    list of strings is expected, unknown keys of a closed record), then laxly.

    Raises :class:`StructuredParseError` with the last error when nothing validates.
    """
    errors: list[str] = []
    for candidate, found, problem in _candidates(text):
        if problem:
            errors.append(problem)
            continue
        loaded = _load(candidate)
        if isinstance(loaded, str):
            errors.append(loaded)
            continue
        obj, text_repairs = loaded
        checked = _validate(obj, model)
        if isinstance(checked, str):
            errors.append(f"does not match {model.__name__}: {checked}")
            continue
        value, shape_repairs = checked
        repairs = (*found, *text_repairs, *shape_repairs)
        return Parsed(value=value, degraded=bool(repairs), repairs=repairs)
    if not errors:
        errors.append("no JSON object found in the reply")
    # The most informative error is a validation error, if any candidate parsed.
    detail = next(
        (e for e in errors if e.startswith("does not match")),
        next((e for e in errors if e == _CUT_OFF), errors[0]),
    )
    raise StructuredParseError(
        f"Could not read a {model.__name__} from the model's reply ({detail}). "
        "Retry with a larger model or a lower temperature, or inspect `.raw`.",
        errors=detail,
        raw=text,
    )


# ------------------------------------------------------------------------ ask_structured


def _schema_hint(schema: dict[str, Any]) -> str:
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 3000 else text[:3000] + "..."


def _structured_feedback(error: str, completion: Completion, schema: dict[str, Any]) -> str:
    error = error if len(error) <= _MAX_FEEDBACK_CHARS else error[:_MAX_FEEDBACK_CHARS] + "..."
    cut = ""
    if completion.finish_reason == "length":
        cut = "Your reply was cut off because it was too long; keep every value shorter. "
    return (
        f"{cut}Your reply could not be used: {error}\n"
        "Reply again with only one JSON object (no prose, no code fence) that matches this "
        f"JSON schema:\n{_schema_hint(schema)}"
    )


def _provider_id(provider: Provider) -> tuple[str, str]:
    model_id = getattr(provider, "model_id", "") or ""
    name, _, model = model_id.partition(":")
    return name, model


def _structured_step(completion: Completion, model: type[T]) -> Parsed[T] | StructuredParseError:
    try:
        return parse_structured(completion.text, model)
    except StructuredParseError as exc:
        return exc


def ask_structured(
    provider: Provider,
    messages: Sequence[Message],
    model: type[T],
    *,
    max_tokens: int = 1024,
    temperature: float = 0.0,
    retries: int = 2,
) -> StructuredReply[T]:
    """Ask for a ``model`` as JSON; salvage; on failure retry (at most ``retries`` times)
    with the error shown to the model. Raises :class:`MalformedReply` with the last reply
    in ``raw`` when every attempt fails."""
    schema = model.model_json_schema()
    completions: list[Completion] = []
    convo = list(messages)
    for attempt in range(retries + 1):
        completion = provider.complete(
            convo, max_tokens=max_tokens, temperature=temperature, schema=schema
        )
        completions.append(completion)
        step = _structured_step(completion, model)
        if isinstance(step, Parsed):
            return _structured_reply(step, completions, attempt)
        convo = [*messages, *_retry_messages(completion, step.errors, schema)]
    raise _give_up_structured(provider, model, completions, retries)


async def aask_structured(
    provider: Provider,
    messages: Sequence[Message],
    model: type[T],
    *,
    max_tokens: int = 1024,
    temperature: float = 0.0,
    retries: int = 2,
) -> StructuredReply[T]:
    """Async twin of :func:`ask_structured` (uses ``provider.acomplete``)."""
    schema = model.model_json_schema()
    completions: list[Completion] = []
    convo = list(messages)
    for attempt in range(retries + 1):
        completion = await provider.acomplete(
            convo, max_tokens=max_tokens, temperature=temperature, schema=schema
        )
        completions.append(completion)
        step = _structured_step(completion, model)
        if isinstance(step, Parsed):
            return _structured_reply(step, completions, attempt)
        convo = [*messages, *_retry_messages(completion, step.errors, schema)]
    raise _give_up_structured(provider, model, completions, retries)


def _retry_messages(completion: Completion, error: str, schema: dict[str, Any]) -> list[Message]:
    # Only the last failed reply is kept, so retries do not grow the prompt.
    return [
        Message(role="assistant", content=completion.text),
        Message(role="user", content=_structured_feedback(error, completion, schema)),
    ]


def _structured_reply(
    step: Parsed[T], completions: list[Completion], attempt: int
) -> StructuredReply[T]:
    value = step.value
    return StructuredReply(
        value=value,
        completions=tuple(completions),
        degraded=step.degraded or attempt > 0,
        repairs=step.repairs,
    )


def _give_up_structured(
    provider: Provider, model: type[BaseModel], completions: list[Completion], retries: int
) -> MalformedReply:
    name, model_name = _provider_id(provider)
    last = completions[-1].text if completions else ""
    error = _structured_step(completions[-1], model) if completions else None
    detail = error.errors if isinstance(error, StructuredParseError) else "no reply"
    return MalformedReply(
        f"The model gave no usable {model.__name__} in {retries + 1} attempts (last problem: "
        f"{detail}). Try a larger model, or check the prompt asks for this schema; the last "
        "reply is in `.raw`.",
        raw=last,
        provider=name,
        model=model_name,
        completions=completions,
    )


# ------------------------------------------------------------------------------- code

_CODE_LANGS = {"", "python", "py", "python3", "py3", "ipython", "pycon"}
_CODE_START_RE = re.compile(r"^(?:async\s+def|def|class|import|from|@)\b|^@", re.MULTILINE)


def _parses(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return True
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name) and node.target.id == name:
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            return True
    return False


def _substantial(tree: ast.Module) -> bool:
    """True when a module holds more than bare names or constants (``Sure`` parses too)."""
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)))
        for node in tree.body
    )


def _syntax_error(code: str) -> str:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, MemoryError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _unfenced(text: str) -> str | None:
    """Code in a reply without fences: the whole text, or from the first line that starts
    code, dropping trailing prose lines."""
    whole = text.strip()
    tree = _parses(whole)
    if tree is not None and _substantial(tree):
        return whole
    for n, match in enumerate(_CODE_START_RE.finditer(whole)):
        if n >= 5:
            break  # a line of prose may start with "from" or "import": try a few starts
        lines = whole[match.start() :].splitlines()
        for end in range(len(lines), 0, -1):
            code = "\n".join(lines[:end]).strip()
            tree = _parses(code)
            if tree is not None and _substantial(tree):
                return code
            if len(lines) - end >= 20:
                break
    return None


def _code_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE_RE.finditer(text)]


def extract_code(text: str, *, entry_point: str | None = None) -> str | None:
    """The best Python code in a reply, or None when no candidate parses.

    Fenced blocks tagged ``python`` (or untagged) are candidates; one that defines
    ``entry_point`` wins, then a ``python``-tagged one, then the later one (models put the
    corrected version last). A reply with no fences is accepted when it parses as code.
    Text is returned exactly as written (non-ASCII intact), without trailing whitespace.
    """
    text = _strip_thinking(text)
    best: tuple[tuple[int, int, int], str] | None = None
    blocks = _code_blocks(text)
    for position, (lang, body) in enumerate(blocks):
        if lang not in _CODE_LANGS:
            continue
        code = body.strip("\n").rstrip()
        if lang == "pycon" or code.startswith(">>>"):
            continue
        tree = _parses(code)
        if tree is None or not _substantial(tree):
            continue
        defines = int(entry_point is not None and _defines(tree, entry_point))
        score = (defines, int(lang != ""), position)
        if best is None or score > best[0]:
            best = (score, code)
    if best is not None:
        return best[1]
    if blocks:
        return None
    return _unfenced(text)


def _code_problem(completion: Completion, entry_point: str | None) -> tuple[str | None, str]:
    """``(code, "")`` when usable, else ``(None, feedback for the model)``."""
    code = extract_code(completion.text, entry_point=entry_point)
    if code is not None:
        tree = _parses(code)
        if entry_point is None or (tree is not None and _defines(tree, entry_point)):
            return code, ""
        return None, (
            f"The code does not define `{entry_point}` at the top level. Reply with the "
            f"complete code, defining `{entry_point}`, in one ```python block."
        )
    if completion.finish_reason == "length":
        return None, (
            "Your reply was cut off before the code was complete. Reply with the complete "
            "code only, in one ```python block, with no explanation before or after it."
        )
    blocks = [body for lang, body in _code_blocks(completion.text) if lang in _CODE_LANGS]
    detail = _syntax_error(blocks[-1]) if blocks else "there was no ```python block"
    return None, (
        f"Your code could not be used ({detail}). Reply with the complete, corrected code "
        "in one ```python block."
    )


def _was_fenced(text: str) -> bool:
    return any(lang in _CODE_LANGS for lang, _ in _code_blocks(_strip_thinking(text)))


def ask_code(
    provider: Provider,
    messages: Sequence[Message],
    *,
    entry_point: str | None = None,
    max_tokens: int = 2048,
    temperature: float = 0.0,
    retries: int = 2,
) -> CodeReply:
    """Ask for code in a fenced block; check it parses and defines ``entry_point``; retry
    (at most ``retries`` times) with a note saying what was wrong. Never returns code that
    does not parse: raises :class:`MalformedReply` after the last attempt."""
    completions: list[Completion] = []
    convo = list(messages)
    for attempt in range(retries + 1):
        completion = provider.complete(convo, max_tokens=max_tokens, temperature=temperature)
        completions.append(completion)
        code, feedback = _code_problem(completion, entry_point)
        if code is not None:
            return _code_reply(code, completion, completions, attempt)
        convo = [
            *messages,
            Message(role="assistant", content=completion.text),
            Message(role="user", content=feedback),
        ]
    raise _give_up_code(provider, completions, entry_point)


async def aask_code(
    provider: Provider,
    messages: Sequence[Message],
    *,
    entry_point: str | None = None,
    max_tokens: int = 2048,
    temperature: float = 0.0,
    retries: int = 2,
) -> CodeReply:
    """Async twin of :func:`ask_code` (uses ``provider.acomplete``)."""
    completions: list[Completion] = []
    convo = list(messages)
    for attempt in range(retries + 1):
        completion = await provider.acomplete(convo, max_tokens=max_tokens, temperature=temperature)
        completions.append(completion)
        code, feedback = _code_problem(completion, entry_point)
        if code is not None:
            return _code_reply(code, completion, completions, attempt)
        convo = [
            *messages,
            Message(role="assistant", content=completion.text),
            Message(role="user", content=feedback),
        ]
    raise _give_up_code(provider, completions, entry_point)


def _code_reply(
    code: str, completion: Completion, completions: list[Completion], attempt: int
) -> CodeReply:
    return CodeReply(
        code=code,
        completions=tuple(completions),
        degraded=attempt > 0 or not _was_fenced(completion.text),
        text=completion.text,
    )


def _give_up_code(
    provider: Provider, completions: list[Completion], entry_point: str | None
) -> MalformedReply:
    name, model_name = _provider_id(provider)
    _, feedback = _code_problem(completions[-1], entry_point)
    return MalformedReply(
        f"The model gave no usable code in {len(completions)} attempts (last problem: "
        f"{feedback.split('. Reply')[0]}). Try a larger model or a larger max_tokens; the "
        "last reply is in `.raw`.",
        raw=completions[-1].text,
        provider=name,
        model=model_name,
        completions=completions,
    )
