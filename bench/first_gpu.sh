#!/usr/bin/env bash
# The first GPU: every check issue 20 asks of a real GPU, in one go, within a time budget.
#
#   bash bench/first_gpu_prepare.sh          here first, where pip reaches a registry: the wheels
#                                            the GPU image lacks (.whl) and MNIST (.first-gpu-data)
#   bash bench/first_gpu.sh [OUT_DIR]        on the GPU box, carrying .whl and .first-gpu-data
#                                            (default OUT_DIR: $OUT/first-gpu if $OUT is set, else ./first-gpu)
#   FIRST_GPU_BUDGET_S=540 (default): the whole script's seconds, so it fits one 10-minute call
#
# In order of what matters most if time runs out: the install, `doctor --selftest`,
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

budget="${FIRST_GPU_BUDGET_S:-540}"

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

python3 -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}")' 2>&1 | tee -a "$summary"
env | grep -E '^(TORCH_|PYTORCH_|NVIDIA_TF32|CUDA_VISIBLE)' | tee -a "$summary"

# MNIST: carried gzipped (.first-gpu-data), else ../shared/data or shared/data; else the offline digits.
if ls .first-gpu-data/MNIST/raw/*.gz > /dev/null 2>&1; then
    mkdir -p /tmp/first-gpu-data/MNIST/raw
    for f in .first-gpu-data/MNIST/raw/*.gz; do gunzip -c "$f" > "/tmp/first-gpu-data/MNIST/raw/$(basename "$f" .gz)"; done
    export GPUTUTOR_DATA_DIR=/tmp/first-gpu-data
else
    for d in ../shared/data shared/data; do
        if [ -d "$d/MNIST/raw" ]; then export GPUTUTOR_DATA_DIR="$(cd "$d" && pwd)"; break; fi
    done
fi
if [ -z "${GPUTUTOR_DATA_DIR:-}" ]; then  # a named empty dir: not downloaded into, the offline digits at once
    export GPUTUTOR_DATA_DIR="$(mktemp -d)"
    say "MNIST: none found: the offline digits stand in (every run says so)"
else
    say "MNIST: $GPUTUTOR_DATA_DIR"
fi
# Progress, peaks and scratch files outside OUT_DIR: only the logs and the summary come back.
export GPUTUTOR_HOME=/tmp/first-gpu-home GPUTUTOR_CACHE_DIR=/tmp/first-gpu-cache PYTHONUNBUFFERED=1

if ls .whl/*.whl > /dev/null 2>&1; then  # an offline box: the carried wheels, beside the image's own packages
    step install 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    step install 180 python3 -m pip install -q -e ".[test]"
fi
timeout_flag=()
python3 -c "import pytest_timeout" 2> /dev/null && timeout_flag=(--timeout=60)  # one hung test, not the budget

step selftest 60 python3 -m tutor doctor --selftest
export GPUTUTOR_FAILURES_AT_ONCE=1  # a failure's traceback at once: a cut-off run never prints the summary
step pytest-gpu 300 python3 -m pytest -m gpu -p no:cacheprovider -v -rs --durations=15 "${timeout_flag[@]}"
step calibrate 90 python3 bench/calibrate.py --repeats 1
step precision 90 python3 bench/precision.py --repeats 3
step data-path 60 python3 bench/data_path.py
step doctor 20 python3 -m tutor doctor

say "done in $SECONDS s"
