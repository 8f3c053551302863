"""The debugger's ReAct investigation (``debugger_steps`` > 0), with a real kernel pool."""

from __future__ import annotations

import json

import scripts as s
from selfheal import HealConfig, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.widgets.detail import row_detail
from selfheal.widgets.viewmodel import timeline_rows


def step(action: str, code: str = "", thought: str = "checking") -> str:
    return json.dumps({"thought": thought, "action": action, "code": code})


def test_probes_run_in_the_sandbox_and_reach_the_diagnosis(pool: KernelPool) -> None:
    mock = MockProvider(
        s.repair_script(
            [
                step("run", "clamp(-1, 0, 3)", "what does the code return below the range?"),
                step("run", "print('lo is', 0)\nclamp(-5, 0, 3) < 0"),
                step("run", "clamp(None, 0, 3)"),
                s.DIAG_CODE,
            ]
        )
    )
    result = heal(s.SPEC, provider=mock, config=s.chain(debugger_steps=3), executor=pool)
    assert result.status == "verified"
    probes = result.diagnoses[0].probes
    # the observations are what the candidate really did in the kernel
    assert [p.observation for p in probes] == [
        "value -1",
        "printed 'lo is 0'; value True",
        "raised TypeError: '<' not supported between instances of 'int' and 'NoneType'",
    ]
    assert probes[0].thought == "what does the code return below the range?"
    # each step saw the probes before it; the final diagnosis saw all three
    steps = mock.calls_for("debugger")
    assert "You may run 3 more snippet(s)" in steps[0].messages[-1].content
    assert "`clamp(-1, 0, 3)` -> value -1" in steps[1].messages[-1].content
    final = steps[3].messages[-1].content
    assert "What running code against the candidate showed:" in final
    assert "raised TypeError" in final
    infos = [e.detail for e in result.timeline if e.kind == "info" and e.node == "diagnose"]
    assert any(d.startswith("probe 1: clamp(-1, 0, 3) -> value -1") for d in infos)
    assert any(d.startswith("probe 2: print('lo is', 0) ... -> printed") for d in infos)
    # the notebook's detail of the diagnose row lists the probes
    row = next(r for r in timeline_rows(result.state) if r.node == "diagnose")
    assert "probe: clamp(-1, 0, 3) -> value -1" in row_detail(result.state, row).lines


def test_the_debugger_may_stop_early_and_a_repeated_probe_ends_it(pool: KernelPool) -> None:
    mock = MockProvider(s.repair_script([step("diagnose"), s.DIAG_CODE]))
    result = heal(s.SPEC, provider=mock, config=s.chain(debugger_steps=3), executor=pool)
    assert result.status == "verified" and result.diagnoses[0].probes == ()
    assert len(mock.calls_for("debugger")) == 2

    # the memory off: the run above remembered its verified solution, which would settle
    # this second run of the same spec before any diagnosis
    mock = MockProvider(s.repair_script([step("run", "clamp(-1, 0, 3)")] * 2 + [s.DIAG_CODE]))
    config = s.chain(debugger_steps=3, memory=False)
    result = heal(s.SPEC, provider=mock, config=config, executor=pool)
    assert len(result.diagnoses[0].probes) == 1
    assert any("repeated a probe" in e.detail for e in result.timeline if e.kind == "info")


def test_a_hostile_probe_is_contained_like_a_candidate(pool: KernelPool) -> None:
    hostile = "import os\nos.environ.get('ANTHROPIC_API_KEY', 'no key')"
    mock = MockProvider(
        s.repair_script([step("run", "while True: pass"), step("run", hostile), s.DIAG_CODE])
    )
    import os

    os.environ["ANTHROPIC_API_KEY"] = "sk-secret-from-the-host"
    try:
        result = heal(
            s.SPEC,
            provider=mock,
            config=s.chain(debugger_steps=2, test_timeout=1.0),
            executor=pool,
        )
    finally:
        del os.environ["ANTHROPIC_API_KEY"]
    loop, env = result.diagnoses[0].probes
    assert loop.observation.startswith("timed out")
    assert "sk-secret" not in env.observation and env.observation == "value 'no key'"
    assert result.status == "verified"


def test_an_unusable_step_reply_goes_on_to_the_diagnosis(pool: KernelPool) -> None:
    mock = MockProvider(s.repair_script(["no json", "still none", "{broken", s.DIAG_CODE]))
    result = heal(s.SPEC, provider=mock, config=s.chain(debugger_steps=2), executor=pool)
    assert result.status == "verified"
    assert result.diagnoses[0].source == "debugger" and result.diagnoses[0].probes == ()
    assert result.diagnoses[0].category == "edge_case"


def test_default_config_diagnoses_without_probing(pool: KernelPool) -> None:
    mock = MockProvider(s.repair_script([s.DIAG_CODE]))
    result = heal(s.SPEC, provider=mock, config=s.chain(), executor=pool)
    assert HealConfig().debugger_steps == 0
    assert result.status == "verified" and len(mock.calls_for("debugger")) == 1
    assert "snippet" not in mock.calls_for("debugger")[0].messages[0].content
