"""Model strings (:data:`VALID_FORMS`), automatic resolution (``auto``: docs/llm.md, "Choosing a
model"; never the mock) and per-role routing; the ``local`` backend registers itself here
(:func:`use_local_engine`), so this module never imports it."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any, Literal, Protocol, get_args

import httpx

from selfheal._record import Record
from selfheal.errors import LOCAL_MODEL_INSTALL, ConfigError
from selfheal.llm.base import Provider

ProviderName = Literal["mock", "anthropic", "ollama", "hf", "openai", "local"]
"""The backends a model string can name."""

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
"""Used for ``anthropic`` without a model (override with ``$SELFHEAL_ANTHROPIC_MODEL``)."""

DEFAULT_OLLAMA_MODEL = "qwen2.5-coder:7b"
"""Used for ``ollama`` without a model, and named in setup hints."""

OLLAMA_PROBE_TIMEOUT = 0.5
"""Seconds the automatic resolution waits for an Ollama server to answer."""

_CODER_PREFERENCE = ("qwen2.5-coder", "qwen3-coder", "deepseek-coder", "codellama", "coder")

VALID_FORMS = (
    "auto, mock, mock:<script.yaml>, anthropic, anthropic:<model> (e.g. "
    f"anthropic:{DEFAULT_ANTHROPIC_MODEL}), ollama, ollama:<model> (e.g. "
    f"ollama:{DEFAULT_OLLAMA_MODEL}), hf:<org/name or directory> (e.g. "
    "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct), openai:<model> (an OpenAI-compatible server at "
    "OPENAI_BASE_URL), local, local:<path/to/model.gguf>"
)


_DEFAULTS = {"mock": "demo", "ollama": DEFAULT_OLLAMA_MODEL}
"""The model of a backend named without one (the others: empty, the backend's default)."""

_NEEDS_MODEL = {
    "hf": "hf:<org/name> (e.g. hf:Qwen/Qwen2.5-Coder-1.5B-Instruct) or hf:<local directory>",
    "openai": "openai:<model name as the server knows it> (e.g. openai:qwen2.5-coder-1.5b); "
    "the server is OPENAI_BASE_URL",
}
"""The backends that need a model, and the forms it takes."""


class ModelSpec(Record):
    """A parsed model string."""

    provider: ProviderName
    """Which backend."""
    model: str = ""
    """The backend's model name or path; empty means the backend's default."""

    @property
    def model_string(self) -> str:
        """The canonical model string, e.g. ``ollama:qwen2.5-coder:7b`` or ``local``."""
        return f"{self.provider}:{self.model}" if self.model else self.provider


def parse_model_string(text: str) -> ModelSpec | None:
    """Parse a model string. Returns None for ``auto`` (or an empty string); raises
    :class:`ConfigError` listing the valid forms for anything else it does not know."""
    value = text.strip()
    if value.lower() in {"", "auto"}:
        return None
    name, sep, model = value.partition(":")
    name = name.strip().lower()
    model = model.strip()
    if name not in get_args(ProviderName):
        raise ConfigError(
            f"Unknown model string {text!r}: {name!r} is not a backend. Valid forms: {VALID_FORMS}."
        )
    if sep and not model:
        raise ConfigError(
            f"Model string {text!r} ends with ':' but names no model. Valid forms: {VALID_FORMS}."
        )
    if name in _NEEDS_MODEL and not model:
        raise ConfigError(f"The model string {name!r} needs a model: {_NEEDS_MODEL[name]}.")
    return ModelSpec.model_validate({"provider": name, "model": model or _DEFAULTS.get(name, "")})


def ollama_base_url(env: Mapping[str, str] | None = None) -> str:
    """The Ollama server URL from ``$OLLAMA_HOST`` (as the ollama CLI reads it), else
    ``http://127.0.0.1:11434``."""
    env = os.environ if env is None else env
    raw = (env.get("OLLAMA_HOST") or "").strip()
    if not raw:
        return "http://127.0.0.1:11434"
    scheme = "http"
    if "://" in raw:
        scheme, raw = raw.split("://", 1)
    raw = raw.rstrip("/")
    host, port = raw, "11434"
    match = re.fullmatch(r"(\[[^\]]+\]|[^:]*)(?::(\d+))?", raw)
    if match:
        host = match.group(1) or "127.0.0.1"
        port = match.group(2) or ("443" if scheme == "https" else "11434")
    if host in {"0.0.0.0", "[::]"}:
        host = "127.0.0.1"
    return f"{scheme}://{host}:{port}"


def probe_ollama(base_url: str, *, timeout: float = OLLAMA_PROBE_TIMEOUT) -> list[str] | None:
    """The model names an Ollama server has, or None when it does not answer in time."""
    try:
        response = httpx.get(f"{base_url}/api/tags", timeout=timeout)
        response.raise_for_status()
        data: Any = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    models = data.get("models", []) if isinstance(data, dict) else []
    return [str(m.get("name") or m.get("model")) for m in models if isinstance(m, dict)]


def _pick_ollama_model(names: list[str]) -> str | None:
    usable = [n for n in names if "embed" not in n.lower()]
    if DEFAULT_OLLAMA_MODEL in usable:
        return DEFAULT_OLLAMA_MODEL
    for preferred in _CODER_PREFERENCE:
        for name in usable:
            if preferred in name.lower():
                return name
    return usable[0] if usable else None


class LocalEngine(Protocol):
    """What the ``local`` backend offers this router (:mod:`selfheal.local` registers it)."""

    def installed(self, env: Mapping[str, str]) -> tuple[str | None, str]:
        """The local model ``auto`` may use (its path, or ``""`` for a server at
        ``$SELFHEAL_LOCAL_URL``), and when there is none, why."""

    def provider(self, model_path: str, env: Mapping[str, str]) -> Provider:
        """The ``local`` provider for a model file (``""``: the installed model)."""


_LOCAL: list[LocalEngine] = []
"""The registered engine (``import selfheal`` imports :mod:`selfheal.local`, which does it)."""


def use_local_engine(engine: LocalEngine) -> None:
    """Register the ``local`` backend."""
    _LOCAL[:] = [engine]


def resolve_model_string(spec: str | None = None, *, env: Mapping[str, str] | None = None) -> str:
    """Decide which model a string means, without loading anything.

    An explicit string is checked and returned in canonical form; ``auto``/None follows
    the resolution order of docs/llm.md (it may probe an Ollama server briefly)."""
    env = os.environ if env is None else env
    parsed = parse_model_string(spec or "") or parse_model_string(env.get("SELFHEAL_MODEL", ""))
    if parsed is not None and parsed.provider == "anthropic" and not parsed.model:
        return f"anthropic:{_anthropic_model(env)}"
    if parsed is not None:
        return parsed.model_string
    if env.get("ANTHROPIC_API_KEY", "").strip():
        return f"anthropic:{_anthropic_model(env)}"

    base_url = ollama_base_url(env)
    names = probe_ollama(base_url)
    ollama_note = f"no Ollama server answered at {base_url}"
    if names is not None:
        chosen = env.get("SELFHEAL_OLLAMA_MODEL") or _pick_ollama_model(names)
        if chosen:
            return f"ollama:{chosen}"
        ollama_note = f"the Ollama server at {base_url} has no models"

    local, local_note = _LOCAL[0].installed(env)
    if local is not None:
        return f"local:{local}" if local else "local"

    raise ConfigError(
        "No language model is configured, and none was found automatically "
        f"(ANTHROPIC_API_KEY is not set; {ollama_note}; {local_note}). "
        "Fix it one of three ways: (1) set ANTHROPIC_API_KEY to use Anthropic's API; "
        f"(2) start `ollama serve` and run `ollama pull {DEFAULT_OLLAMA_MODEL}`; "
        f"(3) install the local model: {LOCAL_MODEL_INSTALL}. Or pass a model string "
        f"explicitly ({VALID_FORMS})."
    )


def _anthropic_model(env: Mapping[str, str]) -> str:
    return env.get("SELFHEAL_ANTHROPIC_MODEL") or DEFAULT_ANTHROPIC_MODEL


def build_provider(model_string: str, *, env: Mapping[str, str] | None = None) -> Provider:
    """Construct the provider a (non-auto) model string names, behind its model's gate when
    limits are set for it (:mod:`selfheal.llm.limits`). Optional SDKs are imported here, so a
    missing one raises :class:`MissingDependency` naming the extra."""
    from selfheal.llm.limits import apply_limits

    env = os.environ if env is None else env
    return apply_limits(_build(model_string, env), env=env)


def _build(model_string: str, env: Mapping[str, str]) -> Provider:
    spec = parse_model_string(model_string)
    if spec is None:
        raise ConfigError("build_provider needs an explicit model string; resolve 'auto' first.")
    if spec.provider == "mock":
        from selfheal.llm.mock import MockProvider

        return MockProvider.demo() if spec.model == "demo" else MockProvider.from_string(spec.model)
    if spec.provider == "anthropic":
        from selfheal.llm.anthropic import AnthropicProvider

        return AnthropicProvider(
            model=spec.model or _anthropic_model(env),
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
        )
    if spec.provider == "ollama":
        from selfheal.llm.ollama import OllamaProvider

        return OllamaProvider(model=spec.model, host=ollama_base_url(env))
    if spec.provider == "hf":
        from selfheal.llm.hf import HFProvider

        return HFProvider(spec.model)
    if spec.provider == "openai":
        from selfheal.llm.openai_compat import OpenAICompatible

        return OpenAICompatible(
            model=spec.model,
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key=env.get("OPENAI_API_KEY") or None,
        )
    return _LOCAL[0].provider(spec.model, env)


def resolve_provider(
    spec: str | Provider | None = None, *, env: Mapping[str, str] | None = None
) -> Provider:
    """A ready provider: the one given, or the one a model string (or ``auto``) names."""
    if spec is not None and not isinstance(spec, str):
        return spec
    return build_provider(resolve_model_string(spec, env=env), env=env)


_NOT_ROLES = frozenset({"PATH", "DIR", "URL", "SHA256", "LIMITS"})
"""``SELFHEAL_MODEL_*`` variables that configure something else, not a role."""


class Router:
    """Which provider serves which role: ``per_role[role]``, then ``$SELFHEAL_MODEL_<ROLE>``, then
    ``default``; providers cached by model string (docs/llm.md, "Choosing a model")."""

    def __init__(
        self,
        default: str | Provider | None = None,
        per_role: Mapping[str, str | Provider] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._default = default
        self._per_role = dict(per_role or {})
        self._env = dict(os.environ if env is None else env)
        self._lock = threading.RLock()
        self._cache: dict[str, Provider] = {}
        self._resolved: dict[str, str] = {}
        self._roles_seen: list[str] = []

    def _choice(self, role: str) -> str | Provider | None:
        if role in self._per_role:
            return self._per_role[role]
        from_env = self._env.get(
            "SELFHEAL_MODEL_" + re.sub(r"[^A-Za-z0-9]", "_", role).upper(), ""
        ).strip()
        if from_env:
            return from_env
        return self._default

    def model_string(self, role: str) -> str:
        """The canonical model string a role uses (resolving ``auto`` once, without
        loading a model), or the ``model_id`` of a provider given directly."""
        choice = self._choice(role)
        if choice is not None and not isinstance(choice, str):
            return choice.model_id
        key = (choice or "auto").strip()
        with self._lock:
            if key not in self._resolved:
                self._resolved[key] = resolve_model_string(key, env=self._env)
            return self._resolved[key]

    def for_role(self, role: str) -> Provider:
        """The provider for ``role`` (built on first use, then shared)."""
        with self._lock:
            if role not in self._roles_seen:
                self._roles_seen.append(role)
            choice = self._choice(role)
            if choice is not None and not isinstance(choice, str):
                return choice
            model_string = self.model_string(role)
            if model_string not in self._cache:
                self._cache[model_string] = build_provider(model_string, env=self._env)
            return self._cache[model_string]

    @property
    def default(self) -> Provider:
        """The provider of roles with no specific choice."""
        return self.for_role("default")

    def describe(self) -> dict[str, str]:
        """Role → model id, for the roles configured or used so far (and ``default``)."""
        roles = ["default", *self._per_role]
        prefix = "SELFHEAL_MODEL_"
        for name, value in self._env.items():
            suffix = name[len(prefix) :]
            if name.startswith(prefix) and suffix and suffix not in _NOT_ROLES and value.strip():
                roles.append(suffix.lower())
        out: dict[str, str] = {}
        for role in dict.fromkeys([*roles, *self._roles_seen]):
            with self._lock:
                model_string = self.model_string(role)
                built = self._cache.get(model_string)
            out[role] = built.model_id if built is not None else model_string
        return out
