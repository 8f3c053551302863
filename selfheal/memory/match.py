"""How specs are compared: their keywords, a normal form, a similarity (what counts as related,
on a scale every spec shares) and a full-text query for the store's FTS5 ranking."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z_][a-z0-9_]*|\d+(?:\.\d+)?")

STOPWORDS = frozenset(
    """
    a an and are as at be by for from has have if in into is it its of on or that the their
    them then there these this to was were which while will with without write python function
    functions return returns returned given takes take should must may can use using value
    values example examples e g eg ie def none true false yourself one each
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
"""Words every spec uses; they say nothing about what a spec is about."""


def keywords(text: str) -> frozenset[str]:
    """The spec's words that say what it is about: lowercased identifiers and numbers, without
    :data:`STOPWORDS` and one-letter names."""
    words = _WORD.findall(text.lower())
    return frozenset(w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit()))


def spec_key(text: str) -> str:
    """The spec in a normal form (lowercased, whitespace collapsed): two runs of the same spec
    share it."""
    return " ".join(text.lower().split())


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' keyword sets, 0..1."""
    ka, kb = keywords(a), keywords(b)
    if not ka or not kb:
        return 0.0
    return len(ka & kb) / len(ka | kb)


def fts_query(text: str, limit: int = 128) -> str:
    """An FTS5 query matching any of the text's keywords (each quoted, so no keyword is read as
    query syntax); empty when the text has none."""
    words = sorted(keywords(text))[:limit]
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
