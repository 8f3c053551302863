"""Tests as the loop sees them: a model's block of tests into test cases, results into
prompt lines and scores, and the sandbox limits a run asks for."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from selfheal._parse import normalized, parse_or_none
from selfheal.kernel_sandbox.types import ExecutionReport, Limits, TestResult
from selfheal.state import HealState, TestCase
from selfheal.state.cases import Origin

_WHY_RE = re.compile(r"^\s*#\s*(?:why\s*:)?\s*(.*)$", re.IGNORECASE)


def _uses(node: ast.AST, name: str | None) -> bool:
    if name is None:
        return True
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _checks_something(node: ast.stmt) -> bool:
    """An assert, or a try/raise block that can fail; not a bare call or assignment."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Try | ast.With | ast.If | ast.For):
        return any(isinstance(n, ast.Assert | ast.Raise) for n in ast.walk(node))
    return False


def parse_test_block(
    code: str, entry_point: str | None
) -> tuple[str | None, list[tuple[str, str]]]:
    """Split a block into ``(stub signature, [(test source, why), ...])``.

    A ``def`` whose body is ``...``/``pass`` is the stub the test writer proposes (its
    signature names the function); imports are prepended to every test; each other
    top-level statement that checks something and calls ``entry_point`` is one test."""
    tree = parse_or_none(code)
    if tree is None:
        return None, []
    lines = code.splitlines()
    imports: list[str] = []
    setup = _Setup()
    signature: str | None = None
    tests: list[tuple[str, str]] = []
    prev_end = 0
    for node in tree.body:
        start = node.lineno - 1
        if hasattr(node, "decorator_list") and node.decorator_list:
            start = node.decorator_list[0].lineno - 1
        comments = [
            m.group(1).strip()
            for line in lines[prev_end:start]
            if (m := _WHY_RE.match(line)) and line.strip().startswith("#")
        ]
        prev_end = node.end_lineno or node.lineno
        src = ast.get_source_segment(code, node) or ast.unparse(node)
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(src)
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            stubby = all(
                isinstance(b, ast.Pass)
                or (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
                for b in body
            )
            if stubby and signature is None:
                signature = _def_line(node)
            continue
        needed = setup.needed(node)
        uses = _uses(node, entry_point) or any(_uses(n, entry_point) for n in needed)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Compare) and uses:
            src = f"assert {src}"  # small models often drop the `assert` keyword
        elif not (_checks_something(node) and uses):
            setup.add(node, src)
            continue
        full = "\n".join([*imports, *(setup.sources[n] for n in needed), src])
        tests.append((full, " ".join(c for c in comments if c)))
    return signature, tests


class _Setup:
    """The block's statements that prepare a test's data (``df = pd.DataFrame(...)``,
    ``df['b'] = 2``, ``xs.append(3)``, ``result = f(df)``): a test carries those its names
    need, in the block's order, as it carries the imports."""

    def __init__(self) -> None:
        self.sources: dict[ast.stmt, str] = {}
        self._by_name: dict[str, list[ast.stmt]] = {}

    def add(self, node: ast.stmt, src: str) -> None:
        """A statement that changes the names it assigns (a bare expression: the names whose
        attributes it uses)."""
        if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr):
            return
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        changed = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Expr):  # `xs.append(3)`, `df.sort_values(..., inplace=True)`
            changed |= {
                n.value.id
                for n in ast.walk(node)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            }
        self.sources[node] = src
        for name in changed:
            chain = self._by_name.setdefault(name, [])
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets
            ):
                chain.clear()  # assigned anew: what came before no longer matters
            chain.append(node)

    def needed(self, node: ast.AST) -> list[ast.stmt]:
        """The statements the names ``node`` reads need, and theirs, in the block's order."""
        order = {n: i for i, n in enumerate(self.sources)}
        seen: set[ast.stmt] = set()
        todo = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
        while todo:
            for stmt in self._by_name.get(todo.pop(), []):
                if stmt not in seen:
                    seen.add(stmt)
                    todo += [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)]
        return sorted(seen, key=order.__getitem__)


def _def_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    import copy

    stub = copy.copy(node)
    stub.body = [ast.Expr(ast.Constant(...))]
    stub.decorator_list = []
    text = ast.unparse(ast.fix_missing_locations(stub)).splitlines()[0]
    return text.replace("async def", "def")


def add_tests(
    state: HealState,
    sources: Iterable[tuple[str, str]],
    *,
    origin: Origin,
    prefix: str,
    trusted: bool,
    limit: int,
) -> tuple[TestCase, ...]:
    """New test cases for ``sources`` that are not already in ``state.tests`` (at most ``limit``)."""
    seen = {normalized(t.source) for t in state.tests}
    n = sum(1 for t in state.tests if t.origin == origin)
    out: list[TestCase] = []
    for src, why in sources:
        if len(out) >= limit:
            break
        key = normalized(src)
        if key in seen:
            continue
        seen.add(key)
        n += 1
        out.append(
            TestCase(
                id=f"{prefix}{n}",
                origin=origin,
                code=src,
                rationale=why,
                trusted=trusted,
                added_at=state.iteration,
            )
        )
    return tuple(out)


def limits_for(state: HealState) -> Limits:
    """The sandbox limits a run's config asks for."""
    return Limits(**state.config.limits.model_dump(exclude={"sandbox"}))


def failure_lines(state: HealState, report: ExecutionReport) -> list[str]:
    """One line per failing active test (at most 8), for prompts: id, trust, source, outcome."""
    from selfheal.llm.tokens import trim_text

    lines = []
    for r in report.results:
        if r.outcome == "passed":
            continue
        t = state.test(r.test_id)
        if t is None or t.quarantined:
            continue
        trust = "trusted" if t.trusted else "model-written"
        lines.append(f"[{t.id}, {trust}] `{t.source.strip()}` -> {describe(r)}")
        if len(lines) >= 8:
            break
    return [trim_text(line, 220, keep="both") for line in lines]


def describe(r: TestResult) -> str:
    """A short human description of one test result."""
    if r.outcome == "passed":
        return "passed"
    if r.outcome == "timeout":
        return "timed out (infinite loop or too slow)"
    if r.outcome == "crashed":
        return "the interpreter crashed"
    msg = r.message.strip().splitlines()[0] if r.message.strip() else ""
    kind = r.exc_type or r.outcome
    return f"{kind}: {msg}" if msg else kind


def attempt_score(state: HealState, report: ExecutionReport | None) -> tuple[int, int, int]:
    """Rank attempts: loads, trusted tests passed, untrusted active tests passed."""
    if report is None:
        return (0, -1, -1)
    if not report.load.ok:
        return (0, 0, 0)
    trusted = untrusted = 0
    for r in report.results:
        t = state.test(r.test_id)
        if t is None or t.quarantined or r.outcome != "passed":
            continue
        if t.trusted:
            trusted += 1
        else:
            untrusted += 1
    return (1, trusted, untrusted)


def all_active_pass(state: HealState, report: ExecutionReport | None) -> bool:
    if report is None or not report.load.ok:
        return False
    outcomes = {r.test_id: r.outcome for r in report.results}
    return all(outcomes.get(t.id) == "passed" for t in state.active_tests)


def sources(tests: Sequence[TestCase]) -> list[str]:
    return [t.source.strip() for t in tests]
