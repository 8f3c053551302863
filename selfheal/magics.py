"""IPython magics: ``%%selfheal``, ``%selfheal`` and ``%selfheal_config``.

Thin on purpose: they parse arguments, build a spec and call ``selfheal.heal``; everything
else (running, the view, approvals) lives in ``selfheal.notebook`` and ``selfheal.widgets``.

- ``%%selfheal [--name FN] [--max-iterations N] [--model M] [--autonomy A] [--tests]``: the
  cell body is the spec. With ``--tests``, every line after the spec that starts with
  ``assert`` (at column 0) begins one trusted test; indented lines below it continue it.
  The healed, verified function is defined in the notebook's namespace and its code is
  offered as the next cell.
- ``%selfheal [message]``: after a cell raised, heal the function the error came from (the
  cell plus your message are the intent; an example in the message, ``f(x) -> y``, is a
  trusted test, and without one the fix cannot be verified), show the change for approval
  (autonomy ``review_all`` by default) and, once verified, offer the fixed cell.
- ``%selfheal_config [key=value ...]``: show or set the defaults the magics use in this
  notebook (``model``, ``autonomy``, ``max_iterations``, ``on_headless`` and any other
  ``HealConfig`` field).
"""

from __future__ import annotations

import ast
import shlex
import sys
import traceback
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from selfheal.config import HealConfig
from selfheal.diffs import unified_diff
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import Provider
from selfheal.result import HealResult

__all__ = [
    "MagicDefaults",
    "defaults",
    "fixed_cell",
    "load_ipython_extension",
    "split_spec_and_tests",
    "unload_ipython_extension",
]

_USAGE = (
    "usage: %%selfheal [--name FN] [--max-iterations N] [--model M] "
    "[--autonomy full_auto|review_repairs|review_all] [--tests]"
)


@dataclass
class MagicDefaults:
    """What the magics use when a flag is not given (``%selfheal_config`` edits it)."""

    config: dict[str, Any] = field(default_factory=dict)
    """``HealConfig`` fields, e.g. ``{"autonomy": "review_repairs", "max_iterations": 3}``."""
    provider: Provider | None = None
    """A provider object (Python only, e.g. a scripted mock in tests); wins over ``model``."""
    executor: Executor | None = None
    """The sandbox to run candidates in (default: the shared kernel pool)."""
    last: Any = None
    """The last result or live handle a magic produced."""

    def heal_config(self, **overrides: Any) -> HealConfig:
        data = {**self.config, **{k: v for k, v in overrides.items() if v is not None}}
        return HealConfig.model_validate(data)


_DEFAULTS: dict[int, MagicDefaults] = {}


def defaults(shell: Any) -> MagicDefaults:
    """The magic defaults of ``shell`` (one set per running notebook)."""
    return _DEFAULTS.setdefault(id(shell), MagicDefaults())


# -- pure helpers ---------------------------------------------------------------------------


def split_spec_and_tests(body: str) -> tuple[str, list[str]]:
    """Split a ``%%selfheal --tests`` cell into the spec and its trusted tests.

    The spec is every line before the first line starting with ``assert`` at column 0; from
    there, each such line begins a test and indented (or blank-then-indented) lines continue
    it. Other unindented lines after the first test are an error."""
    lines = body.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.startswith("assert")), None)
    if first is None:
        return body.strip(), []
    tests: list[list[str]] = []
    for n, ln in enumerate(lines[first:], start=first + 1):
        if ln.startswith("assert"):
            tests.append([ln])
        elif not ln.strip():
            continue
        elif ln[0] in " \t":
            tests[-1].append(ln)
        else:
            raise ConfigError(
                f"Line {n} of the cell is after the tests but is not a test: {ln!r}. With "
                "--tests, write the spec first, then one `assert ...` per test (indent a "
                "continuation line)."
            )
    return "\n".join(lines[:first]).strip(), ["\n".join(t) for t in tests]


def fixed_cell(cell: str, function: str, new_code: str) -> str:
    """``cell`` with the top-level ``def function`` replaced by ``new_code`` (appended in
    front when the cell has no such definition)."""
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return new_code.rstrip() + "\n\n" + cell
    lines = cell.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            end = node.end_lineno or node.lineno
            out = [*lines[:start], *new_code.rstrip().splitlines(), *lines[end:]]
            return "\n".join(out)
    return new_code.rstrip() + "\n\n" + cell


