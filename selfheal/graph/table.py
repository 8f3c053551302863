"""The pipeline as one table: each node, the pure function it runs, and where it goes next.

    plan_tests ─▶ generate ─▶ gate ─▶ adversarial ─▶ execute ─┬─ pass ─▶ critic ─┬─ accept ─▶ finish
                     ▲          ▲                     ▲        │                  ├─ tests ──▶ execute
                     │ reject   │                     │        │                  └─ concerns ▶ lessons
                     │          └──── repair ◀── lessons ◀── diagnose ◀─ fail ────┘
                     └─ (review_all: a human answers at the gate)

A node is ``(state, ctx) -> state``; a route is ``state -> next node name``. Routing reads
only the state, so every path can be tested by scripting the provider.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from selfheal.graph.context import Context
from selfheal.graph.gate import finish, gate
from selfheal.roles.adversary import adversarial
from selfheal.roles.critic import critic
from selfheal.roles.debugger import diagnose
from selfheal.roles.executor import execute
from selfheal.roles.generator import generate, repair
from selfheal.roles.lessons import summarize
from selfheal.roles.test_writer import plan_tests
from selfheal.roles.testcode import all_active_pass
from selfheal.state import HealState, NodeName

Node = Callable[[HealState, Context], HealState]
Route = Callable[[HealState], NodeName]


# -- routes -----------------------------------------------------------------------------------


def can_repair(s: HealState) -> bool:
    return s.config.repair and s.iteration < s.config.max_iterations


def _to_repair(s: HealState) -> NodeName:
    return "lessons" if s.config.lessons else "repair"


def _when_passing(s: HealState) -> NodeName:
    rejections = sum(1 for r in s.reviews if r.verdict == "reject")
    reviewed_now = any(r.iteration == s.iteration and r.verdict == "accept" for r in s.reviews)
    if s.config.critic and not reviewed_now and rejections < s.config.critic_rounds:
        return "critic"
    return "finish"


def after_generate(s: HealState) -> NodeName:
    return "finish" if s.status == "failed" else "gate"


def after_gate(s: HealState) -> NodeName:
    if s.status == "awaiting_approval":
        return "gate"  # the runner stops here until a decision is applied
    if not s.config.run_tests:
        return "finish"
    first = s.iteration == 1
    if first and s.config.adversarial_tests and s.config.max_adversarial_tests > 0:
        return "adversarial"
    return "execute"


def after_execute(s: HealState) -> NodeName:
    report = s.current.report if s.current else None
    if all_active_pass(s, report):
        return _when_passing(s)
    return "diagnose" if can_repair(s) else "finish"


def after_diagnose(s: HealState) -> NodeName:
    report = s.current.report if s.current else None
    if all_active_pass(s, report):  # the failing tests were quarantined
        return _when_passing(s)
    return _to_repair(s) if can_repair(s) else "finish"


def after_critic(s: HealState) -> NodeName:
    last = s.reviews[-1]
    if last.verdict == "accept":
        return "finish"
    if last.added_tests:
        return "execute"
    has_concerns = (
        bool(s.diagnoses)
        and s.diagnoses[-1].source == "critic"
        and s.diagnoses[-1].iteration == s.iteration
    )
    return _to_repair(s) if has_concerns and can_repair(s) else "finish"


def after_repair(s: HealState) -> NodeName:
    return "finish" if s.status == "failed" or s.pending is None else "gate"


def after_decision(s: HealState) -> NodeName:
    """Where a run goes once a human decision has been applied."""
    if (
        s.pending is None
        and s.status == "running"
        and s.decisions
        and s.decisions[-1].kind == "reject"
    ):
        rejects = sum(1 for d in s.decisions if d.kind == "reject")
        if rejects >= s.config.max_iterations:
            return "finish"
        return "repair" if s.attempts else "generate"
    return after_gate(s)


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One row: a node and its outgoing edge."""

    name: NodeName
    run: Node
    route: Route
    role: str = ""


GRAPH: dict[str, Step] = {
    s.name: s
    for s in (
        #    node          function      next
        Step("plan_tests", plan_tests, lambda s: "generate", role="test_writer"),
        Step("generate", generate, after_generate, role="generator"),
        Step("gate", gate, after_gate),
        Step("adversarial", adversarial, lambda s: "execute", role="adversary"),
        Step("execute", execute, after_execute),
        Step("critic", critic, after_critic, role="critic"),
        Step("diagnose", diagnose, after_diagnose, role="debugger"),
        Step("lessons", summarize, lambda s: "repair", role="lessons"),
        Step("repair", repair, after_repair, role="generator"),
        Step("finish", finish, lambda s: "done"),
    )
}
