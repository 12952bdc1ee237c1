#!/bin/sh
# make run [TASK=maj3] [SEEDS="1 2 3 4 5"]: the headline experiment. Trains the same small
# transformer on a Boolean GOTU task twice per seed, once with the default init (no mask) and
# once with the mask init (M = ±c from the task's structure G), on the GPU if there is one,
# else on the CPU, and prints the two side by side with the min-degree interpolator's own
# accuracy. Every run leaves its folder under runs/headline/.
set -e
task=${1:-maj3}
seeds=${SEEDS:-1 2 3 4 5}
for seed in $seeds; do
    for init in default mask; do
        out=runs/headline/$task-$init-s$seed
        echo "== $task, init $init, seed $seed -> $out"
        ./maskprior --task "$task" --init "$init" --seed "$seed" --out "$out" $RUN_FLAGS | \
            grep -E "^maskprior:|^eval|^step .*/.* \| loss" | grep -vE "^step +[0-9]+/[0-9]+ .*ETA [1-9]" || true
    done
done
python3 tools/headline_table.py runs/headline "$task"
