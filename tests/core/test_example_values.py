"""Examples as notebook users write them (issue 44, item 1): values of any kind that can be
built without the candidate (dates, Decimals, DataFrames, arrays, sets, nested containers), in
every form (arrows, "returns", ``==``, ``e.g.``, several on a line, doctests, tables), floats
with a stated tolerance, and a message that quotes the example it could not read and says why.

DataFrame and array examples are checked here on the host (what is read and the test it
produces), not run in a kernel: comparing them with ``==`` is the harness's business."""

from __future__ import annotations

import pytest
import scripted as s

from selfheal import heal
from selfheal.example_hints import no_trusted_test, unread_examples
from selfheal.examples import example_assert
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.spec import parse_spec


def _tests(text: str) -> list[str]:
    return [example_assert(e) for e in parse_spec(text).examples]


KINDS = [
    (
        "f('05/03/2024') -> datetime.date(2024, 3, 5)",
        "import datetime\nassert f('05/03/2024') == datetime.date(2024, 3, 5)",
    ),
    (
        "f('1.10') -> Decimal('1.10')",
        "from decimal import Decimal\nassert f('1.10') == Decimal('1.10')",
    ),
    (
        "f(pd.DataFrame({'a': [1, 2]})) -> pd.DataFrame({'a': [2, 4]})",
        "import pandas as pd\nassert f(pd.DataFrame({'a': [1, 2]})) == pd.DataFrame({'a': [2, 4]})",
    ),
    (
        "f(np.array([1, 2])) -> np.array([2, 4])",
        "import numpy as np\nassert f(np.array([1, 2])) == np.array([2, 4])",
    ),
    ("f([3, 1, 3]) -> {1, 3}", "assert f([3, 1, 3]) == {1, 3}"),
    ("f(2) -> (1, -2)", "assert f(2) == (1, -2)"),
    ("f(-3) -> {'a': [1, (2, 3)], 'b': None}", "assert f(-3) == {'a': [1, (2, 3)], 'b': None}"),
    ("f('a -> b') -> ('a', 'b')", "assert f('a -> b') == ('a', 'b')"),
    ("f(3) -> [i * i for i in range(3)]", "assert f(3) == [i * i for i in range(3)]"),
    (
        "f(datetime(2024, 1, 31)) -> datetime(2024, 2, 29)",
        "from datetime import datetime\nassert f(datetime(2024, 1, 31)) == datetime(2024, 2, 29)",
    ),
    (
        "f(Fraction(1, 3)) -> Fraction(2, 3)",
        "from fractions import Fraction\nassert f(Fraction(1, 3)) == Fraction(2, 3)",
    ),
]
"""An example of each kind of value, and the test it becomes."""


def test_values_of_every_kind() -> None:
    for example, test in KINDS:
        assert _tests(f"Write a function f(x). Example: {example}") == [test], example


FORMS = [
    "Write a function f(n). f(2) -> 4",
    "Write a function f(n). f(2) => 4",
    "Write a function f(n). f(2) returns 4.",
    "Write a function f(n). f(2) == 4",
    "Write a function f(n) that doubles, e.g. f(2) -> 4 for a small number.",
    "Write a function f(n). `f(2)` → `4`",
    "Write a function f(n).\n\n| n | f(n) |\n|---|---|\n| 2 | 4 |\n",
    "Write a function f(n).\n\ninput | output\n--- | ---\n`2` | `4`\n",
    "def f(n):\n    '''Doubles.\n    >>> f(2)\n    4\n    '''\n",
    "Write a function `f(n: int) -> int` that doubles n (2 -> 4).",
]
"""The same example in each form a spec writes it."""


def test_every_form() -> None:
    for spec in FORMS:
        assert _tests(spec) == ["assert f(2) == 4"], spec
    several = "Write a function f(n) that doubles n: f(1) -> 2, f(2) -> 4; f(3) -> 6."
    assert _tests(several) == ["assert f(1) == 2", "assert f(2) == 4", "assert f(3) == 6"]
    sentences = "Write a function f(n). f(2) -> 4.5. Then f(3) -> 6.5. mean(1.5. x) -> 2"
    assert _tests(sentences) == ["assert f(2) == 4.5", "assert f(3) == 6.5"]


