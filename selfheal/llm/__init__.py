"""Language models: the Provider protocol, structured output, model strings and routing.

Importing this package needs only the base dependencies; provider classes that need an
optional SDK are imported on first use.
"""

from __future__ import annotations

from selfheal.llm.base import Completion, Message, Provider, TokenCallback
from selfheal.llm.router import (
    ModelSpec,
    Router,
    build_provider,
    parse_model_string,
    resolve_model_string,
    resolve_provider,
)
from selfheal.llm.structured import (
    CodeReply,
    Parsed,
    StructuredParseError,
    StructuredReply,
    aask_code,
    aask_structured,
    ask_code,
    ask_structured,
    extract_code,
    parse_structured,
)

__all__ = [
    "CodeReply",
    "Completion",
    "Message",
    "ModelSpec",
    "Parsed",
    "Provider",
    "Router",
    "StructuredParseError",
    "StructuredReply",
    "TokenCallback",
    "aask_code",
    "aask_structured",
    "ask_code",
    "ask_structured",
    "build_provider",
    "extract_code",
    "parse_model_string",
    "parse_structured",
    "resolve_model_string",
    "resolve_provider",
]
