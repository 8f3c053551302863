"""The values an example may write without the candidate: what a spec's ``f(args) -> value``
may use on either side, defined once (the example reader and the host-side evaluator import it).

An example's arguments and expected value are Python expressions built from literals,
containers, comprehensions, arithmetic, subscripts, and calls of the constructors and functions
allowed below (``datetime.date(2024, 3, 5)``, ``Decimal('1.10')``, ``pd.DataFrame({...})``,
``np.array([...])``, ``sorted({3, 1})``), and methods of such values. Nothing else: no name the
candidate would define, no lambda, no attribute starting with ``_``, no comparison or condition
(a value, not a claim), so the value never depends on the code under test."""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Iterable

from selfheal._parse import parse_or_none
from selfheal.kernel_sandbox.hostnames import HOST_MODULES, refused_method

EXAMPLE_MODULES = (
    "datetime",
    "decimal",
    "fractions",
    "collections",
    "math",
    "zoneinfo",
    "np",
    "numpy",
    "pd",
    "pandas",
)
"""The modules (and usual aliases) of the host side's (``kernel_sandbox.hostnames``) that an
example's value may use."""


def _import_line(name: str) -> str:
    module = HOST_MODULES[name]
    return f"import {module}" if module == name else f"import {module} as {name}"


MODULES: dict[str, str] = {name: _import_line(name) for name in EXAMPLE_MODULES}
"""Module names (and the usual aliases) an expression may use as ``name.attribute``, with the
import line that defines each."""

_MATH = frozenset(n for n in dir(math) if not n.startswith("_"))
_NUMPY = frozenset(
    [
        "array",
        "asarray",
        "arange",
        "linspace",
        "zeros",
        "ones",
        "full",
        "eye",
        "identity",
        "nan",
        "inf",
        "pi",
        "e",
        "newaxis",
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool_",
        "complex64",
        "complex128",
        "str_",
        "datetime64",
        "timedelta64",
        "dtype",
        "round",
        "isnan",
        "concatenate",
        "stack",
        "array_equal",
        "allclose",
    ]
)
_PANDAS = frozenset(
    [
        "DataFrame",
        "Series",
        "Index",
        "MultiIndex",
        "RangeIndex",
        "DatetimeIndex",
        "Categorical",
        "CategoricalDtype",
        "Timestamp",
        "Timedelta",
        "Period",
        "Interval",
        "NaT",
        "NA",
        "date_range",
        "period_range",
        "timedelta_range",
        "to_datetime",
        "to_timedelta",
        "to_numeric",
        "isna",
        "notna",
        "concat",
        "Int64Dtype",
        "Float64Dtype",
        "StringDtype",
        "BooleanDtype",
        "array",
    ]
)
ATTRIBUTES: dict[str, frozenset[str]] = {
    "datetime": frozenset(
        ["date", "datetime", "time", "timedelta", "timezone", "MINYEAR", "MAXYEAR", "UTC"]
    ),
    "decimal": frozenset({"Decimal", "ROUND_HALF_UP", "ROUND_HALF_EVEN", "ROUND_DOWN"}),
    "fractions": frozenset({"Fraction"}),
    "collections": frozenset(
        ["Counter", "OrderedDict", "defaultdict", "deque", "namedtuple", "ChainMap"]
    ),
    "math": _MATH,
    "zoneinfo": frozenset({"ZoneInfo"}),
    "np": _NUMPY,
    "numpy": _NUMPY,
    "pd": _PANDAS,
    "pandas": _PANDAS,
}
"""What each module of ``MODULES`` lends an expression: constructors, constants and pure
functions (nothing that reads or writes files). Past it (``pd.DataFrame.from_dict``,
``datetime.date(2024, 1, 1).isoformat()``), any public attribute but a file writer."""

NAMES: dict[str, str] = {
    "Decimal": "from decimal import Decimal",
    "Fraction": "from fractions import Fraction",
    "Counter": "from collections import Counter",
    "OrderedDict": "from collections import OrderedDict",
    "defaultdict": "from collections import defaultdict",
    "deque": "from collections import deque",
    "ZoneInfo": "from zoneinfo import ZoneInfo",
    "date": "from datetime import date",
    "timedelta": "from datetime import timedelta",
    "timezone": "from datetime import timezone",
    "inf": "from math import inf",
    "nan": "from math import nan",
    "array": "from numpy import array",  # numpy's repr in a doctest: array([1, 2])
    "Timestamp": "from pandas import Timestamp",  # pandas' repr in a doctest
    "Timedelta": "from pandas import Timedelta",
}
"""Names an expression may use bare, with the import line that defines each. ``datetime``
called bare (``datetime(2024, 3, 5)``) is the class (``from datetime import datetime``);
written ``datetime.date(...)`` it is the module."""

BUILTINS = frozenset(
    [
        "set",
        "frozenset",
        "tuple",
        "list",
        "dict",
        "range",
        "float",
        "int",
        "str",
        "bytes",
        "complex",
        "bool",
        "abs",
        "round",
        "sorted",
        "len",
        "min",
        "max",
        "sum",
    ]
)
"""The builtins an expression may call."""

CONSTANTS = frozenset({"True", "False", "None"})
"""Names that are values."""

