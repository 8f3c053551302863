"""Offline: the r5 records' final code and every candidate, with the standard-library imports
they use added (selfheal.roles._source.missing_imports), re-scored against the reference tests."""
import json, sys, collections
from evaluation.suites import get_suite
from evaluation.scoring import score
from selfheal.kernel_sandbox import get_default_pool
from selfheal.roles._source import missing_imports

pool = get_default_pool()
out = {}
for suite, path in [("builtin", "evaluation/results/builtin-r5/results.jsonl"), ("humaneval", "evaluation/results/humaneval164-r5/results.jsonl")]:
    tasks = {t.id: t for t in get_suite(suite).tasks()}
    final = collections.Counter(); cands = collections.Counter(); flips = []
    for line in open(path):
        r = json.loads(line)
        task = tasks[r["task_id"]]
        code = (r.get("attempts") or [{}])[-1].get("code") if r.get("attempts") else None
        code = r.get("final_code") or r.get("code") or code
        if code:
            imp = missing_imports(code)
            if imp:
                final[r["mode"], "changed"] += 1
                if not r["passed"] and score(task, "\n".join([*imp, code]), pool).passed:
                    final[r["mode"], "now passes"] += 1
                    flips.append((r["task_id"], r["mode"], imp))
        for c in r.get("candidates") or []:
            cc = c.get("code") or ""
            imp = missing_imports(cc)
            if imp:
                cands[r["mode"], "changed"] += 1
                if score(task, "\n".join([*imp, cc]), pool).passed and not score(task, cc, pool).passed:
                    cands[r["mode"], "now passes"] += 1
    out[suite] = {"final": {f"{m}|{k}": v for (m, k), v in final.items()}, "candidates": {f"{m}|{k}": v for (m, k), v in cands.items()}, "flips": flips}
    print(suite, json.dumps(out[suite], indent=1))
json.dump(out, open("evaluation/results/imports-r5/rescore.json", "w"), indent=1)
