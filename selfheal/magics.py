"""IPython magics: ``%%selfheal``, ``%selfheal`` and ``%selfheal_config`` (docs/notebook.md). Thin
on purpose: each builds a spec and calls ``selfheal.heal``; ``%selfheal`` takes the last error
from a custom exception handler and the failing function's cell from ``linecache``."""

from __future__ import annotations

import argparse
import ast
import linecache
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import ArgDecorator, argument, magic_arguments, parse_argstring

from selfheal._parse import ast_parse
from selfheal.api import heal
from selfheal.approval import ask_with_input
from selfheal.cells import (
    definition,
    failing_function,
    fixed_cell,
    repair_spec,
    split_spec_and_tests,
)
from selfheal.config import HealConfig
from selfheal.config.options import add_config_options, config_values, setting
from selfheal.diffs import unified_diff
from selfheal.errors import ConfigError
from selfheal.failcall import evidence_line, evidence_tests, failing_call, stated_return
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import Provider
from selfheal.notebook import notebook_mode
from selfheal.result import HealResult


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
    """The last result a magic produced."""

    def heal_config(self, **overrides: Any) -> HealConfig:
        data = {**self.config, **{k: v for k, v in overrides.items() if v is not None}}
        return HealConfig.model_validate(data)

    def provider_for(self, model: str | None = None) -> Any:
        """``model`` if given, else the provider object, else the configured model string."""
        if model is not None:
            return model
        return self.provider if self.provider is not None else self.config.get("model")

    def reset(self) -> None:
        self.config.clear()
        self.provider = None
        self.executor = None


@dataclass(frozen=True)
class Failure:
    """The last exception a cell raised, recorded by the magics' exception handler."""

    etype: type[BaseException]
    value: BaseException
    tb: TracebackType | None


def defaults(shell: Any) -> MagicDefaults:
    """The magic defaults of ``shell`` (one set per running notebook, held by its magics)."""
    magics = shell.magics_manager.registry.get(SelfhealMagics.__name__)
    if magics is None:
        raise ConfigError("The selfheal magics are not loaded here: run `%load_ext selfheal`.")
    found: MagicDefaults = magics.defaults
    return found


class config_arguments(ArgDecorator):
    """Every ``HealConfig`` setting as an option of a magic, derived as the CLI's are."""

    def add_to_parser(self, parser: argparse.ArgumentParser, group: Any) -> None:
        add_config_options(parser)


def _parse(magic: Any, line: str) -> argparse.Namespace:
    """``line`` parsed by ``magic``'s ``magic_arguments``; a mistake is a ``ConfigError``
    that shows the usage."""
    usage = magic.parser.format_usage().strip()
    try:
        args, unknown = parse_argstring(magic, line, partial=True)
    except UsageError as exc:
        raise ConfigError(f"{exc}. {usage}") from None
    if unknown:
        raise ConfigError(f"Unknown option {unknown[0]!r}. {usage}")
    return args