def test_examples_without_the_call_for_a_function_of_one_argument() -> None:
    money = (
        "Write `parse_money(text: str, strict: bool = True) -> int`, in cents. Examples: "
        '"$1,234.50" -> 123450, "-$3" -> -300, "($12.5)" -> -1250.'
    )
    assert _tests(money) == [
        'assert parse_money("$1,234.50") == 123450',
        'assert parse_money("-$3") == -300',
        'assert parse_money("($12.5)") == -1250',
    ]
    halves = "Write `r(value: float) -> float` (halves away from zero: 2.5 -> 3.0, -2.5 -> -3.0)."
    assert _tests(halves) == ["assert r(2.5) == 3.0", "assert r(-2.5) == -3.0"]
    # two arguments, no signature, or a type after the arrow: nothing to read
    assert _tests("Write `add(a: int, b: int) -> int`: 2 -> 4.") == []
    assert _tests("Write a function that doubles, e.g. 2 -> 4.") == []
    assert _tests("Write `f(n: int) -> int`; `g(x) -> list` too, and x -> y.") == []
    chain = "Write `reverse(head: Node) -> Node`: 1 -> 2 -> 3 becomes 3 -> 2 -> 1."
    assert _tests(chain) == []


def test_dates_in_prose_and_doctests() -> None:
    spec = (
        "def parse_date(s):\n    '''Parse dd/mm/yyyy, yyyy-mm-dd, ...\n"
        "    e.g. parse_date('05/03/2024') -> datetime.date(2024, 3, 5)\n"
        "    >>> parse_date('2024-03-05')\n    datetime.date(2024, 3, 5)\n    '''\n"
    )
    assert _tests(spec) == [
        "import datetime\nassert parse_date('2024-03-05') == datetime.date(2024, 3, 5)",
        "import datetime\nassert parse_date('05/03/2024') == datetime.date(2024, 3, 5)",
    ]


def test_doctests_keep_multiline_values_and_earlier_names() -> None:
    spec = (
        "def f(df):\n    '''Doubles column a.\n"
        "    >>> import pandas as pd\n"
        "    >>> df = pd.DataFrame({'a': [1, 2]})\n"
        "    >>> f(df)\n    pd.DataFrame({'a': [2, 4]})\n"
        "    >>> f(pd.DataFrame({'a': []}).a)\n    {'a': [],\n     'b': 1}\n    '''\n"
    )
    assert _tests(spec) == [
        "import pandas as pd\nassert f(pd.DataFrame({'a': [1, 2]})) == pd.DataFrame({'a': [2, 4]})",
        "import pandas as pd\nassert f(pd.DataFrame({'a': []}).a) == {'a': [], 'b': 1}",
    ]


def test_doctest_names_whose_value_changed_are_not_put_in_place() -> None:
    spec = (
        "def pop_first(xs):\n    '''Removes and returns the first item.\n"
        "    >>> xs = [3, 1]\n    >>> pop_first(xs)\n    3\n    >>> pop_first(xs)\n    1\n"
        "    >>> df = pd.DataFrame({'a': [1]})\n    >>> df['b'] = 2\n    >>> pop_first(df)\n    1\n"
        "    >>> ys = [5]\n    >>> ys.append(6)\n    >>> pop_first(ys)\n    5\n    '''\n"
    )
    assert _tests(spec) == ["assert pop_first([3, 1]) == 3"]  # the first call only


def test_tables_with_several_arguments() -> None:
    spec = (
        "Write a function add(a, b).\n\n| a | b | add(a, b) | note |\n|---|---|---|---|\n"
        "| 1 | 2 | 3 | small |\n| [1] | [2] | [1, 2] | lists \\| too |\n\n"
        "| input | output |\n| --- | --- |\n| 'x', 'y' | 'xy' |\n"
    )
    assert _tests(spec) == [
        "assert add(1, 2) == 3",
        "assert add([1], [2]) == [1, 2]",
        "assert add('x', 'y') == 'xy'",
    ]


def test_a_one_parameter_table_cell_with_commas_is_one_tuple() -> None:
    spec = "def norm(v):\n    '''Length.\n\n    | v | norm(v) |\n    |---|---|\n    | 3, 4 | 5.0 |\n    '''\n"
    assert _tests(spec) == ["assert norm((3, 4)) == 5.0"]


def test_nan_is_checked_with_isnan() -> None:
    spec = "Write a function mean(xs); mean([]) -> nan, mean([2]) -> float('nan'), m([1]) -> 1"
    assert _tests(spec) == [
        "import math\nassert math.isnan(mean([]))",
        "import math\nassert math.isnan(mean([2]))",
    ]


