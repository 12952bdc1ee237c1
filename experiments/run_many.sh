#!/bin/sh
# experiments/run_many.sh [--keep-finished]: the runs of an experiment, several at once.
# Reads one run per line on stdin: its folder, then its flags to ./maskprior (words without
# spaces). Runs JOBS of them side by side, each with OMP_NUM_THREADS = cores / JOBS threads.
#   JOBS: on a CPU one run per core by default: these models are small, so independent runs
#         side by side use the cores better than one run's threads do, which meet at every
#         layer; with a GPU (nvidia-smi finds one) one run at a time. A run's result does not
#         depend on its thread count (CPU runs are bit-identical at any count), so JOBS changes
#         only the time.
#   --keep-finished: a run whose folder holds metrics.json is not run again, so an
#         interrupted table continues where it stopped.
# Each run's output goes to FOLDER/stdout.log; a finished run prints its folder and its last
# evaluation line. A failed run prints its output, and no new run starts (exit 1).
set -e
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = --keep-finished ] && keep=1
cores=$(nproc)
if [ -z "${JOBS:-}" ]; then
    if nvidia-smi -L > /dev/null 2>&1; then JOBS=1; else JOBS=$cores; fi
fi
case $JOBS in ''|*[!0-9]*|0) echo "run_many.sh: error: JOBS must be a count of at least 1" >&2; exit 2 ;; esac
threads=$((cores / JOBS))
[ "$threads" -ge 1 ] || threads=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$threads}" KEEP_FINISHED=$keep
# xargs stops starting runs once one exits 255
if ! xargs -P "$JOBS" -L 1 sh -c '
    out=$1
    shift
    [ "$KEEP_FINISHED" = 1 ] && [ -f "$out/metrics.json" ] && exit 0
    mkdir -p "$out"
    if ! ./maskprior "$@" --out "$out" > "$out/stdout.log" 2>&1; then
        cat "$out/stdout.log"
        echo "run_many.sh: the run into $out failed" >&2
        exit 255
    fi
    echo "$out: $(grep -E "^eval" "$out/stdout.log" | tail -1 | cut -c1-110)"
' sh; then
    exit 1
fi
