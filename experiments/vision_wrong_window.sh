#!/bin/sh
# experiments/vision_wrong_window.sh [--seeds N]: the wrong-prior question on images, cheaply
# (docs/results.md, "A wrong prior"). CIFAR-10 at the vision table's CPU size and recipe
# (experiments/vision_table.sh: C 64, L 4, NH 4, HS 16, MLP 128, patch 4, batch 128, 2 epochs),
# the mask init with G's 3x3 window replaced by a shifted one: patch (r, c) is given the 3x3
# window centred on (r, c + 3), its columns wrapping round the 8x8 grid (its rows cut at the top
# and bottom as the true window's are), so that no key it is given is itself or a neighbour
# (CLS still with all). For
# seeds 1..N (2 unless --seeds says otherwise):
#   cifar10-shifted       mask and mask-frozen on the shifted window
#   cifar10-shifted-lr10  the mask on the shifted window, learning at 10 x lr (--mask-lr-scale 10)
#   cifar10               the mask on the true window at lr (the vision table's mask run, here
#                         so that each seed's shifted runs have their true-window pair)
#   cifar10-lr10          the mask on the true window at 10 x lr
# 10 runs for 2 seeds: 4-5 minutes each two at a time on a 2-core CPU (the vision table's mask
# runs), 11-14 minutes when other work shares its cores (docs/results.md). The shifted G is
# written to ROOT/shifted-window.txt (--mask-structure). Then tools/vision_table.py prints test
# accuracy and the prior mass on the G each run was given. Runs land in
# runs/vision-wrong-window/cpu/; kept when finished, continued when interrupted; JOBS=N runs N at
# once. CIFAR-10 from $CIFAR10_DIR (default data/cifar-10-batches-bin), as vision_table.sh reads it.
set -e
cd "$(dirname "$0")/.."
count=2
case "${1:-}" in
    "") ;;
    --seeds) count=${2:-} ;;
    *) echo "vision_wrong_window.sh: error: unknown argument $1 (use --seeds N)" >&2; exit 2 ;;
esac
case $count in
    ''|*[!0-9]*|0) echo "vision_wrong_window.sh: error: --seeds needs a count of at least 1" >&2; exit 2 ;;
esac
cifar_dir=${CIFAR10_DIR:-data/cifar-10-batches-bin}
if [ -f "$cifar_dir/data_batch_1.bin" ]; then cifar="--task cifar10 --data-dir $cifar_dir"
elif [ -d "$cifar_dir/train" ]; then cifar="--task images --data-dir $cifar_dir"
else
    echo "vision_wrong_window.sh: error: no CIFAR-10 in $cifar_dir (run sh data/get_cifar.sh 10, or set" \
        "CIFAR10_DIR)" >&2
    exit 2
fi
root=runs/vision-wrong-window/cpu
mkdir -p $root
# G (65 x 65): token 0 is CLS, token 1 + 8r + c the patch at (r, c)
/usr/bin/python3 - "$root/shifted-window.txt" <<'EOF'
import os
import sys
side, shift = 8, 3
T = 1 + side * side
rows = []
for i in range(T):
    row = []
    for j in range(T):
        if i == 0 or j == 0:
            row.append(1)
            continue
        (r, c), (r2, c2) = divmod(i - 1, side), divmod(j - 1, side)
        row.append(int(abs(r2 - r) <= 1 and (c2 - (c + shift)) % side in (0, 1, side - 1)))
    rows.append(" ".join(map(str, row)))
with open(sys.argv[1] + ".part", "w") as f:
    f.write(f"# the 3x3 window shifted {shift} columns right, wrapping (experiments/vision_wrong_window.sh)\n")
    f.write("\n".join(rows) + "\n")
os.replace(sys.argv[1] + ".part", sys.argv[1])
EOF
flags="$cifar --crop-pad 4 --width 64 --layers 4 --heads 4 --head-size 16 --mlp 128 --patch 4 --batch 128"
flags="$flags --epochs 2 --eval-every 400 --log-every 100"
shifted="--mask-structure $root/shifted-window.txt"
start=$(date +%s)
seed=1
while [ "$seed" -le "$count" ]; do
    echo "$root/cifar10-shifted-mask-s$seed $flags --init mask $shifted --seed $seed"
    echo "$root/cifar10-shifted-mask-frozen-s$seed $flags --init mask --freeze-mask $shifted --seed $seed"
    echo "$root/cifar10-shifted-lr10-mask-s$seed $flags --init mask --mask-lr-scale 10 $shifted --seed $seed"
    echo "$root/cifar10-mask-s$seed $flags --init mask --seed $seed"
    echo "$root/cifar10-lr10-mask-s$seed $flags --init mask --mask-lr-scale 10 --seed $seed"
    seed=$((seed + 1))
done | sh experiments/run_many.sh --keep-finished
echo "vision_wrong_window.sh: the runs took $((($(date +%s) - start + 30) / 60)) minutes (wall time)"
/usr/bin/python3 tools/vision_table.py "$root"
