#!/usr/bin/env bash
# The first GPU: every check issue 20 asks of a real GPU, in one go, within a time budget.
#
#   bash bench/first_gpu.sh [OUT_DIR]        (default: $OUT/first-gpu if $OUT is set, else ./first-gpu)
#   FIRST_GPU_BUDGET_S=560 (default): the whole script's seconds, so it fits one 10-minute call
#
# In order of what matters most if time runs out: the install, `gpututor doctor --selftest`,
# `pytest -m gpu`, then the benchmarks that print ratios against plain PyTorch in the same
# process. Each step has its own time limit (cut to what is left of the budget; a step with
# under 20 s left is skipped and said) and its own log; the summary at the end (also in
# summary.txt) says which passed, failed, ran out of time or were skipped. Nothing is retried.
set -uo pipefail
cd "$(dirname "$0")/.."

out="${1:-${OUT:+$OUT/first-gpu}}"
out="${out:-first-gpu}"
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"

say() { echo "$*" | tee -a "$summary"; }

budget="${FIRST_GPU_BUDGET_S:-560}"

step() {  # step NAME SECONDS COMMAND...: run it under a time limit, log it, one summary line
    local name="$1" limit="$2"
    shift 2
    local left=$((budget - SECONDS))
    if [ "$left" -lt 20 ]; then say "$(printf '%-14s %-22s' "$name" "SKIPPED (budget spent)")"; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    local verdict="ok"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then verdict="OUT OF TIME (${limit} s)"; elif [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; fi
    say "$(printf '%-14s %-22s %4d s   %s' "$name" "$verdict" $((SECONDS - t0)) "$out/$name.log")"
}

say "first GPU checks, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,mig.mode.current --format=csv 2>&1 | tee -a "$summary"

# MNIST: ../shared/data beside the checkout, or shared/data inside it; else the tests' offline digits.
for d in ../shared/data shared/data; do
    if [ -d "$d" ]; then export GPUTUTOR_DATA_DIR="$(cd "$d" && pwd)"; break; fi
done
say "MNIST: ${GPUTUTOR_DATA_DIR:-none found: the offline digits stand in}"
export GPUTUTOR_HOME="$out/home" GPUTUTOR_CACHE_DIR="$out/cache"

step install 180 python3 -m pip install -q -e ".[test]"
step selftest 60 gpututor doctor --selftest
step pytest-gpu 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rs --durations=15
step calibrate 90 python3 bench/calibrate.py --repeats 1
step precision 90 python3 bench/precision.py --repeats 3
step data-path 60 python3 bench/data_path.py
step doctor 20 gpututor doctor

say "done in $SECONDS s"
