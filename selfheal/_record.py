"""The base of every record: frozen, keyword-only, no unknown fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A frozen, keyword-only pydantic model. Update with ``model_copy(update=...)``."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