@magics_class
class SelfhealMagics(Magics):
    """``%%selfheal``, ``%selfheal`` and ``%selfheal_config``, with this notebook's defaults."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.defaults = MagicDefaults()
        self.failure: Failure | None = None
        self.defined: list[str] = []
        """The code the magics defined in the notebook (a verified fix), each kept in
        ``linecache`` like a cell: a traceback through it shows its lines, and ``%selfheal``
        heals it when it raises."""
        self.previous_handler: tuple[tuple[type[BaseException], ...], Any] = (
            shell.custom_exceptions,
            shell.CustomTB,
        )

    def _cells(self) -> list[str]:
        """The cells a failing function may come from: the notebook's, then the magics' code."""
        return [*self._shell.user_ns.get("In", []), *self.defined]

    @property
    def _shell(self) -> InteractiveShell:
        assert self.shell is not None, "the magics are registered on a shell"
        return self.shell

    def record_failure(
        self,
        shell: Any,
        etype: type[BaseException],
        value: BaseException,
        tb: TracebackType | None,
        tb_offset: int | None = None,
    ) -> None:
        """The exception handler (``set_custom_exc``): remember the error, then show it as
        before (through the handler that was installed first, if any)."""
        self.failure = Failure(etype=etype, value=value, tb=tb)
        kinds, show = self.previous_handler
        if kinds and issubclass(etype, kinds):
            show(etype, value, tb, tb_offset=tb_offset)
        else:
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)

    @magic_arguments()
    @argument("--name", help="the function's name (default: read from the spec)")
    @argument("--model", help="the model for every role, e.g. local, mock, ollama:MODEL")
    @argument(
        "--tests",
        nargs="?",
        const=True,
        metavar="FILE",
        help="alone: the cell's `assert` lines or pytest functions (after the spec) are tests; "
        "with FILE: that pytest file's tests",
    )
    @config_arguments()
    @cell_magic("selfheal")  # type: ignore[arg-type]
    def selfheal_cell(self, line: str, cell: str) -> None:
        """The cell is a spec: heal it; a verified function is defined in the notebook."""
        args = _parse(SelfhealMagics.selfheal_cell, line)
        d = self.defaults
        tests: list[str | Path]
        if args.tests is True:
            spec, texts = split_spec_and_tests(cell)
            tests = list(texts)
        else:
            spec, tests = cell.strip(), ([Path(args.tests)] if args.tests else [])
        config = d.heal_config(**config_values(args), model=args.model)
        self._heal(
            spec,
            provider=d.provider_for(args.model),
            config=config,
            entry_point=args.name,
            tests=tests,
        )

    @line_magic("selfheal")  # type: ignore[arg-type]
    def selfheal_line(self, line: str) -> None:
        """Heal the function the last error came from; ``line`` is your message (the intent,
        and an example ``f(x) -> y`` to verify the fix)."""
        failure = self.failure
        if failure is None:
            raise ConfigError(
                "No error to heal: run %selfheal right after a cell that raised an exception."
            )
        cells = self._cells()
        found = failing_function(failure.tb, cells)
        if found is None:
            raise ConfigError(
                f"The error ({failure.etype.__name__}) was not raised inside a function defined "
                "in a cell, so there is no function to heal. Wrap the failing code in a function "
                "(or use %%selfheal with a spec)."
            )
        function, cell = found
        error = "".join(traceback.format_exception(failure.etype, failure.value, failure.tb))
        d = self.defaults
        node = definition(cell, function)
        original = ast.get_source_segment(cell, node) if node is not None else ""
        imports = [
            ast.get_source_segment(cell, n) or ""
            for n in ast_parse(cell).body
            if isinstance(n, ast.Import | ast.ImportFrom)
        ]
        if original:
            print(f"selfheal: healing {function}() from the failing cell; original:\n{original}")
        # the call that raised is evidence: it must not raise again, and a value the docstring
        # or your message states for it is expected of it (selfheal.failcall)
        call = failing_call(failure.tb, failure.etype, function, cells)
        docstring = (ast.get_docstring(node) if node is not None else None) or ""
        stated = stated_return(docstring, line, call.exc_type) if call.call else None
        print(evidence_line(call, stated))
        self._heal(
            repair_spec(cell, function, error, line),
            cell=cell,
            code="\n".join([*imports, original]) if original else None,
            provider=d.provider_for(),
            config=d.heal_config(),
            entry_point=function,
            tests=list(evidence_tests(call, stated)),
            probes=[call.call] if call.call else [],
        )

    @magic_arguments()
    @argument("--reset", action="store_true", help="forget every setting")
    @argument("settings", nargs="*", type=setting, help="key=value: any HealConfig setting")
    @line_magic("selfheal_config")  # type: ignore[arg-type]
    def selfheal_config(self, line: str) -> None:
        """Show or set the defaults the magics use in this notebook."""
        args = _parse(SelfhealMagics.selfheal_config, line)
        d = self.defaults
        if args.reset:
            d.reset()
        updates = dict(args.settings)
        if updates:
            trial = {**d.config, **{k: v for k, v in updates.items() if v is not None}}
            HealConfig.model_validate(trial)  # a bad value is a ConfigError naming it
            for k, v in updates.items():
                if v is None:
                    d.config.pop(k, None)
                else:
                    d.config[k] = v
        flat = d.heal_config().flat()
        shown = {
            k: flat[k] for k in ("model", "autonomy", "max_iterations", "on_headless", "memory")
        }
        shown.update({k: flat[k] for k in d.config})
        body = "\n".join(f"  {k} = {v!r}" for k, v in shown.items())
        provider = f"\n  provider = {d.provider!r}" if d.provider is not None else ""
        print(f"selfheal defaults for this notebook:\n{body}{provider}")

    def _heal(self, spec: str, *, cell: str | None = None, **options: Any) -> None:
        # Both magics run to the end inside their own cell, so the offered cell rides on this
        # cell's reply and lands directly below it (a run that ended later would offer it with
        # the reply of whatever cell ran next, and not at all if that one raised); a review
        # asks here, with input() (docs/notebook.md, "Where the fixed cell appears"). Outside
        # a kernel, %selfheal asks on the terminal and %%selfheal returns the paused run.
        mode = notebook_mode()
        asks = mode == "live" or (mode == "none" and cell is not None)
        if options["config"].approval.autonomy != "full_auto" and asks:
            options["approver"] = ask_with_input
        self.defaults.last = result = heal(spec, executor=self.defaults.executor, **options)
        self._finish(result, cell=cell)

    def _finish(self, result: HealResult, *, cell: str | None = None) -> None:
        """Define the verified function in the user's namespace and offer the code as a cell."""
        shell = self._shell
        if not result.code:
            print(f"selfheal: no code was produced (status {result.status}).", file=sys.stderr)
            return
        evidence = result.evidence
        if not result.verified:
            print(
                f"selfheal: the code is not verified (status {result.status}); it is offered as "
                "the next cell for you to review, and was not run.",
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
            # Its lines go to linecache, as IPython's cells do, for tracebacks and %selfheal.
            filename = f"<selfheal {result.run_id}>"
            lines = result.code.splitlines(keepends=True)
            linecache.cache[filename] = (len(result.code), None, lines, filename)
            exec(compile(result.code, filename, "exec"), shell.user_ns)
            self.defined.append(result.code)
        name = result.entry_point or ""
        text = fixed_cell(cell, name, result.code) if cell is not None and name else result.code
        if cell is not None:
            print(unified_diff(cell, text, a="cell (before)", b="cell (fixed)"))
        shell.set_next_input(text.rstrip() + "\n", replace=False)


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics on ``ipython`` and the handler that records a cell's error."""
    magics = SelfhealMagics(ipython)
    ipython.register_magics(magics)
    ipython.set_custom_exc((Exception,), magics.record_failure)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics and the exception handler (``%unload_ext selfheal``)."""
    table = ipython.magics_manager.magics
    for kind, name in (("cell", "selfheal"), ("line", "selfheal"), ("line", "selfheal_config")):
        table[kind].pop(name, None)
    magics = ipython.magics_manager.registry.pop(SelfhealMagics.__name__, None)
    if magics is not None:  # the exception handler that was there before
        ipython.custom_exceptions, ipython.CustomTB = magics.previous_handler
