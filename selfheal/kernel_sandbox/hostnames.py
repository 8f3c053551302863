"""What the host side of a test may name (``hosteval.py``): modules, builtins, and the
attributes it refuses (those that could write files, evaluate strings or reach memory)."""

from __future__ import annotations

HOST_MODULES: dict[str, str] = {
    "math": "math",
    "cmath": "cmath",
    "datetime": "datetime",
    "decimal": "decimal",
    "fractions": "fractions",
    "collections": "collections",
    "statistics": "statistics",
    "string": "string",
    "zoneinfo": "zoneinfo",
    "numpy": "numpy",
    "np": "numpy",
    "pandas": "pandas",
    "pd": "pandas",
}
"""Module names a test may use on the host without importing them (and may import), with
the module each names. ``np`` and ``pd`` are the usual aliases."""

SAFE_BUILTINS = frozenset(
    [
        "abs",
        "callable",
        "hash",
        "filter",
        "map",
        "next",
        "iter",
        "type",
        "all",
        "any",
        "bin",
        "bool",
        "bytes",
        "chr",
        "complex",
        "dict",
        "divmod",
        "enumerate",
        "float",
        "frozenset",
        "hex",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "oct",
        "ord",
        "pow",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "slice",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
        "True",
        "False",
        "None",
        "ValueError",
        "TypeError",
        "KeyError",
        "IndexError",
        "ZeroDivisionError",
        "ArithmeticError",
        "Exception",
    ]
)
"""Builtins the host side may call or name."""

DENIED_ATTRS = frozenset(
    [
        "format",
        "format_map",
        "tofile",
        "dump",
        "dumps",
        "save",
        "savetxt",
        "load",
        "loads",
        "query",
        "eval",
        "pipe",
        "plot",
        "hist",
        "boxplot",
        "style",
        "ctypes",
        "setflags",
        "resize",
        "seterr",
        "set_printoptions",
        "testing_only",
    ]
)
ALLOWED_TO = frozenset(
    [
        "to_list",
        "to_dict",
        "to_numpy",
        "to_records",
        "to_string",
        "to_frame",
        "to_series",
        "to_period",
        "to_timestamp",
        "to_pydatetime",
        "to_datetime64",
        "to_timedelta64",
        "to_flat_index",
        "to_pytimedelta",
    ]
)
DENIED_MODULE_ATTRS = frozenset(
    [
        "lib",
        "ctypeslib",
        "f2py",
        "distutils",
        "random",
        "fromfile",
        "fromregex",
        "memmap",
        "genfromtxt",
        "loadtxt",
        "DataSource",
        "read_csv",
        "read_json",
        "read_pickle",
        "read_parquet",
        "read_excel",
        "read_sql",
        "read_html",
        "read_table",
        "read_fwf",
        "read_hdf",
        "read_feather",
        "read_orc",
        "read_sas",
        "read_spss",
        "read_stata",
        "read_xml",
        "read_clipboard",
        "options",
        "set_option",
        "reset_option",
        "eval",
        "io",
        "api",
        "plotting",
        "set_eng_float_format",
        "show_versions",
    ]
)


def refused_method(attr: str) -> str | None:
    """Why the host never calls a value's method ``attr``: it reads or writes files
    (``to_csv``, ``tofile``, ``dump``, ``read_...``, ``save``), or evaluates text
    (``DataFrame.eval``/``query``, ``str.format``'s ``{0.__class__}``); None when it may."""
    if attr in ("eval", "query", "format", "format_map"):
        return "evaluates text"
    io = attr.startswith(("read", "write", "save", "load", "dump"))
    if io or attr == "tofile" or (attr.startswith("to_") and attr not in ALLOWED_TO):
        return "reads or writes files"
    return None
