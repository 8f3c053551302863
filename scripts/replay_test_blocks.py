"""Replays the test writer's recorded replies of a benchmark run through today's reader of test
blocks, without a model: how many of its tests read data the block built before them (a
``df = pd.DataFrame(...)`` line above the asserts), and how many probe inputs its tests give,
with the tests as the reader made them before such data travelled with each test (its imports
only) and as it makes them now.

    PYTHONPATH=. python scripts/replay_test_blocks.py evaluation/results/notebook-local-ask --mode heal
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from evaluation.suites import get_suite
from selfheal.probes import calls_in_test
from selfheal.testsuite import parse_test_block


def _imports_only(source: str) -> str:
    """The test as the reader made it before: its imports, then the test statement (the last)."""
    tree = ast.parse(source)
    kept = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)] + tree.body[-1:]
    return "\n".join(ast.get_source_segment(source, n) or ast.unparse(n) for n in kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a benchmark output folder (results.jsonl)")
    parser.add_argument("--mode", default="heal")
    args = parser.parse_args()
    records = [json.loads(line) for line in (args.run / "results.jsonl").open()]
    entries = {
        suite: {t.id: t.entry_point for t in get_suite(suite).tasks()}
        for suite in {r["suite"] for r in records}
    }
    replies = tasks = with_data = tests = before = after = 0
    for r in records:
        if r["mode"] != args.mode:
            continue
        name = entries[r["suite"]].get(r["task_id"])
        seen = False
        for e in r["timeline"]:
            if e["kind"] != "llm" or not e["detail"].startswith("test_writer"):
                continue
            block = e["reply"].split("```python", 1)[-1].split("```", 1)[0]
            _, found = parse_test_block(block, name)
            replies += 1
            for source, _why in found:
                tests += 1
                old = _imports_only(source)
                carried = source != old
                with_data += carried
                seen |= carried
                before += len(calls_in_test(old, name))
                after += len(calls_in_test(source, name))
        tasks += seen
    print(f"{args.run} ({args.mode}): {replies} test-writer replies, {tests} tests")
    print(f"  tests that read data built above them in the block: {with_data} (on {tasks} tasks)")
    print(f"  probe inputs from the tests: {before} before, {after} now")


if __name__ == "__main__":
    main()
