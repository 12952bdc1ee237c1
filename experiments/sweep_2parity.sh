#!/bin/sh
# experiments/sweep_2parity.sh [SEEDS="1 2"]: where does the mask's effect on 2parity come
# from, or why does it not come? One setting at a time is changed from the base setting (the
# make-run model: C 32, L 2, NH 2, HS 16, MLP 32, batch 64, 1500 steps, Adam + L2, lr 1e-3,
# wd 1e-3, c 6, DESIGN.md's G, shared mask in every layer, token lookup, MSE), and every
# setting is trained with the mask init, and with the default init where the setting changes
# the model or its training rather than G. Runs that finished before are kept (delete
# runs/sweep-2parity to start over). Then prints the table (tools/boolean_table.py).
# About 25 minutes on a 2-core CPU.
set -e
cd "$(dirname "$0")/.."
seeds=${SEEDS:-1 2}
root=runs/sweep-2parity
base="--task 2parity --optimizer adam --lr 1e-3 --wd 1e-3"  # 1500 steps, eval every 500: the defaults
G=experiments/structures

# name | inits | flags added to the base
settings="
base|default mask|
G-noself|mask|--mask-structure $G/2parity-noself.txt
G-clsreads|mask|--mask-structure $G/2parity-clsreads.txt
G-chain|mask|--mask-structure $G/2parity-chain.txt
G-block|mask|--mask-structure $G/2parity-block.txt
G-band|mask|--mask-structure $G/2parity-band.txt
c2|mask|--mask-c 2
c10|mask|--mask-c 10
per-head|mask|--mask-per-head
first-layer|mask|--prior-layers first
scalar|default mask|--encoding scalar
logistic|default mask|--loss logistic
scalar+logistic|default mask|--encoding scalar --loss logistic
lr3e-3|default mask|--lr 3e-3
lr1e-4|default mask|--lr 1e-4 --steps 6000 --eval-every 2000
gotu-lr1e-5|default mask|--lr 1e-5 --batch 256 --epochs 20 --eval-every 1000
adamw|default mask|--optimizer adamw
wide-deep|default mask|--width 64 --layers 4 --heads 4 --mlp 64
long|default mask|--steps 6000 --eval-every 2000
"

echo "$settings" | while IFS='|' read -r name inits flags; do
    [ -z "$name" ] && continue
    for init in $inits; do
        for seed in $seeds; do
            out=$root/$name/2parity-$init-s$seed
            [ -f "$out/metrics.json" ] && continue
            mkdir -p "$out"
            # shellcheck disable=SC2086  # flags are words
            if ! ./maskprior $base $flags --init "$init" --seed "$seed" --out "$out" > "$out/stdout.log" 2>&1; then
                cat "$out/stdout.log"
                exit 1
            fi
            echo "$name $init s$seed: $(grep -E '^eval' "$out/stdout.log" | tail -1 | cut -c1-120)"
        done
    done
done
/usr/bin/python3 tools/boolean_table.py "$root" --by-setting
