#!/bin/sh
# make run [TASK=maj3] [SEEDS="1 2 3 4 5"] [OPTIMIZER=adam]: the headline experiment. Trains
# the same small transformer on a Boolean GOTU task four times per seed: with the default init
# (no mask), with the prior written into the query/key weights (qk-svd, qk-opt) and with the
# mask init (M = ±c from the task's structure G), on the GPU if there is one, else on the CPU.
# Prints them side by side with the min-degree interpolator's own accuracy, and draws the
# prior mass of every run against the step (tools/plot.py) into runs/headline/<optimizer>/plots-<task>. The optimizer is GOTU's, Adam with weight decay as L2 in the
# gradient; OPTIMIZER=adamw runs the decoupled AdamW instead (README: it changes the result).
# Every run leaves its folder under runs/headline/<optimizer>/; it evaluates every 250 steps
# (7 points on each curve), which adds about 5 s a run on the CPU and changes no result.
set -e
task=${1:-maj3}
seeds=${SEEDS:-1 2 3 4 5}
optimizer=${OPTIMIZER:-adam}
for seed in $seeds; do
    for init in default qk-svd qk-opt mask; do
        out=runs/headline/$optimizer/$task-$init-s$seed
        echo "== $task, init $init, seed $seed, $optimizer -> $out"
        mkdir -p "$out"
        if ! ./maskprior --task "$task" --init "$init" --seed "$seed" --optimizer "$optimizer" --eval-every 250 \
            --out "$out" > "$out/stdout.log" 2>&1; then
            cat "$out/stdout.log"
            exit 1
        fi
        grep -E "^maskprior:" "$out/stdout.log" | head -1
        grep -E "^eval" "$out/stdout.log" | tail -1
    done
done
/usr/bin/python3 tools/headline_table.py "runs/headline/$optimizer" "$task"
/usr/bin/python3 tools/plot.py "runs/headline/$optimizer/$task"-*-s* --out "runs/headline/$optimizer/plots-$task"
