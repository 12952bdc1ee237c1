#!/bin/sh
# experiments/run_many.sh [--keep-finished]: the runs of an experiment, several at once.
# Reads one run per line on stdin: its folder, then its flags to ./maskprior (words without
# spaces), and runs each as ./maskprior FLAGS --out FOLDER --continue, JOBS of them side by side.
#   --continue: a run continues its folder's own checkpoint bit-exactly when it has one (written
#         atomically every 5 minutes of a run, and at its end), so a table that was interrupted
#         (Ctrl-C, a crash, a reboot) and is started again loses at most one checkpoint interval
#         per run; Ctrl-C loses nothing: each run writes its checkpoint after its step and stops
#         (exit 3, run/signals.h), unfinished (no metrics.json), and no new run starts.
#   --keep-finished: a run whose folder holds metrics.json (written last: the run finished) is
#         not run again. Without it such a run is trained again from its start: its metrics.json,
#         checkpoint and stdout.log are removed first.
#   JOBS: on a CPU one run per core by default: these models are small, so independent runs
#         side by side use the cores better than one run's threads do, which meet at every
#         layer. With GPUs (nvidia-smi -L lists them; CUDA_VISIBLE_DEVICES, when set, says which
#         of them to use) one run per GPU by default, each on its own GPU (CUDA_VISIBLE_DEVICES
#         set per run); JOBS=N above the GPU count puts N / count runs on each GPU. Every run has
#         OMP_NUM_THREADS = cores / JOBS threads. A run's result does not depend on its thread
#         count (CPU runs are bit-identical at any count), so JOBS changes only the time.
# Each run's output is appended to FOLDER/stdout.log; a finished run prints its folder and its
# last evaluation line. A failed run prints its output, and no new run starts (exit 1); so does
# a run stopped by a signal (SIGTERM, SIGINT, SIGUSR1), which prints one line instead.
#
# Which GPU: xargs starts each run in a fresh shell and gives it no slot number (GNU xargs'
# --process-slot-var is not POSIX), so a run takes a slot itself: slot k is the folder
# $RUN_MANY_SLOTS/k, which mkdir (atomic) creates for one run only, and the run removes it when
# it ends, before xargs starts the next one; so one of the slots 0 .. JOBS-1 is always free, and
# slot k means GPU k mod count. Chosen over JOBS worker loops each on one GPU, which would lose
# xargs' stop at the first failure and Ctrl-C (a script's background jobs ignore SIGINT), and
# over a fixed sublist per GPU, which leaves a GPU idle while another still has runs queued.
set -e
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = --keep-finished ] && keep=1
cores=$(nproc)
gpus=$(nvidia-smi -L 2>/dev/null | sed -n 's/^GPU \([0-9]*\):.*/\1/p' | tr '\n' ' ')
if [ -n "$gpus" ] && [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr , ' ')
fi
gpu_count=$(echo "$gpus" | wc -w)
if [ -z "${JOBS:-}" ]; then
    if [ "$gpu_count" -gt 0 ]; then JOBS=$gpu_count; else JOBS=$cores; fi
fi
case $JOBS in ''|*[!0-9]*|0) echo "run_many.sh: error: JOBS must be a count of at least 1" >&2; exit 2 ;; esac
threads=$((cores / JOBS))
[ "$threads" -ge 1 ] || threads=1
RUN_MANY_SLOTS=$(mktemp -d)
trap 'rm -rf "$RUN_MANY_SLOTS"' EXIT
trap 'exit 130' INT  # Ctrl-C: the runs stop (they get it too), and the EXIT trap removes the slots
trap 'exit 143' TERM
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$threads}" KEEP_FINISHED=$keep RUN_MANY_SLOTS \
    RUN_MANY_GPUS="$gpus" RUN_MANY_GPU_COUNT="$gpu_count"
# xargs stops starting runs once one exits 255
if ! xargs -P "$JOBS" -L 1 sh -c '
    out=$1
    shift
    if [ -f "$out/metrics.json" ]; then
        [ "$KEEP_FINISHED" = 1 ] && exit 0
        rm -f "$out/metrics.json" "$out/model.safetensors" "$out/stdout.log"
    fi
    mkdir -p "$out"
    log=$out/stdout.log
    : >> "$log"
    offset=$(wc -c < "$log")
    slot=""
    if [ "$RUN_MANY_GPU_COUNT" -gt 0 ]; then
        slot=0
        until mkdir "$RUN_MANY_SLOTS/$slot" 2>/dev/null; do slot=$((slot + 1)); done
        CUDA_VISIBLE_DEVICES=$(echo $RUN_MANY_GPUS | cut -d" " -f$((slot % RUN_MANY_GPU_COUNT + 1)))
        export CUDA_VISIBLE_DEVICES
    fi
    status=0
    ./maskprior "$@" --out "$out" --continue >> "$log" 2>&1 || status=$?
    [ -z "$slot" ] || rmdir "$RUN_MANY_SLOTS/$slot" 2>/dev/null || true  # gone: xargs stopped at a failure
    if [ "$status" = 3 ]; then
        echo "run_many.sh: the run into $out was stopped by a signal, its checkpoint written:" \
            "the same command goes on from there" >&2
        exit 255
    elif [ "$status" != 0 ]; then
        tail -c +$((offset + 1)) "$log"
        echo "run_many.sh: the run into $out failed" >&2
        exit 255
    fi
    echo "$out: $(grep -E "^eval" "$log" | tail -1 | cut -c1-110)"
' sh; then
    exit 1
fi