def failing_function(tb: TracebackType | None, cell_files: set[str]) -> str | None:
    """The innermost function of the traceback defined in one of ``cell_files``."""
    name = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in cell_files and code.co_name != "<module>":
            name = code.co_name
        tb = tb.tb_next
    return name


def repair_spec(cell: str, function: str, error: str, message: str) -> str:
    """The spec ``%selfheal`` heals: the intent (cell + message) and what went wrong."""
    intent = message.strip() or "Keep what the cell intends; make it work without the error."
    indented = "\n".join("    " + ln for ln in cell.rstrip().splitlines())
    err = "\n".join("    " + ln for ln in error.rstrip().splitlines()[-12:])
    return (
        f"Fix the function {function} from this notebook cell. {intent}\n\n"
        f"The cell:\n\n{indented}\n\nRunning it raised:\n\n{err}\n"
    )


# -- the magics -----------------------------------------------------------------------------


def _parse_cell_args(line: str) -> dict[str, Any]:
    args: dict[str, Any] = {"tests": False}
    words = shlex.split(line)
    i = 0
    takes = {
        "--name": "name",
        "--max-iterations": "max_iterations",
        "--model": "model",
        "--autonomy": "autonomy",
    }
    while i < len(words):
        w = words[i]
        key, _, val = w.partition("=")
        if key == "--tests":
            args["tests"] = True
        elif key in takes:
            if not val:
                if i + 1 >= len(words):
                    raise ConfigError(f"{key} needs a value. {_USAGE}")
                i += 1
                val = words[i]
            args[takes[key]] = val
        else:
            raise ConfigError(f"Unknown option {w!r}. {_USAGE}")
        i += 1
    if "max_iterations" in args:
        try:
            args["max_iterations"] = int(args["max_iterations"])
        except ValueError:
            raise ConfigError(
                f"--max-iterations needs a number, got {args['max_iterations']!r}."
            ) from None
    return args


def _provider(d: MagicDefaults, model: str | None) -> Any:
    if model is not None:
        return model
    return d.provider if d.provider is not None else d.config.get("model")


def _finish(shell: Any, result: HealResult, *, cell: str | None = None) -> None:
    """Define the verified function in the user's namespace and offer the code as a cell."""
    if not result.code:
        print(f"selfheal: no code was produced (status {result.status}).", file=sys.stderr)
        return
    evidence = result.evidence
    if not result.verified:
        print(
            f"selfheal: the code is not verified (status {result.status}); it is offered as the "
            "next cell for you to review, and was not run.",
            file=sys.stderr,
        )
        if evidence.summary:
            print(f"selfheal: evidence: {evidence.summary}", file=sys.stderr)
        if result.status == "unverified" and not evidence.trusted_total:
            name = result.entry_point or "f"
            how = (
                f"an example to your message (%selfheal ... {name}(<args>) -> <expected>)"
                if cell is not None
                else f"an example to the spec ({name}(<args>) -> <expected>) or --tests"
            )
            print(f"selfheal: to verify it, add {how}.", file=sys.stderr)
    else:
        # The user asked for this function in their namespace; only verified code gets here.
        exec(compile(result.code, f"<selfheal {result.run_id}>", "exec"), shell.user_ns)
    name = result.entry_point or ""
    text = fixed_cell(cell, name, result.code) if cell is not None and name else result.code
    if cell is not None:
        print(unified_diff(cell, text, a="cell (before)", b="cell (fixed)"))
    shell.set_next_input(text.rstrip() + "\n", replace=False)


def _heal_and_finish(shell: Any, spec: str, *, cell: str | None = None, **kw: Any) -> Any:
    import selfheal

    d = defaults(shell)
    outcome = selfheal.heal(spec, executor=d.executor, **kw)
    d.last = outcome
    if isinstance(outcome, HealResult):
        _finish(shell, outcome, cell=cell)
    else:  # a LiveHeal: finish when the run ends (the code cell follows the next execution)
        outcome.add_done_callback(lambda r: _finish(shell, r, cell=cell))
    return None


def selfheal_cell_magic(shell: Any, line: str, cell: str) -> Any:
    args = _parse_cell_args(line)
    d = defaults(shell)
    spec, tests = split_spec_and_tests(cell) if args["tests"] else (cell.strip(), [])
    config = d.heal_config(
        max_iterations=args.get("max_iterations"),
        autonomy=args.get("autonomy"),
        model=args.get("model"),
    )
    return _heal_and_finish(
        shell,
        spec,
        provider=_provider(d, args.get("model")),
        config=config,
        entry_point=args.get("name"),
        tests=tests or None,
    )


