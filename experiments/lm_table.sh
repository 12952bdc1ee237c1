#!/bin/sh
# make table-lm, or experiments/lm_table.sh [--paper] [--seeds N] [--steps S]: the language table.
# Trains a causal language model on a TinyStories sample and on WikiText-2 with the default init
# and four mask priors (the causal window of 16 keys, learnable or frozen; the ALiBi-shaped
# distance prior, learnable or frozen) and qk-svd (the window's pattern written into Wq, Wk),
# for seeds 1..N (2 unless --seeds says otherwise), then prints validation loss and bits per byte
# as mean ± std, each init's paired difference to default on the same seeds, and the final prior
# mass (tools/lm_table.py, from the runs' metrics.json), and draws the prior mass against the step.
#   default (CPU size, about 40 minutes on 2 cores): C 64, L 2, NH 4, HS 16, MLP 256, T 64,
#            batch 32, 2000 steps (--steps S for more), AdamW lr 1e-3 wd 0.1, warmup 5% then
#            cosine to 0, gradient clipping at 1; the same recipe for every init.
#   --paper: C 384, L 6, NH 6, HS 64, MLP 1536, T 256, batch 64, 20000 steps; meant for a GPU.
# Data: token folders that data/prepare_text.py wrote: $TINYSTORIES_DIR (default
# data/tinystories-sample-bpe1024) and $WIKITEXT_DIR (default data/wikitext2-bpe1024); each
# folder's meta.json says which text files and which split it holds (data/README.md).
# Runs land in runs/table-lm/cpu or .../paper; a run whose metrics.json exists is kept and an
# interrupted one continues from its checkpoint, so an interrupted table continues where it
# stopped (delete the folder to start over). JOBS=N runs N at once (by default one per core, or
# one per GPU); SCHEDULER=slurm writes the runs out as a Slurm job array, one GPU per run,
# instead of running them (experiments/table_common.sh).
set -e
cd "$(dirname "$0")/.."
steps=""
for arg in "$@"; do
    if [ "$want_steps" = 1 ]; then steps=$arg; want_steps=0; continue; fi
    case $arg in --steps) want_steps=1 ;; *) rest="$rest $arg" ;; esac
done
# shellcheck disable=SC2086
set -- $rest
. experiments/table_common.sh
case "$rest" in *--seeds*) ;; *) count=2 ;; esac  # 2 seeds here unless --seeds says otherwise
[ -n "$steps" ] || { [ $size = paper ] && steps=20000 || steps=2000; }
tinystories=${TINYSTORIES_DIR:-data/tinystories-sample-bpe1024}
wikitext=${WIKITEXT_DIR:-data/wikitext2-bpe1024}
for dir in "$tinystories" "$wikitext"; do
    if [ ! -f "$dir/train.bin" ]; then
        echo "lm_table.sh: error: no token folder $dir (data/README.md: data/prepare_text.py writes one)" >&2
        exit 2
    fi
done
root=runs/table-lm/$size
if [ $size = paper ]; then model="--width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --seq-len 256 --batch 64"
else model="--width 64 --layers 2 --heads 4 --head-size 16 --mlp 256 --seq-len 64 --batch 32"; fi
for data in tinystories wikitext2; do
    [ $data = tinystories ] && dir=$tinystories || dir=$wikitext
    for variant in default mask mask-frozen mask-alibi mask-alibi-frozen qk-svd; do
        case $variant in
            default) init="--init default" ;;
            mask) init="--init mask" ;;
            mask-frozen) init="--init mask --freeze-mask" ;;
            mask-alibi) init="--init mask --mask-prior alibi" ;;
            mask-alibi-frozen) init="--init mask --mask-prior alibi --freeze-mask" ;;
            qk-svd) init="--init qk-svd" ;;
        esac
        runs_for_seeds "$root/$data-$variant" \
            "--task lm --data-dir $dir $init $model --steps $steps --eval-every 250 --eval-windows 512 --log-every 100"
    done
done | run_runs "$root"
stop_if_scheduled
/usr/bin/python3 tools/lm_table.py "$root"
for data in tinystories wikitext2; do
    /usr/bin/python3 tools/plot.py "$root/$data"-*-s1 --out "$root/plots-$data"
done
