"""What a candidate's source defines, read from its AST: its entry point, a formatting-blind
form for comparing versions, and the imports and helpers it still needs (the spec prelude's,
and the standard-library modules it uses without importing them)."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
from collections.abc import Iterator
from functools import cache
from types import ModuleType

from selfheal._parse import parse_or_none

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
"""The AST nodes of a function definition."""
DEFS = (*FUNCS, ast.ClassDef)
"""The AST nodes that define a name at the top of a module: a function or a class."""

_STDLIB = (
    "math",
    "string",
    "re",
    "datetime",
    "collections",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "statistics",
    "decimal",
    "fractions",
    "operator",
    "typing",
    "random",
    "json",
    "unicodedata",
    "calendar",
    "zoneinfo",
    "textwrap",
)
"""The standard-library modules a missing import is added for (each safe to import here), in
the order that settles a name several of them have."""

_CONVENTIONS = {
    "np": ("numpy", "import numpy as np"),
    "pd": ("pandas", "import pandas as pd"),
    "relativedelta": ("dateutil", "from dateutil.relativedelta import relativedelta"),
    "pytz": ("pytz", "import pytz"),
}
"""Names a notebook uses for a library by convention, with the module that must be installed
for the import to be added, and the import. (A reply completed from ``def name(`` has no
line above it for imports: single answers failed with a NameError on 6 of the notebook suite's
36 tasks, for ``np``, ``pd``, ``unicodedata``, ``relativedelta`` and ``pytz``.)"""


@cache
def _importable() -> dict[str, str]:
    """Public name -> the module of ``_STDLIB`` it comes from: the first that defines it
    (``collections.Counter``, not ``typing.Counter``), else the first that has it."""
    found: dict[str, str] = {}
    for defining in (True, False):
        for name in _STDLIB:
            module = importlib.import_module(name)
            for attr in dir(module):
                value = getattr(module, attr)
                if (
                    len(attr) < 2
                    or attr[0] == "_"
                    or attr in found
                    or isinstance(value, ModuleType)
                ):
                    continue  # re.X, math.e, collections.abc: no import for these
                if not defining or getattr(value, "__module__", None) == name:
                    found[attr] = name
    return found


def _bound(tree: ast.AST) -> Iterator[str]:
    """Every name the code binds anywhere (scopes ignored: a name bound anywhere is left alone)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            yield n.id
        elif isinstance(n, DEFS):
            yield n.name
        elif isinstance(n, ast.arg):
            yield n.arg
        elif isinstance(n, ast.alias):
            yield (n.asname or n.name).partition(".")[0]
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            yield n.name
        elif isinstance(n, ast.Global | ast.Nonlocal):
            yield from n.names


@cache
def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def missing_imports(code: str) -> list[str]:
    """The imports of standard-library names (and of the data stack's conventional ones:
    ``np``, ``pd``) ``code`` uses but never imports or binds (a reply
    completed from ``def name(`` has no line above the function for them: ``string.punctuation``
    then fails with a NameError when called). A module used by name is imported whole when it
    has every attribute the code reads from it, else as the class of the same name (``from
    datetime import datetime`` for ``datetime.now()``); a function or class by name is imported
    from the one module that defines it (``from collections import Counter``)."""
    tree = parse_or_none(code)
    if tree is None:
        return []
    loads: set[str] = set()
    reads: dict[str, set[str]] = {}  # name -> the attributes read from it (``math.floor``)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            reads.setdefault(n.value.id, set()).add(n.attr)
    lines = []
    for name in sorted(loads - {*_bound(tree), *dir(builtins)}):
        if name in _STDLIB:
            read = reads.get(name, set())
            module = importlib.import_module(name)
            inner = getattr(module, name, None)
            if all(hasattr(module, a) for a in read):
                lines.append(f"import {name}")
            elif inner is not None and all(hasattr(inner, a) for a in read):
                lines.append(f"from {name} import {name}")
        elif (module_name := _importable().get(name)) is not None:
            lines.append(f"from {module_name} import {name}")
        elif name in _CONVENTIONS and _installed(_CONVENTIONS[name][0]):
            lines.append(_CONVENTIONS[name][1])
    return lines


def with_prelude(code: str, prelude: str) -> str:
    """Prepend what the spec's prelude defines and the code lacks: its imports
    (``from typing import List``) and its helper functions (HumanEval/32's ``poly``); then the
    standard-library imports the code still lacks (:func:`missing_imports`)."""
    code = _with_spec_prelude(code, prelude)
    imports = missing_imports(code)
    return "\n".join([*imports, code]) if imports else code


def _with_spec_prelude(code: str, prelude: str) -> str:
    if not prelude:
        return code
    tree, blocks = parse_or_none(code), parse_or_none(prelude)
    defined = {n.name for n in tree.body if isinstance(n, DEFS)} if tree else set()
    missing: list[str] = []
    for node in blocks.body if blocks else []:
        src = ast.get_source_segment(prelude, node) or ""
        if isinstance(node, DEFS):
            if node.name not in defined:
                missing.append(src)
        elif src.strip() and src.strip() not in code:
            missing.append(src)
    return "\n".join([*missing, code]) if missing else code


def entry_point_of(code: str) -> str | None:
    """The last top-level function the code defines (the usual shape of a reply)."""
    tree = parse_or_none(code)
    names = [n.name for n in tree.body if isinstance(n, FUNCS)] if tree else []
    return names[-1] if names else None