def _cell_files(shell: Any) -> dict[str, int]:
    compiler = getattr(shell, "compile", None)
    mapping = getattr(compiler, "_filename_map", None)
    return dict(mapping) if isinstance(mapping, dict) else {}


def selfheal_line_magic(shell: Any, line: str) -> Any:
    etype = getattr(sys, "last_type", None)
    value = getattr(sys, "last_value", None)
    tb = getattr(sys, "last_traceback", None)
    if value is None or tb is None or etype is None:
        raise ConfigError(
            "No error to heal: run %selfheal right after a cell that raised an exception."
        )
    files = _cell_files(shell)
    function = failing_function(tb, set(files))
    history = shell.user_ns.get("In", [])
    cell = None
    frames = traceback.extract_tb(tb)
    for fr in reversed(frames):
        if fr.filename in files and 0 <= files[fr.filename] < len(history):
            cell = history[files[fr.filename]]
            break
    if cell is None:
        cell = history[-2] if len(history) >= 2 else ""
    if function is None:
        raise ConfigError(
            f"The error ({etype.__name__}) was not raised inside a function defined in a cell, "
            "so there is no function to heal. Wrap the failing code in a function (or use "
            "%%selfheal with a spec)."
        )
    error = "".join(traceback.format_exception(etype, value, tb))
    d = defaults(shell)
    config = d.heal_config(autonomy=d.config.get("autonomy", "review_all"))
    original = _function_source(cell, function)
    if original:
        print(f"selfheal: healing {function}() from the failing cell; original:\n{original}")
    return _heal_and_finish(
        shell,
        repair_spec(cell, function, error, line),
        cell=cell,
        provider=_provider(d, None),
        config=config,
        entry_point=function,
    )


def _function_source(cell: str, function: str) -> str:
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            return ast.get_source_segment(cell, node) or ""
    return ""


def selfheal_config_magic(shell: Any, line: str) -> Any:
    d = defaults(shell)
    words = shlex.split(line)
    if words == ["--reset"]:
        d.config.clear()
        d.provider = None
        d.executor = None
        words = []
    updates: dict[str, Any] = {}
    for w in words:
        key, sep, raw = w.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ConfigError(
                f"Expected key=value, got {w!r}. Example: %selfheal_config autonomy=review_repairs "
                "max_iterations=3 model=mock"
            )
        if key not in HealConfig.model_fields:
            known = ", ".join(sorted(HealConfig.model_fields))
            raise ConfigError(f"Unknown setting {key!r}. Known settings: {known}.")
        value: Any = raw
        low = raw.lower()
        if low in ("none", "null", ""):
            value = None
        elif low in ("true", "false"):
            value = low == "true"
        updates[key] = value
    if updates:
        trial = {**d.config, **{k: v for k, v in updates.items() if v is not None}}
        HealConfig.model_validate(trial)  # raises a clear pydantic error on a bad value
        for k, v in updates.items():
            if v is None:
                d.config.pop(k, None)
            else:
                d.config[k] = v
    cfg = d.heal_config()
    shown = {k: getattr(cfg, k) for k in ("model", "autonomy", "max_iterations", "on_headless")}
    shown.update({k: getattr(cfg, k) for k in d.config})
    body = "\n".join(f"  {k} = {v!r}" for k, v in shown.items())
    provider = f"\n  provider = {d.provider!r}" if d.provider is not None else ""
    print(f"selfheal defaults for this notebook:\n{body}{provider}")
    return None


# -- registration ---------------------------------------------------------------------------


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics on ``ipython``."""
    ipython.register_magic_function(
        lambda line, cell: selfheal_cell_magic(ipython, line, cell), "cell", "selfheal"
    )
    ipython.register_magic_function(
        lambda line: selfheal_line_magic(ipython, line), "line", "selfheal"
    )
    ipython.register_magic_function(
        lambda line: selfheal_config_magic(ipython, line), "line", "selfheal_config"
    )


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics (``%unload_ext selfheal``)."""
    magics = ipython.magics_manager.magics
    for kind, name in (("cell", "selfheal"), ("line", "selfheal"), ("line", "selfheal_config")):
        magics[kind].pop(name, None)
    _DEFAULTS.pop(id(ipython), None)
