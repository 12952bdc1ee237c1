#!/bin/sh
# make table-boolean-targets, or experiments/boolean_targets_table.sh [--seeds N]: Boolean targets
# the paper did not run (--task boolean --target EXPR --unseen COND), each chosen to ask something:
#   parity3       x0*x1*x2 held out at x0 = x1 = -1: a parity whose monomial reaches past the
#                 held-out bits, as maj3's top monomial does (2parity's does not); MDI 75.00%
#   parity3-cube  the same parity held out at x0 = x1 = x2 = -1: the hold-out covers the whole
#                 monomial, as 2parity's and cyclic3's do (two held-out shapes of one target); 87.50%
#   maj5          sign(x0+...+x4) at x0 = x1 = -1: a majority of five; 90.62%
#   maj5-cube     the same at x0 = x1 = x2 = -1, where f is -1 on the whole held-out part; 93.75%
#   staircase     x0 + x0*x1 + x0*x1*x2 at x0 = x1 = -1: nested monomials, values -3..3; 87.50%
#   triples       x0*x1*x2 + x2*x3*x4 + x4*x5*x6 at x0 = x1 = -1: overlapping triples in a chain; 81.25%
#   sparse        x0*x1*x2 + x3*x4*x5 - 0.5*x6 at x0 = x1 = -1: disjoint triples and a half-weight
#                 bit (exact_cube on a grid of 0.5); 81.25%
# (the percentages: the MDI's sign accuracy over the cube), each with the default, qk-opt and mask
# inits and the mask frozen at its init (mask-frozen), and
# cyclic3's mask with its own one-way G beside the symmetric G read off its target; for seeds
# 1..N (3 unless --seeds says otherwise). The make-run model (C 32, L 2, NH 2, HS 16, MLP 32, batch
# 64, 1500 steps, Adam + L2, lr 1e-3, wd 1e-3, c 6), on the CPU: 90 runs (7 targets, 4 variants,
# 3 seeds, and 6 of cyclic3), then the table (tools/boolean_targets_table.py, from the runs'
# metrics.json), the MDI's cube accuracy beside each row. Runs land in
# runs/table-boolean-targets/cpu; a finished run is kept and an interrupted one continues, as for
# every table (experiments/table_common.sh: JOBS=N, SCHEDULER=list|slurm). There is no --paper size.
set -e
cd "$(dirname "$0")/.."
. experiments/table_common.sh
no_paper_size
root=runs/table-boolean-targets/$size
common="--optimizer adam --wd 1e-3 --lr 1e-3"
cyclic3="x0*x1*x2+x1*x2*x3+x2*x3*x4+x3*x4*x5+x4*x5*x6+x5*x6*x7+x6*x7*x8+x7*x8*x9+x8*x9*x10+x9*x10*x11"
cyclic3="$cyclic3+x10*x11*x12+x11*x12*x13+x12*x13*x14+x13*x14*x0+x14*x0*x1"
start=$(date +%s)
{
    # name, target, held-out subcube: words without spaces (experiments/run_many.sh)
    while read -r name target unseen; do
        for variant in default qk-opt mask mask-frozen; do
            case $variant in mask-frozen) init="--init mask --freeze-mask" ;; *) init="--init $variant" ;; esac
            runs_for_seeds "$root/$name-$variant" "--task boolean --target $target --unseen $unseen $init $common"
        done
    done <<EOF
parity3 x0*x1*x2 x0=-1,x1=-1
parity3-cube x0*x1*x2 x0=-1,x1=-1,x2=-1
maj5 sign(x0+x1+x2+x3+x4) x0=-1,x1=-1
maj5-cube sign(x0+x1+x2+x3+x4) x0=-1,x1=-1,x2=-1
staircase x0+x0*x1+x0*x1*x2 x0=-1,x1=-1
triples x0*x1*x2+x2*x3*x4+x4*x5*x6 x0=-1,x1=-1
sparse x0*x1*x2+x3*x4*x5-0.5*x6 x0=-1,x1=-1
EOF
    runs_for_seeds "$root/cyclic3-own-G-mask" "--task cyclic3 --init mask $common"
    runs_for_seeds "$root/cyclic3-derived-G-mask" \
        "--task boolean --target $cyclic3 --unseen x0=-1,x1=-1,x2=-1 --init mask $common"
} | run_runs "$root"
stop_if_scheduled
echo "the runs took $(($(date +%s) - start)) s"
/usr/bin/python3 tools/boolean_targets_table.py "$root"
