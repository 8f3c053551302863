"""The examples a spec writes in its other forms: named inputs, Input/Output blocks, comments,
``f(x) = y`` lines, and ``true``/``false`` values. Each one becomes a trusted test, so what is
not clearly an example must not become one."""

from __future__ import annotations

import scripted as s

from selfheal import heal
from selfheal.example_hints import unread_examples
from selfheal.examples import example_assert, find_examples
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.spec import parse_spec


def _pairs(text: str, name: str | None = None) -> list[tuple[str, str]]:
    return [(e.call, e.expected) for e in parse_spec(text, entry_point=name).examples]


def test_named_inputs_in_the_signatures_order() -> None:
    spec = (
        "def reverse_delete(s, c):\n    '''Delete from s the characters in c.\n"
        '    For s = "abcde", c = "ae", the result should be (\'bcd\',False)\n'
        '    For c = "b", s = "abcdef" the output should be (\'acdef\', False).\n'
        "    For s = \"abc\", k = 1 the output should be 'x'\n    '''\n"
    )
    assert _pairs(spec) == [
        ('reverse_delete("abcde", "ae")', "('bcd',False)"),
        ('reverse_delete("abcdef", "b")', "('acdef', False)"),
    ]  # the third names a parameter the function does not have


def test_named_inputs_followed_by_prose() -> None:
    spec = (
        "def solve(N):\n    '''Binary digit sum.\n"
        '        For N = 1000, the sum of digits will be 1 the output should be "1".\n'
        "        For lst = [1,2,3] the output should be 14\n    '''\n"
    )
    assert _pairs(spec) == [("solve(1000)", '"1"')]


def test_named_inputs_after_for_example() -> None:
    spec = (
        "def fact(n):\n    '''n!. For example, for n = 5 the output should be 120.\n"
        "    For each n = 0 the result should be 1\n    '''\n"
    )
    assert _pairs(spec) == [("fact(5)", "120")]


def test_input_output_blocks() -> None:
    spec = (
        "def maximum(arr, k):\n    '''The k largest, sorted.\n"
        "    Example 1:\n        Input: arr = [-3, -4, 5], k = 3\n        Output: [-4, -3, 5]\n"
        "    Example 2:\n\n        Input: [4, -4, 4], 2\n\n        Output: [4, 4] # both fours\n"
        "    Example 3:\n        Input: \n            arr : [1]\n        Output: [1]\n"
        "    Example 4:\n        Input: [1, 2]\n        Explanation: one argument is missing\n"
        "        Output: [2]\n    '''\n"
    )
    assert _pairs(spec) == [
        ("maximum([-3, -4, 5], 3)", "[-4, -3, 5]"),
        ("maximum([4, -4, 4], 2)", "[4, 4]"),
    ]


def test_one_positional_input() -> None:
    spec = (
        "def even_odd_palindrome(n):\n    '''Counts.\n    Example 1:\n\n        Input: 3\n"
        "        Output: (1, 2)\n        Explanation: 1, 2, 3.\n    '''\n"
    )
    assert _pairs(spec) == [("even_odd_palindrome(3)", "(1, 2)")]


def test_comment_arrows_and_lowercase_booleans() -> None:
    spec = (
        "def f(x, y):\n    '''Checks.\n"
        '    f(15, 1)   # returns "db1111db"\n'
        "    f(1, 4) => true\n    f(3, 2) => false\n"
        "    f(\"1example.dll\", 0) # => 'No' (the name should start with a letter)\n    '''\n"
    )
    assert _pairs(spec) == [
        ("f(15, 1)", '"db1111db"'),
        ("f(1, 4)", "True"),
        ("f(3, 2)", "False"),
        ('f("1example.dll", 0)', "'No'"),
    ]


def test_equals_lines_of_one_kind_are_examples() -> None:
    spec = (
        "def solve(s):\n    '''Swap case.\n"
        '    solve("1234") = "4321"\n    solve("#a@C") = "#A@c"\n    '
        'solve("x") = "X" when x is a letter\n    \'\'\'\n'
    )
    examples = parse_spec(spec).examples
    assert [(e.call, e.expected) for e in examples] == [
        ('solve("1234")', '"4321"'),
        ('solve("#a@C")', "'#A@c'"),
    ]  # a value followed by prose is not read from an `=` line
    assert example_assert(examples[1]) == "assert solve(\"#a@C\") == '#A@c'"


def test_equals_lines_of_mixed_kinds_are_dropped() -> None:
    """HumanEval/130: ``tri(4) = 3`` is about the sequence; the function returns a list."""
    spec = (
        "def tri(n):\n    '''Tribonacci.\n    tri(1) = 3\n    tri(2) = 1 + (2 / 2) = 2\n"
        "    tri(4) = 3\n    tri(3) = tri(2) + tri(1) + tri(4)\n"
        "    Examples:\n    tri(3) = [1, 3, 2, 8]\n    '''\n"
    )
    assert _pairs(spec) == []


def test_arrows_keep_their_examples_beside_mixed_equals_lines() -> None:
    spec = "def g(n):\n    '''g(1) -> [1]\n    g(2) = 5\n    '''\n"
    assert _pairs(spec) == [("g(1)", "[1]")]


def test_plain_language_spec_has_no_named_inputs() -> None:
    """Without a ``def`` the parameters are unknown, so named inputs are not read."""
    assert find_examples("Write f. For x = 3 the output should be 9.", "f") == ()


def test_example_looking_lines_that_were_not_read() -> None:
    spec = "def is_happy(s):\n    '''Happy strings.\n    is_happy(a) => False\n    is_happy(aa) => False\n    '''\n"
    unread = unread_examples(parse_spec(spec))
    assert [u.example for u in unread] == ["is_happy(a) => False", "is_happy(aa) => False"]
    assert "the argument `a` uses the name `a`" in unread[0].why
    assert "a string needs quotes: 'a'" in unread[0].why
    # an example that could not be read is reported beside one that was
    read = parse_spec(spec + "    is_happy('abc') => True\n")
    assert [u.example for u in unread_examples(read)] == [u.example for u in unread]
    # lines in no form selfheal reads are reported only when no example was read
    block = "def f(x):\n    '''Doubles.\n    Input: x = y\n    Output: 3\n    '''\n"
    assert [u.example for u in unread_examples(parse_spec(block))] == ["Input: x = y", "Output: 3"]
    assert unread_examples(parse_spec(block + "f(1) -> 3\n")) == []
    assert unread_examples(parse_spec("def f(x):\n    '''Return x. f is pure.'''\n")) == []


def test_a_run_says_which_lines_looked_like_examples(pool: KernelPool) -> None:
    spec = "def clamp(x, lo, hi):\n    '''Limit x to [lo, hi].\n    clamp(x, 0, 3) => 3\n    '''\n"
    result = heal(
        spec,
        provider=MockProvider({"generator": [s.GOOD]}),
        config=s.chain(spec_blind_tests=False, critic=False, adversarial_tests=False),
        executor=pool,
    )
    said = [e.detail for e in result.timeline if e.node == "plan_tests" and e.kind == "info"]
    assert any(
        d.startswith(
            "no example of the spec read as a trusted test; `clamp(x, 0, 3) => 3` "
            "could not be read: the argument `x` uses the name `x`"
        )
        for d in said
    ), said
    assert result.status == "unverified"
    assert "`clamp(x, 0, 3) => 3` could not be read: the argument `x`" in result.evidence.summary
    assert "write it as" not in result.evidence.summary  # the user wrote that form already
