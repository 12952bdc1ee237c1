#!/bin/sh
# make table-prior-robustness, or experiments/prior_robustness.sh [--seeds N]: when does learning
# the mask matter? The Boolean tasks with a prior that is partly wrong, for learnable and frozen
# masks, at three mask speeds (docs/results.md, "A wrong prior"). At the make-run size (C 32, L 2,
# NH 2, HS 16, MLP 32, batch 64, 1500 steps, Adam + L2, lr 1e-3, wd 1e-3), for seeds 1..N (3
# unless --seeds says otherwise):
#   1. maj3, cyclic3 and 2parity, c = 6, with four G: the task's own, --prior-noise 0.1 and 0.3,
#      and --prior-drop 1 (one edge the target needs removed); for each, the mask, the mask
#      frozen at its init (mask-frozen) and the prior in the QK weights (qk-opt); and the default
#      init once per task and seed (G does not reach it): 3 x (4 x 3 + 1) = 39 runs a seed.
#   2. maj3 and cyclic3, with --prior-noise 0.3 and with the task's own G: the mask at c = 2 and
#      6 with its learning rate 1, 10 and 100 times lr (--mask-lr-scale), and mask-frozen at c = 2
#      (at c = 6, the frozen mask and the scale 1 are part 1's runs): 2 x 2 x 6 = 24 runs a seed.
# So 63 runs a seed, 189 for 3 seeds. The wrong G is drawn from the run's seed (--prior-seed's
# default), so the inits of one seed share it. Then tools/prior_robustness_table.py prints mean
# ± std of the cube and unseen accuracy, each run's paired difference against the frozen mask
# of its task, G, c and seed, the final prior mass on the given G and on the true one, and the
# mask's drift; and draws accuracy against the noise P, learnable against frozen, into
# ROOT/prior-robustness.png.
# Runs land in runs/table-prior-robustness/cpu/<G>/<task>-<variant>-s<seed> (<G>: true, noise0.1,
# noise0.3, drop1, with -c2 for c = 2; variants mask-lr10, mask-lr100 for the faster masks); a run
# whose metrics.json exists is kept and an interrupted one continues from its checkpoint. JOBS=N
# runs N at once (by default one per core, or one per GPU); SCHEDULER=slurm writes the runs out as
# a Slurm job array instead (experiments/table_common.sh). --paper is refused: the question is
# asked at the CPU size.
set -e
cd "$(dirname "$0")/.."
. experiments/table_common.sh
no_paper_size
root=runs/table-prior-robustness/$size
model="--optimizer adam --wd 1e-3 --lr 1e-3"
start=$(date +%s)

# runs G_NAME G_FLAGS TASK VARIANT...: each variant of TASK with that G, for every seed
runs() {
    g_name=$1 g_flags=$2 task=$3
    shift 3
    for variant in "$@"; do
        case $variant in
            mask-frozen) init="--init mask --freeze-mask" ;;
            mask-lr*) init="--init mask --mask-lr-scale ${variant#mask-lr}" ;;
            *) init="--init $variant" ;;
        esac
        runs_for_seeds "$root/$g_name/$task-$variant" "--task $task $init $g_flags $model"
    done
}

{
    for task in maj3 cyclic3 2parity; do
        runs true "" $task default mask mask-frozen qk-opt
        runs noise0.1 "--prior-noise 0.1" $task mask mask-frozen qk-opt
        runs noise0.3 "--prior-noise 0.3" $task mask mask-frozen qk-opt
        runs drop1 "--prior-drop 1" $task mask mask-frozen qk-opt
    done
    for task in maj3 cyclic3; do
        runs true "" $task mask-lr10 mask-lr100
        runs noise0.3 "--prior-noise 0.3" $task mask-lr10 mask-lr100
        runs true-c2 "--mask-c 2" $task mask mask-frozen mask-lr10 mask-lr100
        runs noise0.3-c2 "--prior-noise 0.3 --mask-c 2" $task mask mask-frozen mask-lr10 mask-lr100
    done
} | run_runs "$root"
stop_if_scheduled
echo "prior_robustness.sh: the runs took $((($(date +%s) - start + 30) / 60)) minutes (wall time, runs kept from" \
    "an earlier call not counted)"
/usr/bin/python3 tools/prior_robustness_table.py "$root"
