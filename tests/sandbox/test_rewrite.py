"""Host-side pieces that need no kernel: test rewriting, value codec, env allow-list."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from selfheal.kernel_sandbox._wire import decode_value, encode_value
from selfheal.kernel_sandbox.containment import kernel_env
from selfheal.kernel_sandbox.rewrite import HELPERS, rewrite_test, split_snippet


def test_asserts_and_comparisons_are_routed_through_helpers() -> None:
    code, wrapped = rewrite_test("assert f(2) == 4\nx = [f(i) < 3 for i in range(2)]")
    assert wrapped
    tree = ast.parse(code)
    func = tree.body[0]
    assert isinstance(func, ast.FunctionDef) and func.name == "__sh_test__"
    assert [a.arg for a in func.args.args] == list(HELPERS)
    assert "__sh_assert_cmp__('Eq', f(2), 4" in code
    assert "__sh_cmp__('Lt', f(i), 3)" in code
    assert not any(isinstance(n, ast.Compare | ast.Assert) for n in ast.walk(tree))


def test_assert_and_chains_split() -> None:
    code, _ = rewrite_test("assert a == 1 and b == 2")
    assert code.count("__sh_assert_cmp__('Eq'") == 2
    code, _ = rewrite_test("assert 1 < x < 3")
    assert "__sh_cmp__('Lt', 1, x) and __sh_cmp__('Lt', x, 3)" in code


def test_not_uses_trusted_truth() -> None:
    code, _ = rewrite_test("assert not f(0)")
    assert "not __sh_truth__(f(0))" in code


def test_star_import_falls_back_to_module_level() -> None:
    code, wrapped = rewrite_test("from math import *\nassert sqrt(4) == 2")
    assert not wrapped
    assert code.startswith("from math import *")


def test_syntax_errors_are_raised() -> None:
    with pytest.raises(SyntaxError):
        rewrite_test("assert f(2) ==")
    with pytest.raises(SyntaxError):  # top-level yield must not become a silent generator
        rewrite_test("yield 1")


def test_split_snippet() -> None:
    assert split_snippet("x = 1\nx + 1") == ("x = 1", "x + 1")
    assert split_snippet("x = 1") == ("x = 1", None)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        10**40,
        -0.5,
        math.inf,
        complex(1, -2),
        "s",
        b"b",
        bytearray(b"ba"),
        range(1, 9, 2),
        [1, [2.5, "x"]],
        (1, (2,)),
        {"a": {1, 2}, (1, 2): frozenset({3})},
    ],
)
def test_codec_round_trip(value: object) -> None:
    enc = encode_value(value)
    assert ast.literal_eval(repr(enc)) == enc
    out = decode_value(ast.literal_eval(repr(enc)))
    assert out == value and type(out) is type(value)


def test_codec_nan_and_refusal() -> None:
    assert math.isnan(decode_value(encode_value(math.nan)))

    class Sneaky(int):
        pass

    with pytest.raises(TypeError, match="plain builtin data"):
        encode_value(Sneaky(1))


def test_env_is_an_allow_list(tmp_path: Path) -> None:
    host = {
        "PATH": "/secret/bin:/usr/bin",
        "OPENAI_API_KEY": "sk-x",
        "GITHUB_TOKEN": "ghp",
        "HF_TOKEN": "hf",
        "AWS_SECRET_ACCESS_KEY": "a",
        "LANG": "en_US.UTF-8",
    }
    env = kernel_env(tmp_path / "home", tmp_path / "tmp", base=host)
    assert env["LANG"] == "en_US.UTF-8"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["HOME"] == str(tmp_path / "home")
    assert not {"OPENAI_API_KEY", "GITHUB_TOKEN", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY"} & set(env)
    assert not any(v in env.values() for v in ("sk-x", "ghp", "hf", "a"))
