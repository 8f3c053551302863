"""Language models: the Provider protocol, asking for code and records, model strings and
routing.

Importing this package needs only the base dependencies. The provider classes
(``OpenAICompatible``, the local default's provider, and ``AnthropicProvider``,
``OllamaProvider``, ``HFProvider``, which need an optional SDK) are imported on first
attribute access; the optional ones raise :class:`~selfheal.errors.MissingDependency` when
built without their SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selfheal.llm.aio import blocking, run_sync
from selfheal.llm.ask import (
    CodeReply,
    StructuredReply,
    aask_code,
    aask_structured,
    ask_code,
    ask_structured,
)
from selfheal.llm.base import (
    Completion,
    CompletionRequest,
    Message,
    Provider,
    ProviderBase,
    TokenCallback,
    ToolCall,
    ToolSpec,
    WrapperProvider,
    acomplete_many,
    asend,
    complete_many,
    send,
    supports_tools,
)
from selfheal.llm.parsing import Parsed, StructuredParseError, extract_code, parse_structured
from selfheal.llm.retry import RetryPolicy
from selfheal.llm.router import (
    ModelSpec,
    Router,
    build_provider,
    parse_model_string,
    resolve_model_string,
    resolve_provider,
)
from selfheal.llm.tokens import count_tokens, trim_history, trim_text, trim_traceback

if TYPE_CHECKING:
    from selfheal.llm.anthropic import AnthropicProvider
    from selfheal.llm.hf import HFProvider
    from selfheal.llm.ollama import OllamaProvider
    from selfheal.llm.openai_compat import OpenAICompatible

__all__ = [
    "AnthropicProvider",
    "CodeReply",
    "Completion",
    "CompletionRequest",
    "HFProvider",
    "Message",
    "ModelSpec",
    "OllamaProvider",
    "OpenAICompatible",
    "Parsed",
    "Provider",
    "ProviderBase",
    "RetryPolicy",
    "Router",
    "StructuredParseError",
    "StructuredReply",
    "TokenCallback",
    "ToolCall",
    "ToolSpec",
    "WrapperProvider",
    "aask_code",
    "aask_structured",
    "acomplete_many",
    "ask_code",
    "ask_structured",
    "asend",
    "blocking",
    "build_provider",
    "complete_many",
    "count_tokens",
    "extract_code",
    "parse_model_string",
    "parse_structured",
    "resolve_model_string",
    "resolve_provider",
    "run_sync",
    "send",
    "supports_tools",
    "trim_history",
    "trim_text",
    "trim_traceback",
]

_LAZY = {
    "AnthropicProvider": "selfheal.llm.anthropic",
    "HFProvider": "selfheal.llm.hf",
    "OllamaProvider": "selfheal.llm.ollama",
    "OpenAICompatible": "selfheal.llm.openai_compat",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'selfheal.llm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
