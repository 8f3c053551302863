"""Memory across runs: persistence and recall across processes, concurrent writers, a kill -9
mid-write, forget/clear, down-weighting, and a remembered solution that must still earn its
place."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import scripted as s

from selfheal import HealConfig, HealRequest, Run, heal
from selfheal.cli import main
from selfheal.errors import ConfigError, MemoryUnavailable
from selfheal.graph.checkpoint import read_states
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.memory import (
    MAX_HARM,
    Learnt,
    LessonNote,
    Memory,
    MemoryLesson,
    MemorySolution,
    SolutionNote,
    default_path,
)
from selfheal.state import Candidate, HealState, Remembered, Spec
from selfheal.widgets.text import render_text
from selfheal.widgets.viewmodel import lessons_view, timeline_rows

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

MEDIAN = "Write a function median(values) that returns the median of a list of numbers."
CLAMP_LO = (
    "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]; "
    "when lo > hi, return lo. Example: clamp(5, 0, 3) -> 3"
)
CLAMP_HI = (
    "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]; "
    "when lo > hi, return hi. Examples: clamp(5, 0, 3) -> 3, clamp(1, 5, 2) -> 2"
)
HI_WINS = s.block("def clamp(x, lo, hi):\n    return min(hi, max(lo, x))")


def learnt(
    run_id: str,
    spec: str = MEDIAN,
    *,
    lessons: tuple[str, ...] = (),
    verified: bool = True,
    code: str | None = None,
    used: tuple[int, ...] = (),
    entry_point: str = "median",
) -> Learnt:
    return Learnt(
        run_id=run_id,
        spec=spec,
        entry_point=entry_point,
        status="verified" if verified else "exhausted",
        verified=verified,
        lessons=tuple(
            LessonNote(text=t, failure="assert median([1, 2]) == 1.5 (failed)") for t in lessons
        ),
        solution=SolutionNote(code=code, evidence={"summary": "2/2"}, tests=("assert 1",))
        if code
        else None,
        used=used,
    )


# -- the store ----------------------------------------------------------------------------------


def test_lessons_are_recalled_for_related_specs_only(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.sqlite3")
    m.remember(learnt("r1", lessons=("Average the two middle values of an even-length list.",)))
    m.remember(
        learnt(
            "r2",
            "Write a function slugify(text) that turns a title into a URL slug.",
            lessons=("Strip accents before lowercasing.",),
        )
    )
    found = m.lessons_for("Return the median of a list of numbers, as a float", k=3)
    assert [x.text for x in found] == ["Average the two middle values of an even-length list."]
    assert found[0].id == "L1" and found[0].run_id == "r1" and 0.2 <= found[0].score < 1
    assert m.lessons_for("Parse an ISO date into a datetime.date") == []
    assert m.lessons_for(MEDIAN, k=0) == []
    # the same lesson learnt on a second spec is recalled once
    m.remember(learnt("r3", MEDIAN + " Sort first.", lessons=(found[0].text,)))
    assert len(m.lessons_for(MEDIAN)) == 1


def test_a_solution_joins_only_a_very_similar_spec_with_the_same_function(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.sqlite3")
    m.remember(learnt("r1", CLAMP_LO, code="def clamp(x, lo, hi): ...", entry_point="clamp"))
    (same,) = m.solutions_for(CLAMP_LO, entry_point="clamp")
    assert same.score == 1.0 and same.code == "def clamp(x, lo, hi): ..."
    assert isinstance(same, MemorySolution) and same.tests == ("assert 1",)
    assert [x.id for x in m.solutions_for(CLAMP_HI, entry_point="clamp")] == ["S1"]  # 82% alike
    assert m.solutions_for(CLAMP_HI, entry_point="limit") == []  # another function
    assert m.solutions_for("Write a function clamp(x) that rounds x.", entry_point="clamp") == []


def test_learning_a_run_twice_adds_nothing(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.sqlite3")
    first = m.remember(learnt("r1", lessons=("a lesson about medians",), code="def median(v): ..."))
    assert (first.lessons, first.solution, first.already) == (("L1",), "S1", False)
    again = m.remember(learnt("r1", lessons=("a lesson about medians",), code="def median(v): ..."))
    assert again.already and "already" in again.summary(m.path)
    assert len(m.entries()) == 2 and m.runs() == 1


def test_a_lesson_that_led_to_a_worse_result_is_down_weighted_then_dropped(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.sqlite3")
    m.remember(learnt("teach", lessons=("Median lesson A: sort the numbers first.",)))
    m.remember(
        learnt("other", MEDIAN + " (a list)", lessons=("Median lesson B: sort the numbers twice.",))
    )
    assert {x.id for x in m.lessons_for(MEDIAN)} == {"L1", "L2"}
    # a run that used lesson A was not verified, while a run of the same spec without it
    # ("teach" itself) was: A led to a worse result
    worse = m.remember(learnt("with-a", verified=False, used=(1,)))
    assert worse.down_weighted == ("L1",) and "down-weighted L1" in worse.summary(m.path)
    a = m.show("L1")
    assert isinstance(a, MemoryLesson) and (a.uses, a.harm) == (1, 1)
    assert [x.id for x in m.lessons_for(MEDIAN)] == ["L2", "L1"]  # ranked lower, still there
    # the other order: a run that used it fails first, then a run without it is verified
    m.remember(learnt("with-a-2", MEDIAN + " Twice.", verified=False, used=(1,)))
    assert m.show("L1").harm == 1  # nothing of that spec was verified yet
    later = m.remember(learnt("clean-2", MEDIAN + " Twice.", verified=True))
    assert later.down_weighted == ("L1",)
    assert m.show("L1").harm == MAX_HARM
    assert [x.id for x in m.lessons_for(MEDIAN)] == ["L2"]  # no longer recalled
    # a run that used a lesson and was verified harms nothing
    assert m.remember(learnt("fine", verified=True, used=(2,))).down_weighted == ()
    assert m.show("L2").harm == 0


def test_forget_and_clear(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.sqlite3")
    m.remember(
        learnt("r1", lessons=("Median: sort first.", "Median: mind even lengths."), code="x = 1")
    )
    assert [e.id for e in m.entries()] == ["L1", "L2", "S1"]
    forgotten = m.forget("l1")  # ids are not case-sensitive
    assert forgotten.id == "L1"
    assert [x.id for x in m.lessons_for(MEDIAN)] == ["L2"]  # gone from the index too
    with pytest.raises(ConfigError, match="holds no L1"):
        m.show("L1")
    with pytest.raises(ConfigError, match="look like L3"):
        m.forget("X1")
    m.remember(learnt("r2", lessons=("Median: a new lesson.",)))
    assert [e.id for e in m.lessons()] == ["L2", "L3"]  # an id is never given twice
    # forgotten text is overwritten in the file and its log, not only unlinked
    files = [m.path, m.path.with_name(m.path.name + "-wal")]
    assert not any(b"Median: sort first." in f.read_bytes() for f in files if f.exists())
    assert m.clear() == 3
    assert m.entries() == [] and m.runs() == 0 and m.lessons_for(MEDIAN) == []


def test_an_unusable_memory_file_says_what_to_do(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MemoryUnavailable, match="Move the file away"):
        Memory(junk)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(MemoryUnavailable, match="memory=False"):
        Memory(blocker / "memory.sqlite3")
    # a run that asks for such a memory stops before any model call
    mock = MockProvider({})
    config = HealConfig(memory_path=str(junk))
    with pytest.raises(MemoryUnavailable, match="SELFHEAL_MEMORY"):
        heal(s.SPEC, provider=mock, config=config)
    assert mock.calls == []


def test_the_default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SELFHEAL_MEMORY")
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(tmp_path / "runs"))
    assert default_path() == tmp_path / "runs" / "memory.sqlite3"
    assert (
        default_path(HealConfig(runs_dir=str(tmp_path / "x"))) == tmp_path / "x" / "memory.sqlite3"
    )
    monkeypatch.setenv("SELFHEAL_MEMORY", str(tmp_path / "m.db"))
    assert default_path() == tmp_path / "m.db"
    assert default_path(HealConfig(memory_path=str(tmp_path / "c.db"))) == tmp_path / "c.db"


# -- processes ---------------------------------------------------------------------------------


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from selfheal.memory import Learnt, LessonNote, Memory, SolutionNote

    memory = Memory(sys.argv[1])
    name, count, pad = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    i = 0
    while count < 0 or i < count:
        memory.remember(
            Learnt(
                run_id=f"{{name}}-{{i}}",
                spec=f"Write a function median{{i}}(values) for writer {{name}}",
                status="verified",
                verified=True,
                lessons=(LessonNote(text=f"lesson {{name}} {{i}} " + "x" * pad),),
                solution=SolutionNote(code=f"# {{name}} {{i}}\\n" + "y = 0\\n" * pad, evidence={{}}),
            )
        )
        print(i, flush=True)  # committed
        i += 1
    """
)


