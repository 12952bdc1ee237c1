#!/bin/sh
# make table-arithmetic, or experiments/arithmetic_table.sh [--paper] [--seeds N]: arithmetic
# with little data (docs/method.md, "The tasks and their G"). Trains add3 at data fractions 0.002, 0.004, 0.01 (the
# issue's) and 0.0005, 0.001 (below them, where the default stops learning at the CPU size)
# and mul2 at 0.03, 0.1, 0.3 with the default, qk-svd, qk-opt and mask inits for seeds 1..N (3 unless
# --seeds says otherwise), then prints mean ± std of the held-out sequence and digit accuracy
# and the final prior mass beside the paper's numbers (tools/arithmetic_table.py, from the
# runs' metrics.json files). The seed also draws the training pairs, so every init of one seed
# sees the same data.
#   default: a CPU-sized causal decoder, chosen by measurement (docs/results.md): C 64, L 2, NH 4,
#            HS 16, MLP 128, batch 64, 1500 steps, AdamW lr 1e-3, wd 1e-3, c 6, tested on
#            2000 held-out pairs: 96 runs of about 15 s, two at a time: 13 minutes on a 2-core CPU.
#   --paper: Lee et al.'s NanoGPT size: C 384, L 6, NH 6, HS 64, MLP 1536, batch 256, 5000
#            steps, lr 1e-3, tested on 10000 held-out pairs. Meant for a GPU.
# Runs land in runs/table-arithmetic/cpu or .../paper; a run whose metrics.json exists is kept
# and an interrupted one continues from its checkpoint, so an interrupted table continues where
# it stopped (delete the folder to start over). JOBS=N runs N at once (by default one per core,
# or one per GPU); SCHEDULER=slurm writes the runs out as a Slurm job array, one GPU per run,
# instead of running them (experiments/table_common.sh).
set -e
cd "$(dirname "$0")/.."
. experiments/table_common.sh
if [ $size = paper ]; then
    flags="--width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --batch 256 --steps 5000 --max-test 10000"
else
    flags="--width 64 --layers 2 --heads 4 --head-size 16 --mlp 128 --batch 64 --steps 1500 --max-test 2000"
fi
root=runs/table-arithmetic/$size
for setting in add3:0.0005 add3:0.001 add3:0.002 add3:0.004 add3:0.01 mul2:0.03 mul2:0.1 mul2:0.3; do
    task=${setting%%:*}
    frac=${setting#*:}
    for init in default qk-svd qk-opt mask; do
        runs_for_seeds "$root/$task-$frac-$init" \
            "--task $task --data-frac $frac --init $init --lr 1e-3 --wd 1e-3 $flags --eval-every 100000"
    done
done | run_runs "$root"
stop_if_scheduled
/usr/bin/python3 tools/arithmetic_table.py "$root"
