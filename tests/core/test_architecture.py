"""The architecture holds: layers point down (import-linter's contracts in pyproject.toml, with
no import waived), the model layer never reaches the local engine above it nor the errors
anything, nothing outside a package imports its private modules, no import circle, long
modules are explained, the graph diagrams match the table, routes stay on their edges, plain
Python never imports the UI, and the pipeline has one concurrency model."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import scripted as s
import tomllib

from selfheal import aheal, heal
from selfheal.config import FIELD_GROUP, GROUPS
from selfheal.graph import table
from selfheal.graph.runner import Run
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.llm.mock import MockProvider
from selfheal.request import HealRequest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
MAX_LONG_MODULES = 3


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_contracts_are_kept() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        found = shutil.which("lint-imports")
        assert found, 'lint-imports is missing: pip install -e ".[dev]" (import-linter)'
        exe = Path(found)
    proc = subprocess.run(
        [str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def _imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for each module ``path`` imports, at the top, inside a function or under
    ``TYPE_CHECKING`` alike (import-linter leaves the last out); relative imports resolved;
    ``from pkg import name`` is ``pkg.name`` where that is a module, else ``pkg``."""
    package = list(path.relative_to(ROOT).with_suffix("").parts)[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for a in node.names:
                below = ROOT / Path(*module.split("."), a.name)
                is_module = below.is_dir() or below.with_suffix(".py").is_file()
                yield node.lineno, f"{module}.{a.name}" if is_module else module


def _modules(package: str) -> dict[str, Path]:
    folder = ROOT.joinpath(*package.split("."))
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted(folder.rglob("*.py"))
    }


def _private_imports() -> list[str]:
    """Imports of a private module (``_calls``) from outside the package that holds it."""
    offenders = []
    for folder in ("selfheal", "evaluation", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            importer = ".".join(rel.with_suffix("").parts)
            for line, name in _imported_modules(path):
                parts = name.split(".")
                private = [i for i, p in enumerate(parts) if p.startswith("_") and i]
                if parts[0] != "selfheal" or not private or parts[private[0]] == "__init__":
                    continue
                owner = ".".join(parts[: private[0]])
                if not importer.startswith(owner + "."):
                    offenders.append(f"{rel} {name}:{line}")
    return offenders


def test_nothing_outside_a_package_imports_its_private_modules() -> None:
    """A private module (``kernel_sandbox._canon``, ``roles._calls``) belongs to its package:
    evaluation/, benchmarks/, scripts/ and selfheal's other packages reach it through the
    package's public modules (the tests may test private ones)."""
    offenders = list(_private_imports())
    assert not offenders, offenders


def test_no_import_is_waived() -> None:
    """The contracts hold as written: none has an ``ignore_imports`` list."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    assert [c["name"] for c in contracts if c.get("ignore_imports")] == []


def test_the_model_layer_never_imports_the_local_engine_and_the_errors_nothing() -> None:
    """selfheal.local (llama.cpp) sits above selfheal.llm and registers itself with the
    router, so no module of llm imports it, not even lazily or for types; selfheal.errors,
    which every layer imports, imports nothing of selfheal's."""
    upward = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in _modules("selfheal.llm").values()
        for line, name in _imported_modules(path)
        if name == "selfheal.local" or name.startswith("selfheal.local.")
    ]
    assert upward == []
    errors = ROOT / "selfheal" / "errors.py"
    assert [name for _, name in _imported_modules(errors) if name.split(".")[0] == "selfheal"] == []


