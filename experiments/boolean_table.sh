#!/bin/sh
# make table-boolean, or experiments/boolean_table.sh [--paper] [--seeds N]: the Boolean table.
# Trains 2parity, maj3, cyclic3 and threesym (GOTU's f_1, held out where x0 x1 x2 = -1) with the
# default, qk-svd, qk-opt and mask inits, and the mask frozen at its init (the control for
# "learnable"), for seeds 1..N (3 unless --seeds says otherwise), then prints mean ± std of the
# cube accuracy, unseen accuracy, MDI agreement and final prior mass beside the paper's numbers
# (tools/boolean_table.py, from the runs' metrics.json files).
#   default: the CPU-sized model of make run (C 32, L 2, NH 2, HS 16, MLP 32, batch 64,
#            1500 steps, Adam + L2, lr 1e-3, wd 1e-3, c 6): 60 runs, two at a time on a
#            2-core CPU (experiments/run_many.sh).
#   --paper: GOTU's model: C 256, L 12, NH 6, HS 64, MLP 256, batch 256, Adam + L2, GOTU's
#            recipes (aryol/GOTU, script.sh): lr 1e-5 (cyclic3, threesym 2e-5), wd 1e-3,
#            20 / 30 / 80 / 40 epochs. Meant for a GPU.
# Runs land in runs/table-boolean/cpu or .../paper; a run whose metrics.json exists is kept and
# an interrupted one continues from its checkpoint, so an interrupted table continues where it
# stopped (delete the folder to start over). JOBS=N runs N at once (by default one per core, or
# one per GPU); SCHEDULER=slurm writes the runs out as a Slurm job array, one GPU per run,
# instead of running them (experiments/table_common.sh).
set -e
cd "$(dirname "$0")/.."
. experiments/table_common.sh
root=runs/table-boolean/$size
for task in 2parity maj3 cyclic3 threesym; do
    if [ $size = paper ]; then
        case $task in
            2parity) epochs=20 lr=1e-5 ;; maj3) epochs=30 lr=1e-5 ;; cyclic3) epochs=80 lr=2e-5 ;;
            threesym) epochs=40 lr=2e-5 ;;
        esac
        flags="--width 256 --layers 12 --heads 6 --head-size 64 --mlp 256 --batch 256 --epochs $epochs --lr $lr"
    else
        flags="--lr 1e-3"
    fi
    for variant in default qk-svd qk-opt mask mask-frozen; do
        case $variant in mask-frozen) init="--init mask --freeze-mask" ;; *) init="--init $variant" ;; esac
        runs_for_seeds "$root/$task-$variant" "--task $task $init --optimizer adam --wd 1e-3 $flags"
    done
done | run_runs "$root"
stop_if_scheduled
/usr/bin/python3 tools/boolean_table.py "$root"