@pytest.mark.parametrize(
    ("words", "tol"),
    [
        ("rounded to 2 decimals", "0.005"),
        ("within 1e-6", "1e-06"),
        ("approximately", "0.005"),
    ],
)
def test_floats_with_a_stated_tolerance(words: str, tol: str) -> None:
    spec = f"Write a function mean(xs) that returns the mean, {words}. mean([1, 2, 2]) -> 1.67"
    assert _tests(spec) == [
        f"import math\nassert math.isclose(mean([1, 2, 2]), 1.67, abs_tol={tol})"
    ]
    # no tolerance stated, or a value that is not a float: compared exactly
    assert _tests("Write a function mean(xs). mean([1, 2, 2]) -> 1.67") == [
        "assert mean([1, 2, 2]) == 1.67"
    ]
    assert _tests(f"Write a function n(xs), {words}. n([1]) -> 1") == ["assert n([1]) == 1"]
    days = "Write a function due(d) for dates within 5 days. due(1.5) -> 2.5"
    assert _tests(days) == ["assert due(1.5) == 2.5"]  # a distance is not a tolerance


@pytest.mark.parametrize(
    ("example", "why"),
    [
        ("f(1) -> foo(3)", "the expected value calls `foo`, which the candidate would define"),
        ("f(1) -> f(0) + 1", "the expected value calls `f`, which the candidate would define"),
        ("f(x) -> 3", "the argument `x` uses the name `x`"),
        ("f(1) -> (lambda: 3)()", "the expected value uses a lambda"),
        ("f(1) -> ().__class__", "the expected value uses the attribute `__class__`"),
        ("f(1) -> pd.read_csv('data.csv')", "the expected value uses `pd.read_csv`, which is not"),
        (
            "f(1) -> pd.DataFrame({'a': [1]}).to_csv('a.csv')",
            "the expected value uses `to_csv`, which reads or writes files",
        ),
        ("f(1) -> np.load('a.npy')", "the expected value uses `np.load`, which is not among"),
        (
            "f(1) -> datetime(2024, 1, 1) - datetime.timedelta(1)",
            "the expected value uses `datetime` both as the module",
        ),
    ],
)
def test_values_that_need_the_candidate_or_more_are_not_read(example: str, why: str) -> None:
    spec = parse_spec(f"Write a function f(x). Example: {example}")
    assert spec.examples == ()
    [unread] = unread_examples(spec)
    assert (unread.example, unread.why[: len(why)]) == (example, why)


def test_the_message_quotes_the_example_and_says_why() -> None:
    spec = parse_spec("Write a function f(x) that doubles x. Example: f(1) -> foo(3), or so.")
    [unread] = unread_examples(spec)
    assert unread.example == "f(1) -> foo(3)"
    assert unread.why == (
        "the expected value calls `foo`, which the candidate would define; write the value itself"
    )
    summary = no_trusted_test(spec)
    assert summary == (
        "no trusted test (`f(1) -> foo(3)` could not be read: the expected value calls `foo`, "
        "which the candidate would define; write the value itself)"
    )
    assert "write it as" not in summary  # the user wrote the `f(args) -> value` form already


def test_the_message_for_a_doctest_quotes_it() -> None:
    spec = parse_spec(
        "def f(df):\n    '''Doubles.\n    >>> f(frame)\n    3\n    >>> f(pd.DataFrame({'a': [1]}))\n"
        "       a\n    0  2\n    '''\n"
    )
    assert [(u.example, u.why.split(";")[0]) for u in unread_examples(spec)] == [
        (
            ">>> f(frame)",
            "the argument `frame` uses the name `frame`, which an example cannot refer to",
        ),
        (
            ">>> f(pd.DataFrame({'a': [1]}))",
            "the expected output `a 0  2` is not a Python expression",
        ),
    ]


def test_no_hint_about_examples_when_the_spec_has_none() -> None:
    for text in (
        "Write a function parse_date(s) that returns a datetime.date for each of 4 formats.",
        "Write a function mean(values) -> float that returns the mean of values.",
        "Write a function top(xs) that returns the largest, e.g. top([3, 1]) is the first.",
    ):
        spec = parse_spec(text)
        assert (spec.examples, unread_examples(spec)) == ((), []), text
        assert no_trusted_test(spec) == "no trusted test (add an example to the spec to verify)"
    # a rule written with an arrow is not an unread example; the example beside it is read
    rule = parse_spec("def fib4(n):\n    '''fib4(n) -> fib4(n-1) + fib4(n-2), fib4(0) -> 0.'''\n")
    assert ([e.call for e in rule.examples], unread_examples(rule)) == (["fib4(0)"], [])


