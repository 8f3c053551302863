"""What a run is checked against: the spec with its examples, the tests, the probe inputs."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from selfheal._record import Record
from selfheal.kernel_sandbox.types import AssertTest, CallTest, PytestItem, SandboxTest

Origin = Literal["spec_blind", "adversarial", "example", "user", "critic"]
"""Where a test came from. ``example`` and ``user`` tests are trusted; model-written ones are not."""


class Example(Record):
    """An input/output example written in the spec."""

    call: str
    """The call expression, e.g. ``add(2, 3)``."""
    expected: str
    """The expected value as Python source, e.g. ``5`` or ``datetime.date(2024, 3, 5)``."""
    abs_tol: float | None = None
    """For a float value when the spec states a tolerance ("to 2 decimals", "within 1e-6"):
    the test compares with ``math.isclose(..., abs_tol=abs_tol)``; None compares with ``==``."""


class Spec(Record):
    """What the user asked for."""

    text: str
    """The spec as written (plain language, or a signature with a docstring)."""
    entry_point: str | None = None
    """Name of the function to write, when known."""
    signature: str | None = None
    """The ``def`` line, when known."""
    examples: tuple[Example, ...] = ()
    """Examples found in the text, in every form ``selfheal.examples`` reads (doctests,
    ``f(x) -> y``, tables, ...)."""
    prelude: str = ""
    """Imports written in the spec (a HumanEval prompt's ``from typing import List``)."""


class TestCase(Record):
    """One test, with where it came from and whether it can overturn code."""

    __test__ = False

    id: str
    """Stable id: ``ex1`` example, ``u1`` user, ``sb1`` spec-blind, ``adv1`` adversarial, ``cr1`` critic."""
    origin: Origin
    """Who wrote it."""
    code: str | None = None
    """Assertion code, e.g. ``assert f(2) == 4`` (or None for a call/expect test)."""
    function: str | None = None
    """For call/expect tests: the function to call."""
    args: tuple[Any, ...] = ()
    """For call/expect tests: positional arguments."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """For call/expect tests: keyword arguments."""
    expected: Any = None
    """For call/expect tests: the value the call must return."""
    pytest_module: str | None = None
    """For an item of a pytest module you gave: the module (``code`` is then the item's
    function, as shown)."""
    pytest_item: str | None = None
    """For an item of a pytest module: pytest's item as collected (JSON: ``id``, ``cls``,
    ``func``, ``k`` the index of its parameter set, ``params`` as shown, ``line``)."""
    rationale: str = ""
    """Why the test exists."""
    trusted: bool = False
    """Trusted tests (examples, the user's) must pass; an untrusted test alone never overturns code."""
    smoke: bool = False
    """One of your tests that calls the code and checks no value (no assert, no
    ``pytest.raises``): it must pass, but ``verified`` needs a trusted test that checks a value."""
    answer: bool = False
    """Made from your answer to a question: it must pass, and it steers the choice and the
    repairs, but it verifies only beside an example or a test of yours: the run chose its
    input where the candidates differed, often an edge case that does not show a mistake they
    share (docs/evaluation.md, "Asking a simulated user")."""
    quarantined: bool = False
    """A quarantined test still runs and is reported, but no longer blocks verification."""
    quarantine_reason: str = ""
    """Why it was quarantined (the debugger's finding that the test is wrong)."""

    added_at: int = 0
    """Iteration at which the test was added (0: before any code)."""

    @property
    def verifies(self) -> bool:
        """A trusted test ``verified`` may rest on: it checks a value (not a smoke test) and
        is not made from an answer to a question."""
        return self.trusted and not self.smoke and not self.answer

    def to_sandbox(self) -> SandboxTest:
        if self.pytest_module is not None and self.pytest_item is not None:
            item = json.loads(self.pytest_item)
            return PytestItem(
                id=self.id,
                module=self.pytest_module,
                nodeid=item["id"],
                cls=item["cls"],
                func=item["func"],
                k=item["k"],
            )
        if self.code is not None:
            return AssertTest(id=self.id, code=self.code)
        return CallTest(
            id=self.id,
            function=self.function or "",
            args=self.args,
            kwargs=self.kwargs,
            expected=self.expected,
        )

    @property
    def headline(self) -> str:
        """The test's first line that is not an import (an example's test starts with the
        imports its values need: ``import datetime``), or its first line."""
        lines = [ln.strip() for ln in self.source.strip().splitlines() if ln.strip()]
        rest = [ln for ln in lines if not ln.startswith(("import ", "from "))]
        return (rest or lines or [""])[0]

    @property
    def source(self) -> str:
        """The test as Python source, whatever its form."""
        if self.code is not None:
            return self.code
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"assert {self.function}({', '.join(parts)}) == {self.expected!r}"


class ProbeInput(Record):
    """An input every candidate is run on; outputs are compared, never judged alone."""

    id: str
    """Stable id: ``p1``, ``p2``, ..."""
    call: str
    """The call expression, e.g. ``f([3, 1], 2)``."""
    origin: Literal[
        "example", "mutation", "signature", "model_test", "model_input", "critic", "user"
    ]
    """Where the input came from: a spec example's call, a mutation of one, a value drawn
    from the signature's type hints, the call inside a model-written test, a call the test
    writer proposed as an input (``spec_blind_form="inputs"``), or a critic's
    counterexample."""
    added_at: int = 0
    """Round at which it was added."""