_VALUE_NODES = (
    ast.Expression,
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Dict,
    ast.Starred,
    ast.UnaryOp,
    ast.BinOp,
    ast.Call,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Name,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.keyword,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
)
"""The syntax a value may use."""

_WHAT = {
    ast.Lambda: "a lambda",
    ast.Compare: "a comparison",
    ast.BoolOp: "`and`/`or`",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "an assignment (`:=`)",
    ast.Await: "`await`",
    ast.Yield: "`yield`",
}


def expected_problem(expr_src: str, candidate_names: Iterable[str] = ()) -> str | None:
    """Why ``expr_src`` cannot be evaluated without the candidate, as a clause that follows
    the expression ("calls `foo`, which the candidate would define; write the value itself"),
    or None when it can (every name it uses is allowed: ``MODULES``, ``NAMES``, ``BUILTINS``,
    ``CONSTANTS``). ``candidate_names`` are the functions the spec asks for."""
    tree = parse_or_none(expr_src.strip(), "eval")
    if tree is None:
        return "is not a Python expression"
    asked = set(candidate_names)
    bound = {
        n.id
        for c in ast.walk(tree)
        if isinstance(c, ast.comprehension)
        for n in ast.walk(c.target)
        if isinstance(n, ast.Name)
    }
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    based = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    uses = {id(n) for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "datetime"}
    if uses & called and uses & based:
        return (
            "uses `datetime` both as the module (`datetime.date`) and as the class "
            "(`datetime(...)`); write `datetime.datetime(...)`"
        )
    for node in ast.walk(tree):
        if not isinstance(node, _VALUE_NODES):
            what = _WHAT.get(type(node), f"`{ast.unparse(node)[:40]}`")
            return f"uses {what}; an example's value is built from literals, containers and calls"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not written_together(node, expr_src.strip()):
            return f"has a space around the dot before `{node.attr}`: prose, not a value"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"uses the attribute `{node.attr}`; write the value itself"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = node.value.id
            if module in ATTRIBUTES and node.attr not in ATTRIBUTES[module]:
                return (
                    f"uses `{module}.{node.attr}`, which is not among the values an example "
                    f"may build ({module}: {', '.join(sorted(ATTRIBUTES[module])[:12])}, ...)"
                )
        if isinstance(node, ast.Attribute) and (refused := refused_method(node.attr)):
            return f"uses `{node.attr}`, which {refused}; write the value itself"
        if isinstance(node, ast.Call) and not isinstance(
            node.func, ast.Name | ast.Attribute | ast.Call
        ):
            return f"calls `{ast.unparse(node.func)[:40]}`, which is not a function"
        if isinstance(node, ast.Name):
            problem = _name_problem(node.id, id(node) in called, id(node) in based, asked, bound)
            if problem is not None:
                return problem
    return None


def written_together(node: ast.Attribute, src: str) -> bool:
    """Whether ``value.attr`` is written without a space around its dot (``1.5. Then`` is the
    end of a sentence, not the attribute ``Then`` of ``1.5``)."""
    value = node.value
    if node.end_lineno is None or value.end_lineno != node.end_lineno:
        return False
    line = src.splitlines()[node.end_lineno - 1].encode()
    end = node.end_col_offset or 0
    between = line[value.end_col_offset or 0 : end - len(node.attr.encode())].decode(
        errors="replace"
    )
    return between.replace(")", "") == "."


def _name_problem(
    name: str, called: bool, based: bool, asked: set[str], bound: set[str]
) -> str | None:
    """Why the name ``name`` (called, or the base of an attribute) cannot be used, or None."""
    if name in CONSTANTS or name in bound:
        return None
    if name in asked:
        verb = "calls" if called else "uses"
        return f"{verb} `{name}`, which the candidate would define; write the value itself"
    if name in MODULES and (based or (name == "datetime" and called)):
        return None
    if name in NAMES or (name in BUILTINS and called):
        return None
    if name in BUILTINS:
        return f"names the function `{name}` without calling it; write the value itself"
    if called and name in dir(builtins):
        return f"calls `{name}`, which an example may not call (only {', '.join(sorted(BUILTINS))})"
    if called:
        return f"calls `{name}`, which the candidate would define; write the value itself"
    return (
        f"uses the name `{name}`, which an example cannot refer to; write the value itself "
        f"(a string needs quotes: '{name}')"
    )


def import_lines(*exprs: str, extra: Iterable[str] = ()) -> list[str]:
    """The import lines that ``exprs`` (checked by ``expected_problem``) need, and ``extra``
    ones, in a stable order, without repeats: ``import datetime``, ``from decimal import
    Decimal``, ..."""
    lines: list[str] = list(extra)
    for src in exprs:
        tree = parse_or_none(src.strip(), "eval")
        if tree is None:
            continue
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        based = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Name):
                continue
            if node.id == "datetime" and id(node) in called:
                lines.append("from datetime import datetime")
            elif node.id in MODULES and id(node) in based:
                lines.append(MODULES[node.id])
            elif node.id in NAMES:
                lines.append(NAMES[node.id])
    return sorted(dict.fromkeys(lines), key=lambda line: (line.startswith("from"), line))
