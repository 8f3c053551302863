"""No node mutates the state it is given: each returns a new one."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import scripted as s

from selfheal import HealConfig, HealRequest, Pick, Run
from selfheal.graph import table
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.state import HealState


def test_no_node_mutates_its_input(pool: KernelPool, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    for name, row in list(table.GRAPH.items()):

        async def guarded(state: HealState, ctx, _run=row.run, _name=name) -> HealState:  # type: ignore[no-untyped-def]
            before = copy.deepcopy(state.model_dump())
            out = await _run(state, ctx)
            assert state.model_dump() == before, f"node {_name} mutated its input"
            assert out is not state or _name == "none"
            checked.append(_name)
            return out

        monkeypatch.setitem(table.GRAPH, name, dataclasses.replace(row, run=guarded))

    mock = MockProvider(s.every_role())
    result = Run.start(HealRequest(s.SPEC, provider=mock, config=s.chain(), executor=pool)).run()
    assert result.status == "verified"
    # a population whose two clusters tie: the spec oracle is consulted
    tie = MockProvider(
        {
            "generator": [s.BUGGY, s.GOOD],
            "test_writer": [s.NO_TESTS],
            "oracle": [s.oracle_from_truth] * 3,
        }
    )
    # (the memory off: the run above remembered a verified solution that would break the tie)
    config = HealConfig(candidates=2, lessons=False, memory=False)
    tied = Run.start(HealRequest(s.SPEC, provider=tie, config=config, executor=pool)).run()
    assert tied.status == "unverified" and tied.function(-5, 0, 3) == 0
    # the same tie with someone to ask: the ask node runs
    ask_config = HealConfig(candidates=2, lessons=False, memory=False, autonomy="review_repairs")
    asked = Run.start(
        HealRequest(
            s.SPEC,
            provider=MockProvider({"generator": [s.BUGGY, s.GOOD], "test_writer": [s.NO_TESTS]}),
            config=ask_config,
            executor=pool,
            asker=lambda question, _state: Pick(question.choices[-1].output),
        )
    ).run()
    assert asked.state.questions
    assert set(checked) == set(table.GRAPH), (
        f"not every node ran: {set(table.GRAPH) - set(checked)}"
    )


def test_records_are_frozen() -> None:
    from pydantic import ValidationError

    from selfheal.spec import parse_spec

    state = HealState(spec=parse_spec(s.SPEC))
    with pytest.raises(ValidationError):
        state.status = "verified"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        state.config.max_iterations = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        HealConfig(4)  # type: ignore[misc]  # keyword-only