def _writer(tmp_path: Path) -> Path:
    path = tmp_path / "writer.py"
    path.write_text(WRITER.format(root=str(ROOT)))
    return path


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db, script = tmp_path / "m.sqlite3", _writer(tmp_path)
    Memory(db)  # made once; the writers open it at the same time
    writers = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), f"w{n}", "20", "200"], stdout=subprocess.PIPE
        )
        for n in range(4)
    ]
    for p in writers:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0 and out.split()[-1] == b"19"
    m = Memory(db)
    assert m.runs() == 80 and len(m.lessons()) == 80 and len(m.solutions()) == 80
    assert {e.run_id for e in m.lessons()} == {f"w{n}-{i}" for n in range(4) for i in range(20)}
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_kill_9_during_writes_loses_nothing_committed(tmp_path: Path) -> None:
    db, script = tmp_path / "m.sqlite3", _writer(tmp_path)
    Memory(db)
    # large entries, written without pause: the kill lands inside a write or between two
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), "k", "-1", "5000"], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    committed: list[int] = []
    try:
        while len(committed) < 15:
            line = proc.stdout.readline()
            assert line, "the writer stopped early"
            committed.append(int(line))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate()
    committed += [int(x) for x in rest.split()]
    assert proc.returncode == -signal.SIGKILL
    m = Memory(db)  # opens (and recovers) after the kill
    runs = {e.run_id for e in m.lessons()}
    assert {f"k-{i}" for i in committed} <= runs  # every committed write is there
    assert len(runs) <= len(committed) + 1  # at most the one whose notice was not printed
    assert len(m.solutions()) == len(runs)  # never half a run: one transaction each
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert m.remember(learnt("after-the-kill", lessons=("still writable",))).lessons


