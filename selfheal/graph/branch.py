"""What-if from a finished run: the first state at which a run with another ``HealConfig`` would
have parted from it (a route answers another node, a node that reads the switch is next, or a
budget is spent), ready to continue from there (paired ablations, docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise

from selfheal.config import FIELD_GROUP, HealConfig, reads_of
from selfheal.config.groups import EVERY
from selfheal.graph.runner import over_budget
from selfheal.graph.table import GRAPH, after_decision
from selfheal.state import ForkInfo, HealState, NodeName, new_run_id

READ_BY: Mapping[str, tuple[str, ...]] = {name: reads_of(name) for name in FIELD_GROUP}
"""For each ``HealConfig`` setting, the nodes whose work it can change while they run (beyond
the routes, which ``branch_point`` asks again): a run with the setting changed parts from a
recorded one no later than the first of these nodes. Derived from the config's groups: each
field's ``Reads``, else its group's ``reads`` (``EVERY``: every node)."""


def reading_nodes(changes: Collection[str]) -> frozenset[str] | None:
    """The nodes that read any of ``changes`` (``config.NAME``, as ``config_changes`` gives
    them) while they run; None when every node does."""
    nodes: set[str] = set()
    for change in changes:
        read = READ_BY[change.removeprefix("config.")]
        if EVERY in read:
            return None
        nodes.update(read)
    return frozenset(nodes)


def config_changes(old: HealConfig, new: HealConfig) -> tuple[str, ...]:
    """The names of the settings ``new`` changes, as ``config.NAME``."""
    a, b = old.flat(), new.flat()
    return tuple(f"config.{k}" for k in a if a[k] != b.get(k))


def _diverges(
    prev: HealState, s: HealState, alt: HealState, reads: Collection[str]
) -> NodeName | None:
    """The node a run with ``alt``'s config goes to from ``s`` when that parts from the
    recorded run, else None."""
    if over_budget(alt) and not over_budget(s):
        return s.next  # the runner stops it there (the budget check comes before any node)
    if len(s.decisions) > len(prev.decisions):
        nxt = after_decision(alt)  # a human's answer was applied between the two states
    else:
        nxt = GRAPH[prev.next].go(alt)
    if nxt != s.next or s.next in reads:
        return nxt
    return None


def _fork_at(
    s: HealState, config: HealConfig, nxt: NodeName, changes: tuple[str, ...]
) -> HealState:
    """``s`` with ``config``, going to ``nxt``: a new run whose parent is ``s``'s run."""
    parent = ForkInfo(run_id=s.run_id, at_iteration=s.iteration, changes=changes)
    update = {"config": config, "next": nxt, "run_id": new_run_id(), "parent": parent}
    return s.model_copy(update=update)


def branch_point(history: Sequence[HealState], config: HealConfig) -> HealState | None:
    """The state a run with ``config`` continues from: the first state of ``history`` (a run,
    oldest first) from which it would have gone another way, with ``config`` and the node it
    goes to next, a new run id and the run as its parent. None when it would have done exactly
    what the run did (no state parts)."""
    if not history:
        return None
    recorded = history[0].config.generation.candidates
    if config.generation.candidates == "auto" and isinstance(recorded, int):
        # auto: what the run's backend gave, which the run resolved and recorded
        config = config.changed(candidates=recorded)
    changes = config_changes(history[0].config, config)
    read = reading_nodes(changes)

    first = history[0]
    spent = over_budget(first.model_copy(update={"config": config}))
    if read is None or first.next in read or spent:
        return _fork_at(first, config, first.next, changes or ("config",))
    for prev, s in pairwise(history):
        if s.finished or prev.next == "done":
            break
        alt = s.model_copy(update={"config": config})
        nxt = _diverges(prev, s, alt, read)
        if nxt is not None:
            return _fork_at(s, config, nxt, changes or ("config",))
    return None


def question_point(history: Sequence[HealState], config: HealConfig) -> HealState | None:
    """The state a run that could ask you (with ``config``: an asker given, ``autonomy`` not
    ``full_auto``) continues from: the first state of ``history`` (a run without an asker)
    where its route would have gone to ``ask``, ready to ask. None when no question would have
    been open: the run would have done what the recorded one did. Up to that state the two
    runs share every answer (the gate's approvals aside, which an approving ``on_headless``
    grants unasked), so a question's effect is measured without the noise of fresh samples."""
    for prev, s in pairwise(history):
        if s.finished or prev.next == "done":
            break
        alt = s.model_copy(update={"config": config, "can_ask": True})
        if GRAPH[prev.next].go(alt) == "ask":
            changes = config_changes(history[0].config, config) or ("can_ask",)
            return _fork_at(alt, config, "ask", changes)
    return None
