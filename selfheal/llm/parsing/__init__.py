"""Reading what small models send: JSON records (:mod:`.json_salvage`) and code in fenced
blocks (:mod:`.code_extract`, the package's one fence parser)."""

from __future__ import annotations

from selfheal.llm.parsing.code_extract import (
    code_like,
    extract_code,
    fences,
    lenient_block,
    prose,
    strip_thinking,
)
from selfheal.llm.parsing.json_salvage import Parsed, StructuredParseError, parse_structured
from selfheal.llm.parsing.shapes import fold_choice

__all__ = [
    "Parsed",
    "StructuredParseError",
    "code_like",
    "extract_code",
    "fences",
    "fold_choice",
    "lenient_block",
    "parse_structured",
    "prose",
    "strip_thinking",
]
