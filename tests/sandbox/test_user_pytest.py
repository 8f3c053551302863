"""Your tests in pytest's form, through the real sandbox: pytest collects them once, every
item runs (and can fail) as its own trusted test, and a candidate cannot fake pytest: by
default pytest runs them in a process of its own (``Limits.pytest_tests``), and in the
candidate's process (``in_process``) the harness checks pytest after each item."""

from __future__ import annotations

import pytest

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.usertests import read_user_tests, user_test_cases

from .conftest import FAST

MODES = ("separate_process", "in_process")

GOOD = """
def median(values):
    if not values:
        raise ValueError("empty")
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
"""
UPPER = """
def median(values):
    return sorted(values)[len(values) // 2]
"""

FORMS = {
    "function": "def test_even():\n    assert median([3, 1, 2, 4]) == 2.5\n",
    "parametrize": (
        "import pytest\n"
        "@pytest.mark.parametrize('xs,want', [([1, 2, 3], 2), pytest.param([1, 2], 1.5, "
        "id='even')])\n"
        "def test_many(xs, want):\n    assert median(xs) == want\n"
    ),
    "class": (
        "class TestMedian:\n"
        "    def setup_method(self, method):\n        self.data = [4, 1, 3, 2]\n"
        "    def test_even(self):\n        assert median(self.data) == 2.5\n"
    ),
    "raises": (
        "import pytest\n"
        "def test_empty():\n    with pytest.raises(ValueError):\n        median([])\n"
    ),
    "approx": (
        "import pytest\ndef test_float():\n    assert median([0.1, 0.2]) == pytest.approx(0.15)\n"
    ),
    "fixtures": (
        "import pytest\n"
        "@pytest.fixture\n"
        "def data():\n    yield [10, 20]\n"
        "def half(x):\n    return x / 2\n"
        "def test_fixtures(data, tmp_path, capsys, monkeypatch):\n"
        "    monkeypatch.setenv('SELFHEAL_T', '1')\n"
        "    (tmp_path / 'n.txt').write_text(str(median(data)))\n"
        "    print('done')\n"
        "    assert capsys.readouterr().out == 'done' + chr(10)\n"
        "    assert float((tmp_path / 'n.txt').read_text()) == half(30)\n"
    ),
    "fixture_params": (
        "import pytest\n"
        "@pytest.fixture(params=[[1, 3], [5, 7]])\n"
        "def pair(request):\n    return request.param\n"
        "def test_pair(pair):\n    assert median(pair) == sum(pair) / 2\n"
    ),
    "import_from_module": (
        "from stats import median as m\ndef test_imported():\n    assert m([2, 4]) == 3\n"
    ),
}
"""Each form passes on GOOD and fails (some item) on UPPER: the upper middle element, no
ValueError."""


def _cases(pool: KernelPool, text: str):  # type: ignore[no-untyped-def]
    return user_test_cases(read_user_tests([text], "median"), pool)


def _mode(mode: str) -> Limits:
    return FAST.model_copy(update={"pytest_tests": mode})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_runs_and_can_fail(pool: KernelPool, form: str, mode: str) -> None:
    cases = _cases(pool, FORMS[form])
    assert cases and all(c.trusted and c.origin == "user" for c in cases)
    tests = [c.to_sandbox() for c in cases]
    good = pool.run(GOOD, tests, limits=_mode(mode))
    assert [r.outcome for r in good.results] == ["passed"] * len(cases), good.results
    bad = pool.run(UPPER, tests, limits=_mode(mode))
    assert any(r.outcome in ("failed", "error") for r in bad.results), bad.results


def test_parametrize_cases_are_separate_tests_with_pytest_ids(pool: KernelPool) -> None:
    cases = _cases(pool, FORMS["parametrize"])
    assert [c.id for c in cases] == ["u1::test_many[xs0-2]", "u1::test_many[even]"]
    bad = pool.run(UPPER, [c.to_sandbox() for c in cases])
    assert [r.outcome for r in bad.results] == ["passed", "failed"]
    assert "left:  2" in bad.results[1].message and "right: 1.5" in bad.results[1].message


def test_fixture_params_are_items(pool: KernelPool) -> None:
    cases = _cases(pool, FORMS["fixture_params"])
    assert len(cases) == 2
    bad = pool.run(UPPER, [c.to_sandbox() for c in cases])
    assert [r.outcome for r in bad.results] == ["failed", "failed"]


def test_pytest_fail_and_did_not_raise_are_failures(pool: KernelPool) -> None:
    cases = _cases(pool, FORMS["raises"])
    r = pool.run(GOOD.replace('raise ValueError("empty")', "return None"), [cases[0].to_sandbox()])
    assert r.results[0].outcome == "failed"
    assert "DID NOT RAISE" in r.results[0].message


def test_skip_marks_are_not_run_and_an_all_skipped_file_is_an_error(pool: KernelPool) -> None:
    text = (
        "import pytest\n"
        "@pytest.mark.skip(reason='later')\n"
        "def test_later():\n    assert median([1]) == 99\n"
    )
    with pytest.raises(ConfigError, match=r"(?s)no test to run.*later"):
        _cases(pool, text)
    cases = _cases(pool, text + "def test_now():\n    assert median([1]) == 1\n")
    assert [c.id for c in cases] == ["u1::test_now"]


def test_collection_error_is_a_config_error_naming_it(pool: KernelPool) -> None:
    text = "LIMIT = undefined_name + 1\ndef test_x():\n    assert median([1]) == 1\n"
    with pytest.raises(ConfigError, match=r"(?s)could not collect.*undefined_name"):
        _cases(pool, text)


@pytest.mark.parametrize("mode", MODES)
def test_a_candidate_that_patches_pytest_fails_the_item(pool: KernelPool, mode: str) -> None:
    cheat = UPPER + (
        "\nimport _pytest.approx as _a\n_a.ApproxScalar.__eq__ = lambda self, other: True\n"
    )
    cases = _cases(pool, FORMS["approx"])
    r = pool.run(cheat, [c.to_sandbox() for c in cases], limits=_mode(mode))
    assert r.results[0].outcome == "failed"
    if mode == "in_process":
        assert "edited pytest's ApproxScalar" in r.results[0].message
    else:  # its pytest is not the one that judges: pytest's own approx says no
        assert "0.15 ± 1.5e-07" in r.results[0].message, r.results[0]


@pytest.mark.parametrize("mode", MODES)
def test_a_candidate_that_replaces_raises_fails_the_item(pool: KernelPool, mode: str) -> None:
    cheat = UPPER + (
        "\nimport contextlib, pytest\n"
        "pytest.raises = lambda *a, **k: contextlib.suppress(BaseException)\n"
    )
    cases = _cases(pool, FORMS["raises"])
    r = pool.run(cheat, [c.to_sandbox() for c in cases], limits=_mode(mode))
    if mode == "in_process":
        assert r.results[0].outcome == "failed"
        assert "edited the module pytest" in r.results[0].message
    else:  # the real pytest.raises(ValueError) sees the candidate's IndexError
        assert (r.results[0].outcome, r.results[0].exc_type) == ("error", "IndexError")
