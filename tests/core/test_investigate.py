"""The debugger's investigation (``debugger_steps`` > 0): its four tools on a real kernel pool,
through the structured-reply path (the scripted mock) and through native tool calling (the
real ``openai`` client against a fake OpenAI-compatible server on 127.0.0.1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import scripted as s

from selfheal import HealConfig, Run, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.widgets.detail import row_detail
from selfheal.widgets.viewmodel import timeline_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from llm_fakes import FakeServer, Request, Response, openai_stream


def step(action: str, code: str = "", thought: str = "checking") -> str:
    """A step reply of the older shape (``action: run``), still read as ``run_snippet``."""
    return json.dumps({"thought": thought, "action": action, "code": code})


def tool(which: str, thought: str = "", **args: str) -> str:
    return json.dumps({"thought": thought, "tool": which, **args})


def test_snippets_run_in_the_sandbox_and_reach_the_diagnosis(pool: KernelPool) -> None:
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
    assert {p.tool for p in probes} == {"run_snippet"} and not any(p.native for p in probes)
    # each step saw the calls before it; the final diagnosis saw all three
    steps = mock.calls_for("debugger")
    assert "You may make 3 more tool call(s)" in steps[0].messages[-1].content
    assert "`clamp(-1, 0, 3)` -> value -1" in steps[1].messages[-1].content
    final = steps[3].messages[-1].content
    assert "What the investigation showed:" in final and "raised TypeError" in final
    tools = [e for e in result.timeline if e.kind == "tool"]
    assert [e.detail for e in tools][:2] == [
        "tool 1: clamp(-1, 0, 3) -> value -1",
        "tool 2: print('lo is', 0) ... -> printed 'lo is 0'; value True",
    ]
    assert result.usage.executions >= 3 + 2  # the three snippets and the two rounds
    # the notebook's detail of the diagnose row lists the calls and what each cost
    row = next(r for r in timeline_rows(result.state) if r.node == "diagnose")
    detail = row_detail(result.state, row)
    assert any(
        line.startswith("tool 1: clamp(-1, 0, 3) -> value -1 · ") and "(structured reply)" in line
        for line in detail.lines
    )
    assert any(
        line.startswith("tool 3: clamp(None, 0, 3) -> raised TypeError") for line in detail.lines
    )
    assert "# tool 2: run_snippet — checking\n#   print('lo is', 0)" in detail.code


def test_every_tool_on_a_real_kernel(pool: KernelPool) -> None:
    """inspect_function, trace_failure, diff_candidates and run_snippet in one investigation,
    with two candidates in the first round."""
    script = s.repair_script(
        [
            tool("inspect_function", "what does clamp do?", name="clamp"),
            tool("trace_failure", test_id="sb2"),
            tool("diff_candidates", a="current", b="c2"),
            tool("trace_failure", test_id="zz9"),
            tool("diagnose"),
            s.DIAG_CODE,
        ]
    )
    script["generator"] = [s.BUGGY, s.BROKEN, s.GOOD]
    mock = MockProvider(script)
    cfg = s.chain(debugger_steps=5, candidates=2, first_sample=2)
    result = heal(s.SPEC, provider=mock, config=cfg, executor=pool)
    assert result.status == "verified"
    inspect, trace, diff, unknown = result.diagnoses[0].probes
    assert inspect.tool == "inspect_function" and inspect.arguments == {"name": "clamp"}
    assert inspect.observation.splitlines()[0] == "def clamp(x, lo, hi)  (lines 1-2)"
    assert "cyclomatic 1 (McCabe); 0 branch(es), 0 loop(s)" in inspect.observation
    assert (
        "calls min" in inspect.observation and "  2 |     return min(x, hi)" in inspect.observation
    )
    assert inspect.observation.endswith("once loaded: a function, signature (x, lo, hi)")
    # the failing test, traced in the kernel: the call, the line, what it returned
    assert trace.code == "trace_failure(test_id='sb2')"
    assert "left:  -1" in trace.observation
    assert "→ clamp(x=-1, lo=0, hi=3)\n  L2: return min(x, hi)\n← clamp returns -1" in (
        trace.observation
    )
    # the diff and the probe inputs on which the two candidates differ
    assert "-    return min(x, hi)\n+    return x" in diff.observation
    assert "  clamp(6, 0, 3): c1 -> 3 | c2 -> 6" in diff.observation
    assert "tests they do not agree on: ex1: c1 passed, c2 failed" in diff.observation
    # a call that cannot run says what can be called instead
    assert unknown.observation == "there is no test 'zz9'; the failing tests are sb2"
    # the diagnose tool ended the loop: 5 step calls, then the diagnosis
    assert len(mock.calls_for("debugger")) == 6
    prompt = mock.calls_for("debugger")[1].messages[-1].content
    assert "- c1 (greedy, round 1): fails sb2 ← the one being diagnosed" in prompt
    assert "- c2 (sample, round 1): fails ex1 (trusted), sb2" in prompt


def test_inspect_a_recursive_function_and_trace_it(pool: KernelPool) -> None:
    spec = "Write fact(n) returning n factorial. Example: fact(3) -> 6"
    buggy = s.block("def fact(n):\n    if n <= 1:\n        return 0\n    return n * fact(n - 1)")
    good = s.block("def fact(n):\n    if n <= 1:\n        return 1\n    return n * fact(n - 1)")
    mock = MockProvider(
        {
            "generator": [buggy, good],
            "debugger": [
                tool("inspect_function", name="fact"),
                tool("trace_failure", test_id="ex1"),
                s.DIAG_CODE,
            ],
        }
    )
    cfg = HealConfig(candidates=1, first_sample=1, agreement=1, repair_width=1, debugger_steps=2)
    result = heal(spec, provider=mock, config=cfg, executor=pool)
    assert result.status == "verified"
    inspect, trace = result.diagnoses[0].probes
    assert "cyclomatic 2 (McCabe); 1 branch(es), 0 loop(s), nesting depth 1; recursive: yes" in (
        inspect.observation
    )
    assert "calls nested 3 deep" in trace.observation
    assert "    → fact(n=1)\n      L2: if n <= 1:\n      L3: return 0\n    ← fact returns 0" in (
        trace.observation
    )


def test_the_debugger_may_stop_early_and_a_repeated_call_ends_it(pool: KernelPool) -> None:
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
    assert any("repeated a tool call" in e.detail for e in result.timeline if e.kind == "info")


def test_a_hostile_snippet_is_contained_like_a_candidate(pool: KernelPool) -> None:
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


def test_default_config_diagnoses_without_investigating(pool: KernelPool) -> None:
    mock = MockProvider(s.repair_script([s.DIAG_CODE]))
    result = heal(s.SPEC, provider=mock, config=s.chain(), executor=pool)
    assert HealConfig().repairs.debugger_steps == 0
    assert result.status == "verified" and len(mock.calls_for("debugger")) == 1
    assert "tool" not in mock.calls_for("debugger")[0].messages[0].content
    assert not any(e.kind == "tool" for e in result.timeline)


# ------------------------------------------------------------------- native tool calling


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake OpenAI-compatible server for the debugger role (``openai:m``): it answers a
    request that offers tools with the next scripted tool call, any other with the
    diagnosis."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def handle(request: Request) -> Response:
        body = request.json()
        if not body.get("tools"):
            return openai_stream([s.DIAG_CODE], prompt_tokens=300, completion_tokens=40)
        name, args = calls.pop(0)
        text = json.dumps(args)
        return openai_stream(
            [text[: len(text) // 2], text[len(text) // 2 :]],
            tool=name,
            call_id=f"call_{len(calls)}",
        )

    server = FakeServer(handle)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "k-test")
    yield server, calls
    server.close()


def test_native_tool_calls_over_the_openai_wire(pool: KernelPool, openai_server: Any) -> None:
    server, calls = openai_server
    calls += [
        ("inspect_function", {"name": "clamp"}),
        ("trace_failure", {"test_id": "sb2"}),
        ("diagnose", {}),
    ]
    mock = MockProvider(s.repair_script([]))  # every role but the debugger
    cfg = s.chain(debugger_steps=3, models={"debugger": "openai:m"})
    result = heal(s.SPEC, provider=mock, config=cfg, executor=pool)
    assert result.status == "verified"
    inspect, trace = result.diagnoses[0].probes
    assert (inspect.tool, trace.tool) == ("inspect_function", "trace_failure")
    assert inspect.native and trace.native
    assert (trace.prompt_tokens, trace.completion_tokens) == (120, 14)
    assert "← clamp returns -1" in trace.observation

    bodies = [r.json() for r in server.requests]
    with_tools = [b for b in bodies if b.get("tools")]
    assert len(with_tools) == 3 and all(b["tool_choice"] == "required" for b in with_tools)
    assert [t["function"]["name"] for t in with_tools[0]["tools"]] == [
        "run_snippet",
        "inspect_function",
        "diff_candidates",
        "trace_failure",
        "diagnose",
    ]
    # one conversation: each call and its result go back to the model
    third = with_tools[2]["messages"]
    assert [m["role"] for m in third] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert third[2]["tool_calls"][0]["function"] == {
        "name": "inspect_function",
        "arguments": '{"name": "clamp"}',
    }
    assert third[3]["tool_call_id"] == third[2]["tool_calls"][0]["id"]
    assert third[3]["content"].startswith("def clamp(x, lo, hi)")
    assert "(1 tool call(s) left; call diagnose when you know enough)" in third[5]["content"]
    # the diagnosis is the structured call, and it saw what the tools showed
    final = next(b for b in bodies if not b.get("tools"))
    assert "response_format" in final and "← clamp returns -1" in final["messages"][-1]["content"]

    # on the timeline: each model call (its reply shows the tool call), then the tool's run
    diagnose = [
        e
        for e in result.timeline
        if e.kind == "tool" or (e.kind == "llm" and e.detail.startswith("debugger"))
    ]
    assert [e.kind for e in diagnose] == ["llm", "tool", "llm", "tool", "llm", "llm"]
    assert diagnose[2].reply == '[tool call] trace_failure {"test_id": "sb2"}'
    assert "(native tool call)" in diagnose[0].detail
    assert result.usage.by_role["debugger@openai:m"].calls == 4
    row = next(r for r in timeline_rows(result.state) if r.node == "diagnose")
    detail = row_detail(result.state, row)
    assert any("tool 2: trace_failure(test_id='sb2') -> trace of sb2" in x for x in detail.lines)
    assert any("120+14 tokens (native tool call)" in x for x in detail.lines)
    assert "# tool 2: trace_failure" in detail.code and "← clamp returns -1" in detail.code
    assert any(
        m.tool_calls and m.tool_calls[0].name == "inspect_function"
        for c in detail.calls
        for m in c.messages
    )
    assert '[tool call] inspect_function {"name": "clamp"}' in result.transcript_text()
    # the run log keeps the calls and the conversation (tool calls, tool results)
    reloaded = Run.load(result.run_id).state
    assert reloaded.diagnoses == result.diagnoses
    assert [e.messages for e in reloaded.events] == [e.messages for e in result.timeline]


def test_structured_tool_calls_can_be_forced(pool: KernelPool, openai_server: Any) -> None:
    server, _ = openai_server
    server.handler = lambda r: openai_stream(
        [tool("run_snippet", code="clamp(-1, 0, 3)") if "tool" in r.body.decode() else "?"]
    )
    mock = MockProvider(s.repair_script([]))
    cfg = s.chain(
        debugger_steps=1, models={"debugger": "openai:m"}, debugger_tool_calls="structured"
    )
    result = heal(s.SPEC, provider=mock, config=cfg, executor=pool)
    probe = result.diagnoses[0].probes[0]
    assert probe.observation == "value -1" and not probe.native
    first = server.requests[0].json()
    assert "tools" not in first and "response_format" in first


def test_observations_share_what_fits_the_context() -> None:
    from selfheal.roles.debugtools import CONTEXT_CHARS, observation_limit

    assert observation_limit("trace_failure", 1) == 2400  # the tool's own limit
    assert observation_limit("trace_failure", 3) == CONTEXT_CHARS // 3 == 1800
    assert observation_limit("diff_candidates", 10) == 600  # never below 600
    assert observation_limit("run_snippet", 1) == 600


def test_a_server_refusing_tools_falls_back_to_json_replies(
    pool: KernelPool, openai_server: Any
) -> None:
    """llama-server without --jinja answers a request with tools with a 400; the
    investigation says so on the timeline and goes on with JSON replies."""
    server, _ = openai_server

    def handle(request: Request) -> Response:
        body = request.json()
        if body.get("tools"):
            error = {"code": 400, "message": "tools param requires --jinja flag", "type": "x"}
            return Response.json({"error": error}, 400)
        schema = body["response_format"]["json_schema"]["schema"]
        if "tool" in schema["properties"]:
            return openai_stream([tool("run_snippet", code="clamp(-1, 0, 3)")])
        return openai_stream([s.DIAG_CODE])

    server.handler = handle
    mock = MockProvider(s.repair_script([]))
    cfg = s.chain(debugger_steps=1, models={"debugger": "openai:m"})
    result = heal(s.SPEC, provider=mock, config=cfg, executor=pool)
    assert result.status == "verified"
    probe = result.diagnoses[0].probes[0]
    assert probe.observation == "value -1" and not probe.native
    notes = [e.detail for e in result.timeline if e.node == "diagnose"]
    assert any("requires --jinja" in d for d in notes)
    assert "native tool calls failed: going on with JSON replies" in notes


def test_a_tool_call_written_as_text_is_read() -> None:
    from selfheal.llm.base import ToolCall
    from selfheal.roles.investigate import salvage

    block = '<tool_call>\n{"name": "trace_failure", "arguments": {"test_id": "ex2"}}\n</tool_call>'
    assert salvage(block) == ToolCall(name="trace_failure", arguments='{"test_id": "ex2"}')
    step = '{"thought": "t", "tool": "Inspect_Function", "name": "f", "code": "ignored"}'
    assert salvage(step) == ToolCall(name="inspect_function", arguments='{"name": "f"}')
    assert salvage("I think the bug is on line 2.") is None
