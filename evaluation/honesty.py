"""The honesty rule, checked: no reference assertion reaches the model.

The agent may see the prompt, and HumanEval prompts contain examples that the reference
``check`` often repeats (``>>> f(x)`` doctests, and forms such as ``For x = 3 the output
should be 9``). So a reference assertion is *secret* only when it is not also in the prompt:
neither its normalised text nor (for ``call == value`` assertions) its call appears in the
normalised prompt, and it is not one of the examples ``selfheal.examples`` reads from the
prompt (the same call with the same value; that reader is given the prompt alone, so what it
finds is public). Assertions without any literal value (``assert candidate(x) == y`` inside
a loop) carry no data and are not tracked. Every test form counts: ``assert`` lines (in
functions and ``Test*`` classes too), ``unittest``'s ``self.assertEqual(a, b)`` (tracked as
``a == b``, and found in a message in either form) and other ``assert*`` calls.

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


_EQUAL = ("assertEqual", "assertEquals", "assertListEqual", "assertDictEqual",
          "assertTupleEqual", "assertSetEqual", "assertSequenceEqual", "assertCountEqual",
          "assertAlmostEqual", "assert_equal", "assert_array_equal", "assert_allclose",
          "assert_frame_equal", "assert_series_equal")  # fmt: skip
"""Assertion calls whose first two arguments must be equal: read as ``a == b``."""


def _checked(node: ast.AST) -> ast.expr | None:
    """What an assertion checks, in every test form: ``assert X`` is ``X``;
    ``self.assertEqual(a, b)`` (and ``numpy``/``pandas`` ``assert_*equal``) is ``a == b``;
    ``self.assertTrue(x)`` is ``x``; any other ``assert*`` call (``self.assertTrue(x)``, ``self.assertIn(a, b)``) is the call
    itself. None for anything else."""
    if isinstance(node, ast.Assert):
        return node.test
    if not isinstance(node, ast.Call):
        return None
    name = _call_name(node)
    if name in _EQUAL and len(node.args) >= 2:  # no location: its text is ``a == b``
        return ast.Compare(left=node.args[0], ops=[ast.Eq()], comparators=[node.args[1]])
    if name in ("assertTrue", "assertFalse", "assert_") and node.args:
        return node.args[0]
    if name.startswith("assert") and node.args:
        return node
    return None


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def secret_assertions(task: Task) -> list[str]:
    """The task's reference assertions (their source; an ``assertEqual(a, b)`` as ``a == b``)
    that are not part of the prompt."""
    return [text for text, _ in _secrets(task)]


def _secrets(task: Task) -> list[tuple[str, str]]:
    """``secret_assertions`` with, for an assertion call, the call as written without its
    receiver (``assertEqual(add(2, 3), 999)``), a form it may leak in too (else "")."""
    prompt = normalise(task.prompt)
    examples = _prompt_examples(task)
    secrets: list[tuple[str, str]] = []
    for source in task.reference_tests:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            test = _checked(node)
            if test is None or not _has_literal(test):
                continue
            text = ast.get_source_segment(source, test) or ast.unparse(test)
            public = {v for v in _variants(text, task.entry_point) if v in prompt}
            if isinstance(test, ast.Compare) and len(test.ops) == 1:
                call = ast.get_source_segment(source, test.left) or ast.unparse(test.left)
                public |= {v for v in _variants(call, task.entry_point) if v in prompt}
            if _example_key(test, {"candidate", task.entry_point}) in examples:
                public.add(text)
            if not public:
                written = ""
                if isinstance(node, ast.Call):
                    whole = ast.get_source_segment(source, node) or ast.unparse(node)
                    written = whole[whole.index(_call_name(node)) :]
                secrets.append((text, written))
    return secrets


def _found(variants: set[str], haystack: str) -> bool:
    return any(v in haystack for v in variants)


def check_calls(task: Task, calls: Iterable[RecordedCall]) -> HonestyReport:
    """Check every message of every recorded call, in order (see the module docstring)."""
    found = _secrets(task)
    secrets = [s for s, _ in found]
    needles: dict[str, set[str]] = {}
    for s, written in found:
        extra = _variants(written, task.entry_point) if written else set()
        needles[s] = needles.get(s, set()) | _variants(s, task.entry_point) | extra
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
