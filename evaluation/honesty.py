"""The honesty rule, checked: no reference assertion reaches the model.

The agent may see the prompt, and HumanEval prompts contain examples that the reference
``check`` often repeats (``>>> f(x)`` doctests, and forms such as ``For x = 3 the output
should be 9``). So a reference assertion is *secret* only when it is not also in the prompt:
neither its normalised text nor (for ``call == value`` assertions) its call appears in the
normalised prompt, and it is not one of the examples ``selfheal.examples`` reads from the
prompt (the same call with the same value; that reader is given the prompt alone, so what it
finds is public). Assertions without any literal value (``assert candidate(x) == y`` inside
a loop) carry no data and are not tracked.

Normalisation removes all whitespace (and JSON escapes), unifies quotes and renames
HumanEval's ``candidate`` to the task's entry point, so reformatting cannot hide a leak.

The model may of course *write* an assertion that happens to equal a reference one (a
spec-blind test ``assert f([]) == []`` is an obvious guess), and the agent then sends its
own test back in later prompts. That is not a leak: a secret assertion found in a message
counts as a leak only if no earlier reply of the model contained it. Such echoes are
reported separately.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from evaluation.recording import RecordedCall
from evaluation.suites import Task
from selfheal.examples import find_examples
from selfheal.llm.base import Message
from selfheal.records import Record

__all__ = ["HonestyReport", "check_calls", "check_messages", "normalise", "secret_assertions"]


class HonestyReport(Record):
    """Result of checking the messages one run sent to the model."""

    messages_checked: int
    """How many messages were inspected."""
    secret_assertions: int
    """How many reference assertions were secret (not in the prompt)."""
    leaks: tuple[str, ...] = ()
    """Reference assertions found in a message sent to the model that the model had not
    written itself earlier (should always be empty)."""
    echoes: tuple[str, ...] = ()
    """Reference assertions the model wrote on its own and later saw again (not a leak)."""

    @property
    def clean(self) -> bool:
        return not self.leaks


def normalise(text: str) -> str:
    """Drop whitespace and JSON escapes (``\\n``, ``\\"``), unify quotes."""
    text = re.sub(r"\\[ntr]", "", text)
    text = re.sub(r"\\(['\"])", r"\1", text)
    return re.sub(r"\s+", "", text).replace('"', "'")


_DISPLAYS = (ast.List, ast.Tuple, ast.Dict, ast.Set)


def _has_literal(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Constant) and n.value is not None and not isinstance(n.value, bool))
        or isinstance(n, _DISPLAYS)
        for n in ast.walk(node)
    )


def _variants(text: str, entry_point: str) -> set[str]:
    renamed = re.sub(r"\bcandidate\b", entry_point, text)
    return {normalise(text), normalise(renamed)}


def _example_key(test: ast.expr, names: set[str]) -> tuple[str, str] | None:
    """``(arguments, value)`` of ``name(literals) == literal`` with ``name`` in ``names``, as
    reprs of the values (so ``[4,2,3]`` and ``[4, 2, 3]`` are one key); None otherwise."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.Call)
        and isinstance(test.left.func, ast.Name)
        and test.left.func.id in names
        and not test.left.keywords
    ):
        return None
    try:
        args = tuple(ast.literal_eval(a) for a in test.left.args)
        value = ast.literal_eval(test.comparators[0])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return repr(args), repr(value)


def _prompt_examples(task: Task) -> set[tuple[str, str]]:
    """The keys of the examples selfheal reads from the prompt alone."""
    keys = set()
    for ex in find_examples(task.prompt, task.entry_point):
        try:
            test = ast.parse(f"{ex.call} == {ex.expected}", mode="eval").body
        except SyntaxError:
            continue
        key = _example_key(test, {task.entry_point})
        if key is not None:
            keys.add(key)
    return keys


def secret_assertions(task: Task) -> list[str]:
    """The task's reference assertions (their source) that are not part of the prompt."""
    prompt = normalise(task.prompt)
    examples = _prompt_examples(task)
    secrets: list[str] = []
    for source in task.reference_tests:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert) or not _has_literal(node.test):
                continue
            text = ast.get_source_segment(source, node.test) or ast.unparse(node.test)
            public = {v for v in _variants(text, task.entry_point) if v in prompt}
            test = node.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1:
                call = ast.get_source_segment(source, test.left) or ast.unparse(test.left)
                public |= {v for v in _variants(call, task.entry_point) if v in prompt}
            if _example_key(test, {"candidate", task.entry_point}) in examples:
                public.add(text)
            if not public:
                secrets.append(text)
    return secrets


def _found(variants: set[str], haystack: str) -> bool:
    return any(v in haystack for v in variants)


def check_calls(task: Task, calls: Iterable[RecordedCall]) -> HonestyReport:
    """Check every message of every recorded call, in order (see the module docstring)."""
    secrets = secret_assertions(task)
    needles = {s: _variants(s, task.entry_point) for s in secrets}
    produced = ""  # everything the model replied so far, normalised
    leaks: list[str] = []
    echoes: list[str] = []
    count = 0
    for call in calls:
        for message in call.messages:
            count += 1
            haystack = normalise(message.content)
            for secret, variants in needles.items():
                if secret in leaks or secret in echoes or not _found(variants, haystack):
                    continue
                (echoes if _found(variants, produced) else leaks).append(secret)
        if call.completion is not None:
            produced += "\x00" + normalise(call.completion.text)
    return HonestyReport(
        messages_checked=count,
        secret_assertions=len(secrets),
        leaks=tuple(leaks),
        echoes=tuple(echoes),
    )


def check_messages(task: Task, messages: Iterable[Message]) -> HonestyReport:
    """Strict form: any secret reference assertion in any message is a leak."""
    return check_calls(task, [RecordedCall(messages=tuple(messages))])
