#!/bin/sh
# make run [TASK=maj3] [SEEDS="1 2 3 4 5"] [OPTIMIZER=adam] [JOBS=N]: the headline experiment.
# Trains the same small transformer on a Boolean GOTU task four times per seed: with the
# default init (no mask), with the prior written into the query/key weights (qk-svd, qk-opt)
# and with the mask init (M = ±c from the task's structure G), on the GPU if there is one, else
# on the CPU, several runs side by side (experiments/run_many.sh: one per core on a CPU, one per
# GPU on a machine with several).
# Prints them side by side with the min-degree interpolator's own accuracy, and draws the
# prior mass of every run against the step (tools/plot.py) into
# runs/headline/<optimizer>/plots-<task>. The optimizer is GOTU's, Adam with weight decay as L2
# in the gradient; OPTIMIZER=adamw runs the decoupled AdamW instead (README: it changes the
# result). Every run leaves its folder under runs/headline/<optimizer>/; it evaluates every 250
# steps (7 points on each curve) over the whole cube. SCHEDULER=list prints the runs, one a line,
# and runs nothing (tests/check_docs.py counts them, as it counts the tables').
set -e
cd "$(dirname "$0")/.."
task=${1:-maj3}
seeds=${SEEDS:-1 2 3 4 5}
optimizer=${OPTIMIZER:-adam}
root=runs/headline/$optimizer
# the runs, one a line for experiments/run_many.sh: the run folder, then its flags
runs() {
    for seed in $seeds; do
        for init in default qk-svd qk-opt mask; do
            echo "$root/$task-$init-s$seed --task $task --init $init --seed $seed --optimizer $optimizer" \
                "--eval-every 250"
        done
    done
}
if [ "${SCHEDULER:-local}" = list ]; then runs; exit 0; fi
echo "make run: $task, inits default qk-svd qk-opt mask, seeds $seeds, $optimizer -> $root"
start=$(date +%s)
runs | sh experiments/run_many.sh
echo "the runs took $(($(date +%s) - start)) s"
/usr/bin/python3 tools/headline_table.py "$root" "$task"
/usr/bin/python3 tools/plot.py "$root/$task"-*-s* --out "$root/plots-$task"
