#!/bin/sh
# make table-vision, or experiments/vision_table.sh [--paper] [--seeds N] [--epochs E]: the vision
# table. Trains a Vision Transformer on Fashion-MNIST and CIFAR-10 with the default, mimetic,
# impulse, qk-svd and mask inits (the last two from G, the 2-D 3x3 locality prior), and two
# controls: the default init with its position embedding scaled by 18 as impulse's is
# (default-pe18: a stronger position signal without impulse's structure) and the mask frozen at
# its init (mask-frozen: the prior without learning it); for seeds 1..N (3 unless --seeds says
# otherwise). Then it prints test accuracy mean ± std, each init's paired difference to default
# on the same seeds, and the step-0 and final prior mass, beside the paper's CIFAR-10 column
# (tools/vision_table.py, from the runs' log.jsonl and metrics.json), and draws the prior mass
# against the step (tools/plot.py).
#   default (CPU size, 42 runs, 83 minutes on a 2-core AMD EPYC: docs/results.md): C 64, L 4, NH 4,
#            HS 16, MLP 128, patch 4, batch 128, 2 epochs (--epochs E for more), AdamW lr 1e-3
#            wd 0.05 (on the weight matrices), warmup 5% then cosine, gradient clipping at 1, label
#            smoothing 0.1, random crop (padding 2 on the 28x28 Fashion-MNIST, 4 on CIFAR-10) and flip.
#   --paper: ViT-Tiny (C 192, L 12, NH 3, HS 64, MLP 768) with the impulse authors' timm recipe:
#            batch 512, AdamW lr 2e-3 wd 0.05, 300 epochs (--epochs E for fewer), 50 of them
#            linear warmup then cosine, label smoothing 0.1, RandAugment m9 (2 ops, timm's
#            mstd 0.5), mixup 0.8, cutmix 1.0, random erasing 0.25, drop-path 0.1, EMA 0.9999,
#            beside the crop and flip; meant for a GPU. One difference stays: patch 4 on the
#            32x32 images (an 8x8 grid), where the authors upsample to 224 and cut 16-pixel
#            patches (a 14x14 grid); for that, CIFAR-10 as an image folder and VISION_PAPER_GRID=
#            "--resize 224 --patch 16".
# Data: Fashion-MNIST from $FASHION_DIR (default: Debian's dataset-fashion-mnist folder);
# CIFAR-10 from $CIFAR10_DIR (default data/cifar-10-batches-bin, which data/get_cifar.sh
# fetches), either the official binary version or an image folder (train/<class>/*,
# test/<class>/*, e.g. CIFAR-10 as JPEG files), whichever the folder holds.
# Runs land in runs/table-vision/cpu or .../paper; a run whose metrics.json exists is kept and
# an interrupted one continues from its checkpoint, so an interrupted table continues where it
# stopped (delete the folder to start over). JOBS=N runs N at once (by default one per core, or
# one per GPU); SCHEDULER=slurm writes the runs out as a Slurm job array, one GPU per run,
# instead of running them (experiments/table_common.sh).
set -e
cd "$(dirname "$0")/.."
epochs=""
for arg in "$@"; do
    if [ "$want_epochs" = 1 ]; then epochs=$arg; want_epochs=0; continue; fi
    case $arg in --epochs) want_epochs=1 ;; *) rest="$rest $arg" ;; esac
done
# shellcheck disable=SC2086
set -- $rest
. experiments/table_common.sh
[ -n "$epochs" ] || { [ $size = paper ] && epochs=300 || epochs=2; }
fashion_dir=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
cifar_dir=${CIFAR10_DIR:-data/cifar-10-batches-bin}
if [ -f "$cifar_dir/data_batch_1.bin" ]; then cifar="--task cifar10 --data-dir $cifar_dir"
elif [ -d "$cifar_dir/train" ]; then cifar="--task images --data-dir $cifar_dir"
else
    echo "vision_table.sh: error: no CIFAR-10 in $cifar_dir (run sh data/get_cifar.sh 10, or set CIFAR10_DIR)" >&2
    exit 2
fi
root=runs/table-vision/$size
if [ $size = paper ]; then
    model="--width 192 --layers 12 --heads 3 --head-size 64 --mlp 768"
    recipe="${VISION_PAPER_GRID:---patch 4} --batch 512 --lr 2e-3 --randaugment 9 --mixup 0.8 --cutmix 1.0"
    recipe="$recipe --random-erase 0.25 --drop-path 0.1 --ema 0.9999"
else
    model="--width 64 --layers 4 --heads 4 --head-size 16 --mlp 128"
    recipe="--patch 4 --batch 128"
fi
for data in fashion-mnist cifar10; do
    if [ $data = fashion-mnist ]; then flags="--task fashion-mnist --data-dir $fashion_dir --crop-pad 2" train=60000
    else flags="$cifar --crop-pad 4" train=50000; fi
    # the authors' warmup: 50 epochs of ceil(train / 512) steps
    [ $size = paper ] && flags="$flags --warmup $((50 * ((train + 511) / 512)))"
    for variant in default default-pe18 mimetic impulse qk-svd mask mask-frozen; do
        case $variant in
            default-pe18) init="--init default --pe-scale 18" ;;
            mask-frozen) init="--init mask --freeze-mask" ;;
            *) init="--init $variant" ;;
        esac
        runs_for_seeds "$root/$data-$variant" \
            "$flags $init $model $recipe --epochs $epochs --eval-every 400 --log-every 100"
    done
done | run_runs "$root"
stop_if_scheduled
/usr/bin/python3 tools/vision_table.py "$root"
for data in fashion-mnist cifar10; do
    /usr/bin/python3 tools/plot.py "$root/$data"-*-s1 --out "$root/plots-$data"
done
