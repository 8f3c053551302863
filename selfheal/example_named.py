"""Examples written with named inputs: ``For xs = [1, 2], k = 3 the output should be 5`` (or
"the result", "the return value"), the names being exactly the function's parameters; and
blocks, ``Input: xs = [1, 2], k = 3`` (or the bare arguments) then ``Output: 5``. Both need the
function's parameters: its ``def`` line, or its signature written in prose."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from selfheal._parse import parse_or_none
from selfheal.example_values import Names, balanced_end, value_at
from selfheal.expected import expected_problem
from selfheal.state.cases import Example

_FOR_RE = re.compile(
    r"\bFor\s+(?P<args>.+?)\s*,?\s+(?:the\s+)?(?:output|result|return value)\s+"
    r"(?:should|will|must)\s+be\s+(?P<value>.+)$",
    re.IGNORECASE,
)
_INPUT_RE = re.compile(r"^\s*Input\s*:\s*(?P<args>\S.*)$", re.IGNORECASE)
_OUTPUT_RE = re.compile(r"^\s*Output\s*:\s*(?P<value>\S.*)$", re.IGNORECASE)


def parameters(text: str, name: str) -> list[str] | None:
    """The positional parameters of ``def name(...)`` in ``text``, else of its signature
    written in prose (``add_vat(net, rate)``, ``mask_card(number: str) -> str``: every
    argument a name), or None when neither is there."""
    flat = text.replace("\n", " ")
    defs = re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", text, re.MULTILINE)
    starts = [defs] if defs else list(re.finditer(rf"(?<![\w.]){re.escape(name)}\(", text))
    for m in starts:
        end = balanced_end(flat, m.end() - 1)
        tree = parse_or_none(f"def _{flat[m.end() - 1 : end]}: pass") if end else None
        fn = tree.body[0] if tree else None
        if isinstance(fn, ast.FunctionDef):
            names = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
            return names or None
    return None


def _call_from_inputs(name: str, params: Sequence[str], inputs: str, asked: Names) -> str | None:
    """``name(...)`` from written inputs: ``a = 1, b = [2]`` naming exactly the parameters, or
    the bare values of all of them; None otherwise."""
    tree = parse_or_none(f"_({inputs})", "eval")
    node = tree.body if tree else None
    if not isinstance(node, ast.Call):
        return None
    if node.keywords and not node.args:
        given = {k.arg: k.value for k in node.keywords if k.arg}
        if sorted(given) != sorted(params) or len(node.keywords) != len(params):
            return None
        values = [given[p] for p in params]
    elif node.args and not node.keywords and len(node.args) == len(params):
        values = list(node.args)
    else:
        return None
    args = [ast.get_source_segment(f"_({inputs})", v) or ast.unparse(v) for v in values]
    if any(expected_problem(a, asked) for a in args):
        return None
    return f"{name}({', '.join(args)})"


def _for_example(line: str, name: str, params: Sequence[str], asked: Names) -> Example | None:
    """The example of a ``For a = 1, b = 2 the output should be 3`` line, or None. The inputs
    follow one of the line's "for"s ("For example, for n = 5 the output should be 120") and are
    the longest run of its comma-separated parts that reads as them ("For N = 1000, the sum
    of digits will be 1 the output should be ...")."""
    for start in re.finditer(r"\bfor\b", line, re.IGNORECASE):
        m = _FOR_RE.match(line, start.start())
        if m is None:
            continue
        args = m.group("args")
        cuts = [len(args), *(j for j in range(len(args) - 1, 0, -1) if args[j] == ",")]
        for j in cuts:
            call = _call_from_inputs(name, params, args[:j], asked)
            if call is not None:
                exp = value_at(m.group("value"), asked)
                return None if exp is None else Example(call=call, expected=exp)
    return None


def named_examples(text: str, name: str, params: Sequence[str], asked: Names) -> list[Example]:
    """``For a = 1, b = 2 the output should be 3`` lines, and ``Input: ...`` lines followed by
    an ``Output: ...`` line."""
    out: list[Example] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        named = _for_example(line, name, params, asked)
        if named is not None:
            out.append(named)
            continue
        m = _INPUT_RE.match(line)
        if m:
            following = [s for s in lines[i + 1 : i + 3] if s.strip()][:1]
            out_m = _OUTPUT_RE.match(following[0]) if following else None
            call = _call_from_inputs(name, params, m.group("args").strip(), asked)
            exp = value_at(out_m.group("value"), asked) if out_m and call else None
            if call and exp is not None:
                out.append(Example(call=call, expected=exp))
    return out
