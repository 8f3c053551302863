"""The details that made a run look unfinished (issue 44, item 6): progress lines cut
mid-word, candidate ids that differ between the repair line and the choice when your code is
``c0``, ``--out`` writing unverified code without saying so, and ``doctor`` suggesting ``make
install`` in a pip install."""

from __future__ import annotations

import io
import re
from pathlib import Path

from cli_harness import run_cli

from selfheal import heal
from selfheal.cli.heal import Progress
from selfheal.llm.mock import MockProvider
from selfheal.local.probe import build_kind
from selfheal.result import HealResult
from selfheal.state import Event
from selfheal.texts import cut

ADD_SPEC = "Write add(a, b) that returns the sum. Example: add(2, 3) -> 5"
BAD = "def add(a, b):\n    return a - b\n"


def block(code: str) -> str:
    return f"```python\n{code}```"


def test_a_long_progress_line_is_cut_at_a_word_with_an_ellipsis() -> None:
    words = " ".join(f"word{i:03d}" for i in range(60))  # 479 characters
    stream = io.StringIO()
    Progress(stream)(Event(time=0.0, node="select", kind="end", detail=words))
    line = stream.getvalue().rstrip("\n")
    assert len(line) <= 220 and line.endswith("…")
    last = line[:-1].split()[-1]
    assert re.fullmatch(r"word\d{3}", last), line  # a whole word, not `wor`
    assert cut("short enough", 20) == "short enough"
    assert cut("a b " + "x" * 50, 20) == "a b " + "x" * 15 + "…"  # no space late enough: cut


def test_with_your_code_as_c0_every_line_names_the_candidates_as_they_are() -> None:
    wrong = block("def add(a, b):\n    return a * b\n")
    good = block("def add(a, b):\n    return a + b\n")
    diagnosis = (
        '{"root_cause": "multiplies", "category": "logic", "repair_strategy": "add", '
        '"confidence": 0.9, "blame": "code", "wrong_tests": []}'
    )
    mock = MockProvider(
        {"generator": [wrong, wrong.replace("a * b", "b * a"), good], "debugger": [diagnosis]},
        repeat_last=True,
    )
    result = heal(ADD_SPEC, provider=mock, code=BAD, entry_point="add", config={"memory": False})
    assert isinstance(result, HealResult)
    origins = {c.id: c.origin for c in result.candidates}
    named = [
        (m.group(1), m.group(2), e.node)
        for e in result.state.events
        if e.kind == "end" and e.node in ("generate", "repair")
        for m in re.finditer(r"\b(c\d+) (user|greedy|sample|patch|rewrite|regenerate)\b", e.detail)
    ]
    assert any(node == "repair" for _, _, node in named)
    # the repair line named c2 c3 c4 while the choice and `runs show` said c1 c2 c3
    assert [(i, o) for i, o, _ in named] == list(origins.items())
    shown = run_cli("runs", "show", result.run_id)
    assert shown.code == 0, shown.err
    for cid, origin in origins.items():
        assert re.search(rf"\b{cid}\b.*\b{origin}\b", shown.out), (cid, origin, shown.out)


def test_out_says_when_the_code_is_not_verified(tmp_path: Path) -> None:
    code = tmp_path / "add.py"
    code.write_text("def add(a, b):\n    return a + b\n")
    smoke = tmp_path / "test_add.py"
    smoke.write_text("from add import add\n\n\ndef test_runs():\n    add(1, 2)\n")
    out = tmp_path / "healed.py"
    script = tmp_path / "script.yaml"
    script.write_text("{}")
    ran = run_cli(
        "heal", "--provider", f"mock:{script}", "--code", str(code), "--tests", str(smoke),
        "--out", str(out),
    )  # fmt: skip
    assert ran.code == 1, ran.out + ran.err
    written = out.read_text()
    assert written.startswith("# selfheal: NOT verified (unverified, run ")
    header = " ".join(line[2:] for line in written.split("\n\n")[0].splitlines())
    assert "smoke test(s) only: u1::test_runs" in header  # the evidence, in # lines
    assert written.rstrip().endswith("return a + b")
    assert f"wrote {out}: NOT verified (unverified)" in ran.err
    compile(written, str(out), "exec")  # still a module


def test_verified_code_is_written_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "median.py"
    ran = run_cli("heal", "--provider", "mock", "--no-memory", "--out", str(out))
    assert ran.code == 0, ran.out + ran.err
    assert out.read_text().startswith("def median") and "NOT verified" not in ran.err


def test_doctor_suggests_the_install_that_exists_here(tmp_path: Path) -> None:
    assert "SELFHEAL_LLAMA_CUDA=1 selfheal install" in build_kind(False, root=tmp_path)
    (tmp_path / "Makefile").write_text("install:\n")
    (tmp_path / "selfheal").mkdir()
    (tmp_path / "selfheal" / "__init__.py").write_text("")
    assert "SELFHEAL_LLAMA_CUDA=1 make install" in build_kind(False, root=tmp_path)
    assert build_kind(True).startswith("CUDA")
