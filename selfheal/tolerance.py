"""The tolerance a spec states for its float values: "to 2 decimals", "within 1e-6",
"approximately" (or ``≈``: the precision the value is written with). An example whose
expected value is a float is then checked with ``math.isclose(..., abs_tol=...)``."""

from __future__ import annotations

import ast
import re
from decimal import Decimal, InvalidOperation

from selfheal._parse import parse_or_none

_WITHIN_RE = re.compile(
    r"(?:\b(?:within|tolerance(?:\s+of)?)|±|\+/-)\s*"
    r"(\d*\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(?!\s*(?!of\b)[A-Za-z])",
    re.IGNORECASE,
)
"""An absolute tolerance: "within 1e-6", "tolerance of 0.01", "± 0.5" (a number with a point
or an exponent, not followed by a unit: "within 5 days" is not a tolerance)."""
_DECIMALS_RE = re.compile(r"\b(?:to|within|at)\s+(\d{1,2})\s+(?:decimal|digit)", re.IGNORECASE)
_APPROX_RE = re.compile(r"\b(?:approximately|approx\.?|roughly)|≈", re.IGNORECASE)

Tolerance = float | str | None
"""A stated tolerance: an absolute one, ``"written"`` (the precision each value is written
with), or None (none stated: values compare exactly)."""


def stated_tolerance(text: str) -> Tolerance:
    """The tolerance ``text`` states for float values, or None."""
    m = _WITHIN_RE.search(text)
    if m:
        try:
            return float(m.group(1))
        except ValueError:
            pass
    m = _DECIMALS_RE.search(text)
    if m:
        return float(Decimal("0.5").scaleb(-int(m.group(1))))
    return "written" if _APPROX_RE.search(text) else None


def _is_float(expected: str) -> bool:
    tree = parse_or_none(expected.strip(), "eval")
    node = tree.body if tree else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is float


def abs_tol_for(expected: str, tolerance: Tolerance) -> float | None:
    """The absolute tolerance for an example's ``expected`` value: None unless it is a float
    and a tolerance is stated; for ``"written"``, half a unit of its last written digit
    (``3.14`` -> ``0.005``)."""
    if tolerance is None or not _is_float(expected):
        return None
    if isinstance(tolerance, float):
        return tolerance
    try:
        exponent = Decimal(expected.strip().lstrip("+-")).as_tuple().exponent
    except InvalidOperation:
        return None
    return float(Decimal("0.5").scaleb(int(exponent)))
