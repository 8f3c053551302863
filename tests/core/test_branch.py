"""What-if branches of a finished run (``selfheal.graph.branch``): where another config would
first have gone another way, and going on from there. Scripted mock model, real kernel pool."""

from __future__ import annotations

from pathlib import Path

import scripted as s

from selfheal import Run, heal
from selfheal.config import FIELD_GROUP, HealConfig
from selfheal.graph.branch import READ_BY, branch_point, config_changes, reading_nodes
from selfheal.graph.build import make_context
from selfheal.graph.checkpoint import read_states
from selfheal.graph.table import GRAPH
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.result import HealResult
from selfheal.state import HealState

BASE = {"critic": False, "lessons": False, "adversarial_tests": False, "spec_blind_tests": False}
"""One candidate a round, no optional role: the first version fails the example, the debugger
diagnoses, the repair passes."""


def base_run(pool: KernelPool) -> tuple[HealResult, list[HealState]]:
    mock = MockProvider({"generator": [s.BROKEN, s.GOOD], "debugger": [s.DIAG_CODE]})
    result = heal(s.SPEC, provider=mock, config=s.chain(**BASE), executor=pool)
    assert result.status == "verified" and result.path is not None
    return result, read_states(Path(result.path))


def nodes(result: HealResult) -> list[str]:
    return [e.node for e in result.timeline if e.kind == "end"]


def go_on(state: HealState, script: dict[str, list[str]], pool: KernelPool) -> HealResult:
    ctx = make_context(state.config, MockProvider(script), spec=state.spec.text, executor=pool)
    return Run.new(state, ctx).run()


def test_the_same_config_never_parts(pool: KernelPool) -> None:
    _, history = base_run(pool)
    assert branch_point(history, s.chain(**BASE)) is None


def test_a_critic_branches_where_select_would_have_finished(pool: KernelPool) -> None:
    base, history = base_run(pool)
    start = branch_point(history, s.chain(**{**BASE, "critic": True}))
    assert start is not None
    assert start.next == "critic" and start.config.selection.critic
    assert start.parent is not None and start.parent.run_id == base.run_id
    assert start.parent.changes == ("config.critic",)
    assert start.run_id != base.run_id
    # it starts from the base's last selection: everything before it is shared
    assert [c.code for c in start.candidates] == [c.code for c in base.candidates]
    result = go_on(start, {"critic": [s.ACCEPT]}, pool)
    assert nodes(result) == nodes(base)[:-1] + ["critic", "finish"]
    assert result.status == "verified" and result.code == base.code
    assert result.state.reviews[0].verdict == "accept"
    # the timeline and the usage carry the shared part: one model call more than the base
    assert result.usage.calls == base.usage.calls + 1


def test_lessons_branch_after_the_diagnosis_and_reach_the_repair(pool: KernelPool) -> None:
    _, history = base_run(pool)
    start = branch_point(history, s.chain(**{**BASE, "lessons": True}))
    assert start is not None and start.next == "lessons"
    assert len(start.diagnoses) == 1 and len(start.attempts) == 1
    result = go_on(start, {"lessons": [s.LESSONS], "generator": [s.GOOD]}, pool)
    assert result.lessons == ("Clamp from below with max(lo, x).",)
    assert result.status == "verified"
    assert nodes(result).count("diagnose") == 1  # the diagnosis was not asked again


def test_a_switch_read_inside_a_node_branches_where_that_node_runs(pool: KernelPool) -> None:
    """``debugger_steps`` changes what ``diagnose`` does, not where a route goes: READ_BY
    names the node, so the branch starts right before the diagnosis."""
    _, history = base_run(pool)
    start = branch_point(history, s.chain(**{**BASE, "debugger_steps": 2}))
    assert (
        start is not None and start.next == "diagnose" and start.config.repairs.debugger_steps == 2
    )
    assert not start.diagnoses and len(start.attempts) == 1


def test_a_switch_every_node_reads_branches_at_the_start(pool: KernelPool) -> None:
    """Another model or another sandbox limit changes everything: nothing is shared."""
    _, history = base_run(pool)
    for change in ({"model": "other-model"}, {"test_timeout": 3.0}):
        start = branch_point(history, s.chain(**{**BASE, **change}))
        assert start is not None and start.next == history[0].next
        assert not start.candidates and start.usage.calls == 0


def test_read_by_names_every_setting_and_only_real_nodes() -> None:
    assert set(READ_BY) == set(FIELD_GROUP) == set(HealConfig().flat())
    graph_nodes = set(GRAPH)
    for setting, nodes in READ_BY.items():
        assert set(nodes) <= graph_nodes | {"*"}, setting
    assert reading_nodes(("config.critic", "config.top_up")) == frozenset()
    assert reading_nodes(("config.diagnosis", "config.debugger_steps")) == {"diagnose", "repair"}
    assert reading_nodes(("config.critic", "config.model")) is None


def test_a_smaller_iteration_budget_branches_at_the_first_selection(pool: KernelPool) -> None:
    _, history = base_run(pool)
    start = branch_point(history, s.chain(**{**BASE, "max_iterations": 1}))
    assert start is not None and start.next == "finish" and len(start.attempts) == 1
    result = go_on(start, {}, pool)
    assert result.status == "exhausted" and result.iterations == 1


def test_a_spent_token_budget_branches_where_it_runs_out(pool: KernelPool) -> None:
    base, history = base_run(pool)
    start = branch_point(history, s.chain(**{**BASE, "token_budget": 1}))
    assert start is not None and start.usage.total_tokens >= 1
    assert start.usage.total_tokens < base.usage.total_tokens
    result = go_on(start, {}, pool)
    assert "token budget spent" in (result.state.stop_reason or "")


def test_config_changes_name_each_setting() -> None:
    changes = config_changes(s.chain(), s.chain(critic=False, lessons=False))
    assert set(changes) == {"config.lessons", "config.critic"}