PARSE_DATE = s.block(
    """
import datetime

def parse_date(s):
    for fmt in ("%d/%m/%Y", "%Y-%m-%d"):
        try:
            return datetime.datetime.strptime(s, fmt).date()
        except ValueError:
            pass
    raise ValueError(s)
"""
)


def test_a_date_example_is_one_trusted_test_in_a_run(pool: KernelPool) -> None:
    spec = (
        "Write a function parse_date(s) that reads dd/mm/yyyy or yyyy-mm-dd. "
        "e.g. parse_date('05/03/2024') -> datetime.date(2024, 3, 5)"
    )
    result = heal(
        spec,
        provider=MockProvider({"generator": [PARSE_DATE]}),
        config=s.chain(spec_blind_tests=False, critic=False, adversarial_tests=False),
        executor=pool,
    )
    trusted = [t for t in result.tests if t.trusted]
    assert [(t.origin, t.code) for t in trusted] == [
        ("example", "import datetime\nassert parse_date('05/03/2024') == datetime.date(2024, 3, 5)")
    ]
    assert result.test_outcomes()[trusted[0].id] == "passed"
    plan = [e.detail for e in result.timeline if e.node == "plan_tests" and e.kind == "end"]
    assert plan and plan[0].startswith("1 example(s) of the spec read as trusted tests; "), plan


def test_the_plan_line_for_a_spec_without_examples(pool: KernelPool) -> None:
    spec = "Write a function clamp(x, lo, hi) that returns x limited to [lo, hi]."
    config = s.chain(spec_blind_tests=False, critic=False, adversarial_tests=False)
    alone = heal(spec, provider=MockProvider({"generator": [s.GOOD]}), config=config, executor=pool)
    plan = [e.detail for e in alone.timeline if e.node == "plan_tests" and e.kind == "end"]
    assert plan[0].startswith(
        "no example in the spec: nothing trusted to verify against (write one as "
        "`clamp(args) -> value`)"
    ), plan
    # your tests are trusted: no line about the spec's missing examples
    tests = ["assert clamp(5, 0, 3) == 3"]
    yours = heal(
        spec,
        provider=MockProvider({"generator": [s.GOOD]}),
        config=config,
        executor=pool,
        tests=tests,
    )
    said = [e.detail for e in yours.timeline if e.node == "plan_tests"]
    assert not any("example" in d for d in said), said


def test_a_spec_that_names_no_function_says_when_its_examples_are_read(pool: KernelPool) -> None:
    spec = "Read dd/mm/yyyy or yyyy-mm-dd dates; e.g. parse_date('05/03/2024') -> date(2024, 3, 5)"
    result = heal(
        spec,
        provider=MockProvider({"generator": [PARSE_DATE]}),
        config=s.chain(spec_blind_tests=False, critic=False, adversarial_tests=False),
        executor=pool,
    )
    plan = [e.detail for e in result.timeline if e.node == "plan_tests" and e.kind == "end"]
    assert plan[0].startswith("the spec names no function yet: its examples are read once"), plan
    assert [t.origin for t in result.tests if t.trusted] == ["example"]  # read after naming


def test_a_table_whose_columns_are_named_by_a_signature_in_prose() -> None:
    """The columns of ``| net | rate | result |`` are the parameters of the signature written
    in prose (no ``def`` line), and the name comes from "Write add_vat(net, rate)"."""
    spec = (
        "Write add_vat(net, rate) for invoices: net and rate are Decimals; return the gross "
        "rounded half up to cents.\n\n| net | rate | result |\n|---|---|---|\n"
        "| Decimal('10.00') | Decimal('0.19') | Decimal('11.90') |\n"
    )
    assert _tests(spec) == [
        "from decimal import Decimal\n"
        "assert add_vat(Decimal('10.00'), Decimal('0.19')) == Decimal('11.90')"
    ]
    annotated = (
        "Write `mask(number: str, keep: int = 4) -> str`.\n\n| keep | number | output |\n"
        "|---|---|---|\n| 2 | '1234' | '**34' |\n"
    )
    assert _tests(annotated) == ["assert mask('1234', 2) == '**34'"]


def test_an_objects_repr_as_the_value_is_quoted_with_why() -> None:
    spec = parse_spec(
        "Write make_counter() returning a counter.\nmake_counter() -> <Counter at 0x7f00>"
    )
    [unread] = unread_examples(spec)
    assert unread.example == "make_counter() -> <Counter at 0x7f00>"
    assert "how Python shows an object" in unread.why and "--test" in unread.why
