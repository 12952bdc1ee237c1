#!/bin/sh
# make table-boolean-data-g, or experiments/boolean_data_g_table.sh [--seeds N]: G from the target
# (the oracle: f's Fourier support, or a named task's own G, both of which read f where it is held
# out) against G from the seen data alone (--g-from data: the sparsest interpolator's support), on
#   the paper's three    2parity, maj3, cyclic3 (cyclic3's own G is one way; read off a support,
#                        both ways)
#   the targets table's  parity3, parity3-cube, maj5, maj5-cube, staircase, triples, sparse
#                        (experiments/boolean_targets_table.sh says what each asks)
#   threesym             GOTU's parity hold-out, x0 x1 x2 = -1 (half the cube): its data's sparsest
#                        interpolator is its MDI, of degree 1, so the data G links no two bits
#   2parity-mdi          x0 + x1 - 1 at x0 = x1 = -1, 2parity's MDI as a target: its seen data is
#                        2parity's, so its data G is 2parity's (x0 with x1), its oracle G is not
#   parity4-half         x0 x1 x2 x3 held out where x0 x1 = 1: seen, it is -x2 x3, and the data G
#                        leaves out x0 and x1
#   asym-pair            x0 x1 + 0.5 x2 at x0 = x1 = -1, and
#   asym-chain           x0 x1 x2 + 0.5 x2 x3 at x0 = x1 = -1: 20% of f's Fourier weight on
#                        monomials without a held-out bit, and no permutation of the bits that keeps
#                        f moves a held-out point onto a seen one
#   shared-pair          x0 x1 x2 + x1 x2 x3 + x1 x2 x4 at x0 = x1 = -1, and
#   shared-four          the same with five terms (x1 x2 times x0 + x3 + x4 + x5 + x6): no weight
#                        off the held-out bits, but x0 trades places with x3 (x4, ...), and x1 with
#                        x2, and f stays, which moves 7/8 (31/32) of the held-out points onto seen ones
# (those last four separate the two readings of the targets table's finding), each with the default
# init, the mask with the oracle G and the mask with the data G, for seeds 1..N (3 unless --seeds
# says otherwise). The make-run model (C 32, L 2, NH 2, HS 16, MLP 32, batch 64, 1500 steps, Adam +
# L2, lr 1e-3, wd 1e-3, c 6), on the CPU: 153 runs (17 targets, 3 variants, 3 seeds), then the table
# (tools/boolean_data_g_table.py, from the runs' metrics.json). Runs land in
# runs/table-boolean-data-g/cpu; a finished run is kept and an interrupted one continues, as for
# every table (experiments/table_common.sh: JOBS=N, SCHEDULER=list|slurm). There is no --paper size.
set -e
cd "$(dirname "$0")/.."
. experiments/table_common.sh
no_paper_size
root=runs/table-boolean-data-g/$size
common="--optimizer adam --wd 1e-3 --lr 1e-3"
start=$(date +%s)
{
    # name, then the task's flags: words without spaces (experiments/run_many.sh)
    while read -r name task; do
        runs_for_seeds "$root/$name-default" "$task --init default $common"
        runs_for_seeds "$root/$name-mask" "$task --init mask $common"
        runs_for_seeds "$root/$name-mask-g-data" "$task --init mask --g-from data $common"
    done <<TARGETS
2parity --task 2parity
maj3 --task maj3
cyclic3 --task cyclic3
parity3 --task boolean --target x0*x1*x2 --unseen x0=-1,x1=-1
parity3-cube --task boolean --target x0*x1*x2 --unseen x0=-1,x1=-1,x2=-1
maj5 --task boolean --target sign(x0+x1+x2+x3+x4) --unseen x0=-1,x1=-1
maj5-cube --task boolean --target sign(x0+x1+x2+x3+x4) --unseen x0=-1,x1=-1,x2=-1
staircase --task boolean --target x0+x0*x1+x0*x1*x2 --unseen x0=-1,x1=-1
triples --task boolean --target x0*x1*x2+x2*x3*x4+x4*x5*x6 --unseen x0=-1,x1=-1
sparse --task boolean --target x0*x1*x2+x3*x4*x5-0.5*x6 --unseen x0=-1,x1=-1
threesym --task threesym
2parity-mdi --task boolean --target x0+x1-1 --unseen x0=-1,x1=-1
parity4-half --task boolean --target x0*x1*x2*x3 --unseen x0*x1=1
asym-pair --task boolean --target x0*x1+0.5*x2 --unseen x0=-1,x1=-1
asym-chain --task boolean --target x0*x1*x2+0.5*x2*x3 --unseen x0=-1,x1=-1
shared-pair --task boolean --target x0*x1*x2+x1*x2*x3+x1*x2*x4 --unseen x0=-1,x1=-1
shared-four --task boolean --target x0*x1*x2+x1*x2*x3+x1*x2*x4+x1*x2*x5+x1*x2*x6 --unseen x0=-1,x1=-1
TARGETS
} | run_runs "$root"
stop_if_scheduled
echo "the runs took $(($(date +%s) - start)) s"
/usr/bin/python3 tools/boolean_data_g_table.py "$root"
