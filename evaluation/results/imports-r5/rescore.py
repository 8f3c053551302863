"""Offline: the r5 records' final code and every candidate, with the standard-library imports
they use added (``selfheal.roles.generator.missing_imports``), re-scored against the reference
tests. ``PYTHONPATH=. python evaluation/results/imports-r5/rescore.py`` writes rescore.json."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from evaluation.scoring import score
from evaluation.suites import get_suite
from selfheal.kernel_sandbox import get_default_pool
from selfheal.roles.generator import missing_imports

RUNS = {
    "builtin": "evaluation/results/builtin-r5/results.jsonl",
    "humaneval": "evaluation/results/humaneval164-r5/results.jsonl",
}


def main() -> None:
    pool = get_default_pool()
    out = {}
    for suite, path in RUNS.items():
        tasks = {t.id: t for t in get_suite(suite).tasks()}
        final: collections.Counter[str] = collections.Counter()
        cands: collections.Counter[str] = collections.Counter()
        flips = []
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            task, mode = tasks[r["task_id"]], r["mode"]
            code = r.get("code") or ""
            imports = missing_imports(code)
            if imports:
                final[f"{mode}|changed"] += 1
                if not r["passed"] and score(task, "\n".join([*imports, code]), pool).passed:
                    final[f"{mode}|now passes"] += 1
                    flips.append((r["task_id"], mode, imports))
            for c in r.get("candidates") or []:
                code = c.get("code") or ""
                imports = missing_imports(code)
                if imports:
                    cands[f"{mode}|changed"] += 1
                    fixed = score(task, "\n".join([*imports, code]), pool).passed
                    if fixed and not score(task, code, pool).passed:
                        cands[f"{mode}|now passes"] += 1
        out[suite] = {"final": final, "candidates": cands, "flips": flips}
    Path("evaluation/results/imports-r5/rescore.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
