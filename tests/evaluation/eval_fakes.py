"""Helpers for the evaluation harness tests: an 'oracle' mock model and a wrong solution.

The oracle is selfheal's scriptable ``MockProvider`` with one reply function per role: the
generator answers with a task's canonical solution (or a deliberately wrong one), the other
roles give minimal well-formed replies. No model is needed, so the tests are fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence

from evaluation.suites import Task
from selfheal.llm.base import Message
from selfheal.llm.mock import MockProvider


def wrong_solution(task: Task) -> str:
    return f"def {task.entry_point}(*args, **kwargs):\n    return None\n"


def _find_task(tasks: Sequence[Task], messages: Sequence[Message]) -> Task:
    text = "\n".join(m.content for m in messages)
    for task in tasks:
        if f"`{task.entry_point}" in text or f"def {task.entry_point}(" in text:
            return task
    raise AssertionError("the oracle could not tell which task the prompt is about")


def oracle_provider(
    tasks: Sequence[Task],
    *,
    wrong: Iterable[str] = (),
    tests: Mapping[str, str] | None = None,
) -> MockProvider:
    """A MockProvider whose generator returns the canonical solution of the task named in
    the prompt (a wrong one for ids in ``wrong``). The test writer answers with
    ``tests[task_id]`` (assertion code) or a trivial test that any function passes."""
    wrong_ids = set(wrong)
    own_tests = dict(tests or {})

    def test_writer(messages: Sequence[Message]) -> str:
        task = _find_task(tasks, messages)
        code = own_tests.get(task.id, f"assert callable({task.entry_point})")
        return f"```python\n# why: from the spec\n{code}\n```"

    def generator(messages: Sequence[Message]) -> str:
        task = _find_task(tasks, messages)
        code = wrong_solution(task) if task.id in wrong_ids else task.canonical_solution
        return f"```python\n{code}\n```"

    def adversary(messages: Sequence[Message]) -> str:
        task = _find_task(tasks, messages)
        return f"```python\n# why: the name must stay defined\nassert {task.entry_point} is not None\n```"

    def oracle(messages: Sequence[Message]) -> str:
        # Answers "what does `call` return?" truthfully, by running the canonical solution
        # (trusted test code) in this process.
        task = _find_task(tasks, messages)
        text = messages[-1].content
        call = text.rsplit("what does `", 1)[1].split("` return", 1)[0]
        namespace: dict[str, object] = {}
        exec(task.canonical_solution or "", namespace)
        value = eval(call, namespace)
        return json.dumps({"reasoning": "from the spec", "value": repr(value)})

    def fixed(text: str) -> Callable[[Sequence[Message]], str]:
        return lambda _messages: text

    return MockProvider(
        {
            "generator": [generator] * 1000,
            "test_writer": [test_writer] * 1000,
            "adversary": [adversary] * 1000,
            "debugger": [
                fixed(
                    '{"root_cause": "wrong result", "category": "logic", '
                    '"repair_strategy": "rewrite", "confidence": 0.5, "blame": "code", '
                    '"wrong_tests": []}'
                )
            ]
            * 1000,
            "oracle": [oracle] * 1000,
            "lessons": [fixed('{"lessons": ["read the spec"]}')] * 1000,
            "critic": [fixed('{"verdict": "accept", "concerns": [], "tests": []}')] * 1000,
        },
        name="oracle",
    )