@pytest.mark.parametrize("package", ["selfheal", "evaluation", "benchmarks"])
def test_no_import_circle_counting_every_import(package: str) -> None:
    """Counting every import (lazy ones and those for types too, which import-linter leaves
    out), the modules of selfheal, of the harness and of the benchmarks form no circle."""
    modules = _modules(package)
    edges = {
        name: {m for _, m in _imported_modules(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def circle_from(name: str, path: list[str]) -> list[str]:
        seen[name] = 1
        for nxt in sorted(edges[name]):
            if seen.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [name, nxt]
            if nxt not in seen and (found := circle_from(nxt, [*path, nxt])):
                return found
        seen[name] = 2
        return []

    for start in sorted(modules):
        if start not in seen:
            assert circle_from(start, [start]) == []


def _long_modules() -> dict[str, int]:
    return {
        str(p.relative_to(ROOT)): n
        for folder in ("selfheal", "evaluation")
        for p in (ROOT / folder).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }


def test_long_modules_are_explained() -> None:
    """No module of selfheal/ or evaluation/ over 400 lines unless docs/architecture.md names
    it and says why."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Long modules", 1)[-1]
    explained = set(re.findall(r"`((?:selfheal|evaluation)/[\w/]+\.py)`", section))
    unexplained = {p: n for p, n in _long_modules().items() if p not in explained}
    assert not unexplained, f"over {MAX_LINES} lines, not in docs/architecture.md: {unexplained}"


def test_at_most_three_long_modules() -> None:
    long = _long_modules()
    assert len(long) <= MAX_LONG_MODULES, sorted(long)


def _is_config(node: ast.expr) -> bool:
    """A config by its spelling: ``config``, ``cfg``, ``x.config``, ``x._config``,
    ``HealConfig(...)`` (the names the package gives a ``HealConfig``)."""
    if isinstance(node, ast.Call):
        return _is_config(node.func) or (
            isinstance(node.func, ast.Name) and node.func.id == "HealConfig"
        )
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name in ("config", "_config", "cfg")


def _flat_config_reads(folder: Path) -> list[str]:
    """Reads of a setting by its flat name on a config: ``config.candidates``,
    ``getattr(cfg, name)`` (unless ``name`` is a group), and writes of one through
    ``config.model_copy(update={"candidates": ...})``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in FIELD_GROUP:
                bad = _is_config(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                args = node.args
                bad = node.func.id == "getattr" and len(args) >= 2 and _is_config(args[0])
                bad = bad and not (isinstance(args[1], ast.Constant) and args[1].value in GROUPS)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                update = [k.value for k in node.keywords if k.arg == "update"]
                keys = update[0].keys if update and isinstance(update[0], ast.Dict) else []
                flat = [k for k in keys if isinstance(k, ast.Constant) and k.value in FIELD_GROUP]
                bad = node.func.attr == "model_copy" and _is_config(node.func.value) and bool(flat)
            else:
                continue
            if bad:
                found.append(
                    f"{path.relative_to(folder.parent)}:{node.lineno}: {ast.unparse(node)}"
                )
    return found


def test_settings_are_read_by_their_group() -> None:
    """Inside selfheal/ a setting is read through its group (``config.generation.candidates``,
    typed, so mypy checks the read), never by its flat name, which ``HealConfig`` keeps for its
    callers' keywords and old code alone (docs/configuration.md)."""
    found = _flat_config_reads(ROOT / "selfheal")
    assert not found, f"{len(found)} flat config reads: {found}"


def test_the_pipeline_has_one_concurrency_model() -> None:
    """graph/, roles/ and kernel_sandbox/ are coroutines: no thread pool, no hand-rolled
    fan-out, no blocking twin of a model call (``docs/architecture.md``, "One concurrency
    model")."""
    banned = re.compile(r"ThreadPoolExecutor|\bconcurrently\(|\bblocking\(")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in ("graph", "roles", "kernel_sandbox")
        for path in sorted((ROOT / "selfheal" / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if banned.search(line)
    ]
    assert not found, found


def test_graph_diagrams_match_the_table() -> None:
    diagram = _script("graph_diagram")
    assert diagram.stale() == [], "run: python scripts/graph_diagram.py --write"
    for step in table.GRAPH.values():  # every edge of the table is drawn
        for nxt in step.next:
            if nxt != step.name:
                assert f"    {step.name} --> {nxt}\n" in diagram.mermaid()


def test_every_model_call_is_in_the_table(pool: KernelPool) -> None:
    """Each model call of a run where every role speaks was made by a node whose row names
    the call's role (``Step.calls``, which the diagram draws)."""
    mock = MockProvider(s.every_role())
    result = heal(s.SPEC, provider=mock, config=s.chain(), executor=pool)  # type: ignore[arg-type]
    assert result.status == "verified"
    made = {(e.node, e.detail.split()[0]) for e in result.timeline if e.kind == "llm"}
    declared = {(n, call.split(":")[0]) for n, row in table.GRAPH.items() for call in row.calls}
    assert made <= declared, made - declared
    # the calls inside other nodes' work are there: the spec-blind test writer and the oracle
    assert {("generate", "test_writer"), ("diagnose", "oracle")} <= made


def test_a_route_answering_outside_its_edges_is_refused() -> None:
    step = replace(table.GRAPH["execute"], route=lambda s: "finish")
    with pytest.raises(RuntimeError, match="not among its next nodes"):
        step.go(None)  # type: ignore[arg-type]


def test_plain_python_never_imports_the_notebook_ui() -> None:
    code = (
        "import sys, selfheal, selfheal.api as api\n"
        "assert api._here() is None\n"
        "ui = sorted(m for m in sys.modules if m.startswith(('selfheal.notebook', "
        "'selfheal.widgets', 'ipywidgets')))\n"
        "print(ui)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


class _Seen:
    """The (loop, thread name) pairs the nodes, the provider and the pool ran on."""

    def __init__(self) -> None:
        self.nodes: set[tuple[int, str]] = set()
        self.provider: set[tuple[int, str]] = set()
        self.pool: set[tuple[int, str]] = set()

    @staticmethod
    def here() -> tuple[int, str]:
        return id(asyncio.get_running_loop()), threading.current_thread().name

    def all(self) -> set[tuple[int, str]]:
        return self.nodes | self.provider | self.pool


class _SpyingMock(MockProvider):
    """The scripted model, noting where each answer is made."""

    def __init__(self, seen: _Seen) -> None:
        super().__init__(s.every_role())
        self._seen = seen

    async def _answer(self, request: Any, text: str) -> Any:
        self._seen.provider.add(self._seen.here())
        return await super()._answer(request, text)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> _Seen:
    spy = _Seen()
    real = SandboxKernel.next_event

    def next_event(self: SandboxKernel, *args: Any) -> Any:
        spy.pool.add(spy.here())
        return real(self, *args)

    monkeypatch.setattr(SandboxKernel, "next_event", next_event)
    return spy


def _heal_twice(seen: _Seen, pool: KernelPool) -> list[str]:
    def on_event(_event: object) -> None:
        seen.nodes.add(seen.here())  # (a sink is called by the node that records the event)

    return [
        heal(
            s.SPEC,
            provider=_SpyingMock(seen),
            config=s.chain(),
            executor=pool,  # type: ignore[arg-type]
            on_event=on_event,
        ).status
        for _ in range(2)
    ]


def test_a_heal_runs_on_one_loop_and_the_next_reuses_the_warm_kernel(seen: _Seen) -> None:
    """From plain Python: the nodes, the model and the pool of two heals in a row all run on
    the one process loop, in its thread; the second heal is served by the kernel the first
    one warmed."""
    with KernelPool(size=1) as pool:
        assert _heal_twice(seen, pool) == ["verified", "verified"]
        assert pool.kernels_started == 1
    assert seen.nodes and seen.provider and seen.pool
    assert len(seen.all()) == 1, seen.all()  # one loop, one thread
    ((_, thread),) = seen.all()
    assert thread == "selfheal-loop", seen.all()


def test_a_heal_inside_a_running_loop_uses_the_same_one_loop(seen: _Seen) -> None:
    """As in a notebook cell, where a loop already runs in the caller's thread: the blocking
    ``heal`` and the awaited ``aheal`` both run on the process loop, never the caller's, and a
    warm kernel serves the heals that follow."""

    async def cell() -> tuple[int, list[str], str]:
        with KernelPool(size=1) as pool:
            statuses = _heal_twice(seen, pool)
            result = await aheal(
                s.SPEC,
                provider=_SpyingMock(seen),
                config=s.chain(),
                executor=pool,  # type: ignore[arg-type]
            )
            assert pool.kernels_started == 1
        return id(asyncio.get_running_loop()), statuses, result.status

    mine, statuses, last = asyncio.run(cell())
    assert statuses == ["verified", "verified"] and last == "verified"
    assert len(seen.all()) == 1, seen.all()  # one loop, one thread: the process loop's
    ((loop, thread),) = seen.all()
    assert thread == "selfheal-loop" and loop != mine, seen.all()


def test_the_loop_is_entered_only_at_the_edge() -> None:
    """No hop from one loop to another inside the package: no ``run_coroutine_threadsafe``,
    and only ``selfheal/_sync.py`` makes an event loop or enters one from another thread."""
    hop = re.compile(r"run_coroutine_threadsafe")
    maker = re.compile(r"new_event_loop\(|\bEntry\(|asyncio\.run\(")
    hops, makers = [], set()
    for path in sorted((ROOT / "selfheal").rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(ROOT))
        hops += [f"{rel}:{n}" for n, line in enumerate(text.splitlines(), 1) if hop.search(line)]
        if maker.search(text):
            makers.add(rel)
    assert hops == [], hops
    assert makers == {"selfheal/_sync.py"}, makers


def test_start_up_goes_one_way(pool: KernelPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the request to the first node: the spec is parsed once (when the request is made),
    the run's services come from one call into ``graph.build``, which makes one router and
    settles the config once, and the config the request recorded is the first state's,
    unrewritten, when there is nothing to settle (a provider object, a fixed population)."""
    import selfheal.graph.build as build
    import selfheal.graph.runner as runner
    import selfheal.spec as spec_module

    calls: dict[str, int] = {}

    def counted(module: ModuleType, name: str) -> None:
        real = getattr(module, name)

        def count(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, count)

    counted(spec_module, "parse_spec")
    counted(runner, "new_run")  # (the runner's one entry into graph.build)
    for name in ("make_router", "settled_config", "services", "make_context"):
        counted(build, name)
    request = HealRequest(
        s.SPEC, provider=MockProvider(s.every_role()), config=s.chain(), executor=pool
    )
    assert calls == {"parse_spec": 1}
    run = Run.start(request)
    assert run.state.spec is request.parsed and run.state.config is request.config
    result = run.run()
    assert result.status == "verified"
    assert calls == {
        "parse_spec": 1,
        "new_run": 1,
        "make_router": 1,
        "settled_config": 1,
        "services": 1,
    }
