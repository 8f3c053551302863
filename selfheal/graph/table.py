"""The pipeline as one table: each node, the coroutine ``(state, ctx) -> state`` it runs, its
model calls, and its route (``state -> next node``, reading only the state); docs/loop.md."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from selfheal.config import candidates_of
from selfheal.context import Context
from selfheal.graph.ask import ask
from selfheal.graph.execute import execute
from selfheal.graph.gate import finish, gate
from selfheal.graph.recall import recall, remember
from selfheal.graph.select import select
from selfheal.questions import ask_due
from selfheal.roles.adversary import adversarial
from selfheal.roles.critic import critic
from selfheal.roles.debugger import diagnose
from selfheal.roles.generator import generate, repair
from selfheal.roles.lessons import summarize
from selfheal.roles.oracle import consult, open_questions
from selfheal.roles.test_writer import plan_tests
from selfheal.state import HealState, NodeName
from selfheal.testsuite import all_active_pass

Node = Callable[[HealState, Context], Awaitable[HealState]]
Route = Callable[[HealState], NodeName]


# -- routes -----------------------------------------------------------------------------------


def can_repair(s: HealState) -> bool:
    return s.config.repairs.repair and s.iteration < s.config.repairs.max_iterations


def _when_passing(s: HealState) -> NodeName:
    rejections = sum(1 for r in s.reviews if r.verdict == "reject")
    reviewed_now = any(r.iteration == s.iteration and r.verdict == "accept" for r in s.reviews)
    if (
        s.config.selection.critic
        and not reviewed_now
        and rejections < s.config.selection.critic_rounds
    ):
        return "critic"
    return "finish"


def after_generate(s: HealState) -> NodeName:
    return "finish" if s.status == "failed" else "gate"


def after_gate(s: HealState) -> NodeName:
    if s.status == "awaiting_approval":
        return "gate"  # the runner stops here until a decision is applied
    if not s.config.tests.run_tests:
        return "finish"
    first = s.iteration == 1 and not any(t.origin == "adversarial" for t in s.tests)
    if first and s.config.tests.adversarial_tests and s.config.tests.max_adversarial_tests > 0:
        return "adversarial"
    return "execute"


def _can_top_up(s: HealState) -> bool:
    """The first round has asked for fewer than ``candidates`` independent answers. A human's
    edit of a first-round proposal takes the place of the answer it replaced (it counts), so a
    reviewer who edits every proposal does not make the round ask again forever."""
    asked = sum(1 for c in s.candidates if c.round == 1 and c.origin in ("greedy", "sample"))
    edited = sum(1 for c in s.candidates if c.round == 1 and c.origin == "human_edit")
    # a fork that starts from a human's code alone (no model answer yet) is not topped up
    return s.iteration == 1 and asked > 0 and asked + edited < candidates_of(s.config)


def _settled_early(s: HealState) -> bool:
    """The first small sample is enough: the greedy answer passes every trusted test, every
    candidate so far does too, and they all agree on every probe."""
    ev = s.evidence
    if ev is None or ev.failing or not ev.trusted_total:
        return False
    greedy_ok = any(c.origin == "greedy" and c.cluster == 0 for c in s.candidates)
    return greedy_ok and ev.passing == ev.candidates and len(ev.clusters) == 1


def after_select(s: HealState) -> NodeName:
    ev = s.evidence
    if s.stop_reason or ev is None:
        return "finish"
    if ev.failing:  # no candidate passes every trusted test, or the winner fails a credible test
        if _can_top_up(s):
            return "generate"  # fresh samples before repairs: cheaper and more diverse
        if ask_due(
            s
        ):  # every candidate fails the model's test, and nothing trusted says who is right
            return "ask"
        return "diagnose" if can_repair(s) else "finish"
    if s.config.generation.top_up == "to_agree" and _can_top_up(s) and not _settled_early(s):
        return "generate"
    if not ev.trusted_total and all(c.origin == "user" for c in s.candidates):
        return "generate"  # your code passes nothing that could show it right: ask the model
    if ask_due(s):  # the candidates disagree and nothing trusted separates them: ask you
        return "ask"
    if open_questions(s):  # a tie, or a critic's counterexample that separates the candidates
        return "consult"
    return _when_passing(s)


def after_ask(s: HealState) -> NodeName:
    """Your answer made a trusted test: run it on every candidate; otherwise on as if the run
    had not asked."""
    last = s.questions[-1] if s.questions else None
    made = last.test_id if last is not None else None
    unrun = made is not None and any(
        c.report is not None and made not in {r.test_id for r in c.report.results}
        for c in s.candidates
    )
    if made is not None and s.test(made) is not None and unrun:
        return "execute"
    return after_select(s)


def after_diagnose(s: HealState) -> NodeName:
    report = s.current.report if s.current else None
    if all_active_pass(s, report):  # the failing tests were quarantined
        return "select"
    if not can_repair(s):
        return "finish"
    return "lessons" if s.config.repairs.lessons else "repair"


def after_critic(s: HealState) -> NodeName:
    """A rejection backed by tests runs them on every candidate (they count only through the
    tournament: a cluster that agrees against them disputes them, the oracle judges a lone
    candidate's failure); an opinion without a test is advice and ends the run."""
    last = s.reviews[-1]
    if last.verdict == "reject" and (last.added_tests or last.counterexample):
        return "execute"
    return "finish"


def after_repair(s: HealState) -> NodeName:
    return "finish" if s.status == "failed" or s.pending is None else "gate"


def after_decision(s: HealState) -> NodeName:
    """Where a run goes once a human decision has been applied."""
    rejected = bool(s.decisions) and s.decisions[-1].kind == "reject"
    if s.pending is None and s.status == "running" and rejected:
        rejects = sum(1 for d in s.decisions if d.kind == "reject")
        if rejects >= s.config.repairs.max_iterations:
            return "finish"
        return "repair" if s.attempts else "generate"
    return after_gate(s)


async def finish_and_remember(s: HealState, ctx: Context) -> HealState:
    """``finish``, then the run's lessons and verified solution go into the memory."""
    return await remember(finish(s, ctx), ctx)


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One row: a node, where it may go next, and the route that picks among those."""

    name: NodeName
    run: Node
    next: tuple[NodeName, ...]
    """Every node the route may answer (``done`` ends the run). The runner checks each answer
    against it, and ``scripts/graph_diagram.py`` draws the graph from it."""
    route: Route | None = None
    """Picks the next node from the new state; None when ``next`` names a single node."""
    calls: tuple[str, ...] = ()
    """Every model call the node makes, as ``role`` or ``role: what for`` (the diagram shows
    them; a test checks a scripted run's calls against them)."""

    def go(self, state: HealState) -> NodeName:
        """The next node for ``state``; a route answering outside ``next`` is a bug, said so."""
        answer = self.next[0] if self.route is None else self.route(state)
        if answer not in self.next:
            raise RuntimeError(
                f"The route of {self.name!r} answered {answer!r}, which is not among its next "
                f"nodes {self.next} in selfheal/graph/table.py: add the edge there or fix the route."
            )
        return answer


GRAPH: dict[str, Step] = {
    s.name: s
    for s in (
        #    node          function     next nodes                                 route
        Step("recall", recall, ("plan_tests",)),
        Step("plan_tests", plan_tests, ("generate",)),
        Step(
            "generate",
            generate,
            ("gate", "finish"),
            after_generate,
            calls=("generator: the population", "test_writer: spec-blind tests or inputs"),
        ),
        Step("gate", gate, ("gate", "adversarial", "execute", "finish"), after_gate),
        Step("adversarial", adversarial, ("execute",), calls=("adversary",)),
        Step("execute", execute, ("select",)),
        Step(
            "select",
            select,
            ("generate", "diagnose", "ask", "consult", "critic", "finish"),
            after_select,
        ),
        Step(
            "ask",
            ask,
            ("execute", "generate", "diagnose", "ask", "consult", "critic", "finish"),
            after_ask,
        ),
        Step("consult", consult, ("select",), calls=("oracle",)),
        Step("critic", critic, ("execute", "finish"), after_critic, calls=("critic",)),
        Step(
            "diagnose",
            diagnose,
            ("select", "lessons", "repair", "finish"),
            after_diagnose,
            calls=(
                "oracle: judges failing model-written tests",
                "debugger: investigation (tool calls)",
                "debugger: the diagnosis",
            ),
        ),
        Step("lessons", summarize, ("repair",), calls=("lessons",)),
        Step("repair", repair, ("gate", "finish"), after_repair, calls=("generator: repairs",)),
        Step("finish", finish_and_remember, ("done",)),
    )
}

START: NodeName = "recall"
"""Where every run begins."""

AFTER_DECISION: tuple[NodeName, ...] = tuple(
    dict.fromkeys(("generate", "repair", "finish", *GRAPH["gate"].next))
)
"""Where ``after_decision`` may send a run once a human answered at the gate."""


def _validate(graph: dict[str, Step]) -> None:
    """Every edge names a node of the table (or ``done``), a row without a route has exactly
    one next node, and every node can be reached from ``START``."""
    known = {*graph, "done"}
    for step in graph.values():
        unknown = [n for n in step.next if n not in known]
        if unknown:
            raise RuntimeError(f"Step {step.name!r} goes to unknown node(s) {unknown}.")
        if step.route is None and len(step.next) != 1:
            raise RuntimeError(f"Step {step.name!r} has several next nodes and no route.")
    unknown = [n for n in AFTER_DECISION if n not in known]
    if unknown:
        raise RuntimeError(f"after_decision goes to unknown node(s) {unknown}.")
    seen, todo = {START}, [START]
    while todo:
        here = todo.pop()
        edges = graph[here].next + (AFTER_DECISION if here == "gate" else ())
        for n in edges:
            if n != "done" and n not in seen:
                seen.add(n)
                todo.append(n)
    unreachable = sorted(set(graph) - seen)
    if unreachable:
        raise RuntimeError(f"Node(s) {unreachable} cannot be reached from {START!r}.")


_validate(GRAPH)
