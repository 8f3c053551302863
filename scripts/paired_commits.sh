#!/usr/bin/env bash
# Behaviour kept across a change: one mode on the same HumanEval problems at two commits, the
# two sides interleaved in chunks (before, after; then after, before; ...) so that a machine
# whose load moves falls on both. Each side runs from a worktree of its commit with this
# checkout's virtual environment; records go to OUT-before and OUT-after (--resume continues).
#   bash scripts/paired_commits.sh BEFORE AFTER MODE FIRST LAST CHUNK OUT
#   e.g. bash scripts/paired_commits.sh 26b5dd6 bbe0a6b heal 0 39 10 evaluation/results/humaneval40-46
# Compare: python -m evaluation.compare OUT-before OUT-after --modes MODE
set -euo pipefail
if [ $# -ne 7 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
before=$1 after=$2 mode=$3 first=$4 last=$5 chunk=$6 out=$7
root=$(cd "$(dirname "$0")/.." && pwd)
python=${SELFHEAL_VENV:-$root/.venv}/bin/python
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/before" >/dev/null 2>&1 || true;
      git -C "$root" worktree remove --force "$work/after" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/before" "$before" >/dev/null
git -C "$root" worktree add --detach "$work/after" "$after" >/dev/null
n=0
for start in $(seq "$first" "$chunk" "$last"); do
  end=$((start + chunk - 1)); [ "$end" -gt "$last" ] && end=$last
  ids=$(seq "$start" "$end" | sed 's|^|HumanEval/|' | paste -sd,)
  if [ $((n % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
  for side in $order; do
    echo "$(date -u +%T) HumanEval/$start-$end $side (load $(cut -d' ' -f1 /proc/loadavg))"
    (cd "$work/$side" && PYTHONPATH=. "$python" -m evaluation.run_benchmark --suite humaneval \
      --model local --modes "$mode" --task-ids "$ids" --resume --no-progress --out "$out-$side" >/dev/null)
  done
  n=$((n + 1))
done