FIRST_RUN = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = [{root!r}, {here!r}]
    import scripted as s
    from selfheal import HealRequest, Run
    from selfheal.llm.mock import MockProvider

    result = Run.start(
        HealRequest(s.SPEC, provider=MockProvider(s.repair_script()), config=s.chain())
    ).run()
    print(json.dumps({{"run_id": result.run_id, "status": result.status}}))
    """
)

SECOND_RUN = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = [{root!r}, {here!r}]
    import scripted as s
    from selfheal import HealRequest, Run
    from selfheal.llm.mock import MockProvider
    from selfheal.widgets.viewmodel import lessons_view

    mock = MockProvider(
        {{
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [s.PASSING_ADV],
            "critic": [s.ACCEPT],
        }}
    )
    run = Run.start(HealRequest(s.SPEC, provider=mock, config=s.chain()))
    result = run.run()
    print(json.dumps({{"path": str(run.path), "status": result.status}}))
    print(json.dumps({{"prompt": mock.calls_for("generator")[0].messages[-1].content}}))
    print(json.dumps({{"tab": list(lessons_view(result.state).remembered)}}))
    """
)


def _python(code: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-c", code.format(root=str(ROOT), here=str(HERE))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_a_second_process_recalls_what_the_first_learnt(runs_dir: Path) -> None:
    # two processes, one memory ($SELFHEAL_MEMORY of this test, inherited): the first run
    # fails, is diagnosed and repaired; the second, of the same spec, recalls its lesson and
    # its verified solution
    (first,) = _python(FIRST_RUN)
    assert first["status"] == "verified"
    second, prompt, tab = _python(SECOND_RUN)
    assert second["status"] == "verified"
    state = read_states(Path(str(second["path"])))[-1]
    lesson, solution = state.remembered
    assert (lesson.kind, lesson.id, lesson.run_id) == ("lesson", "L1", first["run_id"])
    assert lesson.text == "Clamp from below with max(lo, x)."  # the lessons role's lesson
    assert (solution.kind, solution.id, solution.run_id, solution.score) == (
        "solution",
        "S1",
        first["run_id"],
        1.0,
    )
    # the lesson went into the generator's prompt, marked as remembered
    assert "Lessons remembered from earlier runs" in str(prompt["prompt"])
    assert "Clamp from below with max(lo, x)." in str(prompt["prompt"])
    # the verified solution joined the first round and agreed with the model's answer
    memory = [c for c in state.candidates if c.origin == "memory"]
    assert [(c.memory_id, c.round, c.cluster) for c in memory] == [("S1", 1, 0)]
    assert state.evidence is not None and state.evidence.clusters == (2,)
    # the timeline, the notebook's Lessons tab and `runs show` name the run it came from
    recall_row = timeline_rows(state)[0]
    assert recall_row.node == "recall"
    assert f"remembered from run {first['run_id']}" in recall_row.detail
    assert tab["tab"] == [
        f"Clamp from below with max(lo, x). (L1, remembered from run {first['run_id']})",
        f"verified solution S1 of a spec 100% alike, remembered from run {first['run_id']}: "
        f"candidate {memory[0].id}",
    ]
    assert lessons_view(state).remembered == tuple(tab["tab"])  # type: ignore[arg-type]
    assert f"remembered from run {first['run_id']}" in render_text(state)


def test_runs_show_names_the_remembered_run(
    pool: KernelPool, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = heal(s.SPEC, provider=MockProvider(s.repair_script()), config=s.chain(), executor=pool)
    again = MockProvider(
        {
            "test_writer": [s.TESTS],
            "generator": [s.GOOD],
            "adversary": [s.PASSING_ADV],
            "critic": [s.ACCEPT],
        }
    )
    second = heal(s.SPEC, provider=again, config=s.chain(), executor=pool)
    assert main(["runs", "show", second.run_id]) == 0
    out = capsys.readouterr().out
    assert "remembered from earlier runs:" in out
    assert f"(L1, remembered from run {first.run_id})" in out
    assert f"remembered from run {first.run_id}: candidate c2" in out
    assert "c2   memory" in out  # the candidates table


# -- in a run ------------------------------------------------------------------------------------


def test_a_remembered_solution_that_fails_this_specs_examples_is_not_chosen(
    pool: KernelPool,
) -> None:
    config = HealConfig(candidates=1, first_sample=1, agreement=1, spec_blind_tests=False)
    first = heal(
        CLAMP_LO, provider=MockProvider({"generator": [s.GOOD]}), config=config, executor=pool
    )
    assert first.verified  # remembered: max(lo, min(x, hi)) for "when lo > hi, return lo"
    # a very similar spec whose second example that solution fails: clamp(1, 5, 2) -> 2
    second = heal(
        CLAMP_HI, provider=MockProvider({"generator": [HI_WINS]}), config=config, executor=pool
    )
    greedy, remembered = second.candidates
    assert remembered.origin == "memory" and remembered.memory_id == "S1"
    assert remembered.code == first.code
    assert remembered.report is not None and remembered.cluster is None
    assert {r.test_id: r.outcome for r in remembered.report.results}["ex2"] == "failed"
    assert second.verified and second.code == greedy.code and "min(hi, max(lo, x))" in greedy.code
    assert second.attempts[-1].candidate == greedy.id
    assert second.evidence.passing == 1 and second.evidence.candidates == 2


def test_memory_off_reads_and_writes_nothing(pool: KernelPool, memory_path: Path) -> None:
    config = HealConfig(
        memory=False, candidates=1, first_sample=1, agreement=1, spec_blind_tests=False
    )
    result = heal(
        s.SPEC, provider=MockProvider({"generator": [s.GOOD]}), config=config, executor=pool
    )
    assert result.verified and result.remembered == ()
    assert timeline_rows(result.state)[0].detail == "memory off"
    assert not memory_path.exists()


def test_a_memory_that_fails_mid_run_is_on_the_timeline_not_the_end_of_it(
    pool: KernelPool, tmp_path: Path
) -> None:
    class Broken:
        path = tmp_path / "broken.sqlite3"

        def recall(self, state: HealState) -> tuple[Remembered, ...]:
            raise MemoryUnavailable("The memory at broken.sqlite3 cannot be used (locked).")

        def learn(self, state: HealState) -> object:
            raise MemoryUnavailable("The memory at broken.sqlite3 cannot be used (locked).")

    request = HealRequest(
        s.SPEC,
        provider=MockProvider({"generator": [s.GOOD]}),
        config=HealConfig(candidates=1, first_sample=1, agreement=1, spec_blind_tests=False),
        executor=pool,
    )
    run = Run.start(request)
    run.ctx = type(run.ctx)(llm=run.ctx.llm, executor=pool, memory_store=Broken())
    result = run.run()
    assert result.verified
    degraded = [e for e in result.timeline if e.kind == "degraded"]
    assert [e.node for e in degraded] == ["recall", "finish"]
    assert all("locked" in e.detail for e in degraded)
    rows = timeline_rows(result.state)
    assert rows[0].detail == "memory unavailable: the run goes on without it"
    assert rows[-1].detail == "status verified; memory unavailable: nothing was remembered"


def test_a_verified_run_is_written_down_with_its_lessons_and_tests(
    pool: KernelPool, memory_path: Path
) -> None:
    result = heal(s.SPEC, provider=MockProvider(s.repair_script()), config=s.chain(), executor=pool)
    assert result.verified
    m = Memory(memory_path)
    (lesson,) = m.lessons()
    assert (lesson.text, lesson.source, lesson.verified) == (
        "Clamp from below with max(lo, x).",
        "lessons",
        True,
    )
    assert lesson.failure.startswith("assert clamp(-1, 0, 3) == 0 (failed)")  # what it fixed
    (solution,) = m.solutions()
    assert solution.code == result.code and solution.entry_point == "clamp"
    assert solution.tests[0] == "assert clamp(5, 0, 3) == 3"  # the trusted example first
    assert solution.evidence["summary"] == result.evidence.summary
    end = [e for e in result.timeline if e.node == "finish" and e.kind == "end"][-1]
    assert (
        end.detail
        == f"status verified; remembered 1 lesson(s) (L1) and the verified solution (S1) in {memory_path}"
    )


def test_without_the_lessons_role_a_diagnosis_is_the_lesson(
    pool: KernelPool, memory_path: Path
) -> None:
    heal(
        s.SPEC,
        provider=MockProvider(s.repair_script()),
        config=s.chain(lessons=False),
        executor=pool,
    )
    (lesson,) = Memory(memory_path).lessons()
    assert lesson.source == "diagnosis"
    assert lesson.text == "values below lo are not raised to lo Fix: use max(lo, ...)"


# -- the command line ------------------------------------------------------------------------------


def test_cli_list_show_forget_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "cli.sqlite3"
    Memory(db).remember(
        learnt("r1", lessons=("Median: sort first.",), code="def median(v):\n    return 0")
    )
    base = ["memory", "--path", str(db)]
    assert main([*base, "list"]) == 0
    out = capsys.readouterr().out
    assert f"memory {db}: 1 lesson(s), 1 verified solution(s), from 1 run(s)" in out
    assert "L1    lesson" in out and "Median: sort first." in out and "S1    solution" in out
    assert main([*base, "show", "S1"]) == 0
    out = capsys.readouterr().out
    assert "verified solution of median: 2/2" in out and "def median(v):" in out
    assert main([*base, "show", "L9"]) == 2
    assert "holds no L9" in capsys.readouterr().err
    assert main([*base, "list", "--json"]) == 0
    assert [e["id"] for e in json.loads(capsys.readouterr().out)] == ["L1", "S1"]
    # every id is checked before any is removed
    assert main([*base, "forget", "L1", "S7"]) == 2
    assert len(Memory(db).entries()) == 2
    assert main([*base, "forget", "L1"]) == 0
    assert capsys.readouterr().out == "forgot L1\n"
    assert main([*base, "clear"]) == 2  # not a terminal: --yes is required
    assert "run it again with --yes" in capsys.readouterr().err
    assert main([*base, "clear", "--yes"]) == 0
    assert f"removed 1 lesson(s) and solution(s) from {db}" in capsys.readouterr().out
    assert Memory(db).entries() == []


def test_cli_heal_no_memory(runs_dir: Path, memory_path: Path) -> None:
    env = dict(os.environ, SELFHEAL_RUNS_DIR=str(runs_dir), PYTHONPATH=str(ROOT))
    env.pop("SELFHEAL_MODEL", None)
    p = subprocess.run(
        [sys.executable, "-m", "selfheal", "heal", "--provider", "mock", "--no-memory", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert not memory_path.exists()


def test_candidate_records_keep_the_memory_id() -> None:
    c = Candidate(id="c3", code="x = 1", origin="memory", round=1, memory_id="S2")
    state = HealState(spec=Spec(text="t"), candidates=(c,))
    assert HealState.model_validate_json(state.model_dump_json()).candidates[0].memory_id == "S2"
