#!/bin/sh
# make gpu-check: everything that needs a GPU, in one script that fits in 8 minutes on an H200.
#   1. build for sm_90 (headers from gpu_include/ when the machine has no Debian packages)
#   2. the whole test suite, GPU cases included: every kernel against its CPU reference, a
#      whole training step GPU vs CPU, a short GPU training run that must learn
#   3. the GPU tests once under compute-sanitizer, memcheck and racecheck
#   4. the paper-size GOTU model on 2parity: default, qk-svd and mask init;
#      Lee et al.'s model size on add3 at 0.4% of the pairs (1000 steps): default and mask
#   5. the same model and batch timed in PyTorch eager and torch.compile against ours
# then one summary table. Output also goes to $OUT (default /tmp/maskprior-gpu-check).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/maskprior-gpu-check}
mkdir -p "$OUT"
PY=${MASKPRIOR_PYTHON:-python3}
export MASKPRIOR_PYTHON="$PY"
inc=""
[ -d gpu_include ] && inc="EXTRA_INCLUDE=gpu_include"
results=""
record() { results="$results$1|$2
"; }

echo "== 1. build (sm_90)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if make -B maskprior tests/unit_tests ARCH=90 $inc > "$OUT/build.log" 2>&1; then record build ok
else cat "$OUT/build.log"; record build FAILED; fi

echo "== 2. tests, GPU cases included"
if ./tests/unit_tests --no-intro=true > "$OUT/tests.log" 2>&1; then record "unit tests (all)" ok
else record "unit tests (all)" FAILED; fi
grep -E "ERROR|test cases:" "$OUT/tests.log"

echo "== 3. compute-sanitizer on the GPU kernel tests"
for tool in memcheck racecheck; do
    if compute-sanitizer --tool $tool --error-exitcode 9 ./tests/unit_tests --no-intro=true \
        -tc="GPU attention*,GPU matmul*,GPU embedding*,GPU losses*" > "$OUT/sanitizer-$tool.log" 2>&1
    then record "compute-sanitizer $tool" ok
    else tail -20 "$OUT/sanitizer-$tool.log"; record "compute-sanitizer $tool" FAILED; fi
done

echo "== 4. paper-size model on 2parity (C 256, L 12, NH 6, HS 64, MLP 256, GOTU's Adam lr 1e-5 wd 1e-3, batch 256, 20 epochs)"
PAPER="--task 2parity --device cuda --width 256 --layers 12 --heads 6 --head-size 64 --mlp 256 --optimizer adam --lr 1e-5 --wd 1e-3 --batch 256 --epochs 20 --eval-every 480"
for init in default qk-svd mask; do
    if ./maskprior $PAPER --init $init --out "$OUT/paper-2parity-$init" > "$OUT/paper-$init.log" 2>&1; then
        m="$OUT/paper-2parity-$init/metrics.json"
        record "2parity paper-size $init" "$($PY -c "import json; m = json.load(open('$m')); print('acc_cube %.4f acc_unseen %.4f mdi_agreement %.4f prior_mass %s, %.0f s' % (m['acc_cube'], m['acc_unseen'], m['mdi_agreement'], ' '.join('%.2f' % x for x in m['prior_mass']), m['seconds']))")"
    else tail -5 "$OUT/paper-$init.log"; record "2parity paper-size $init" FAILED; fi
    grep -E "^step .*/1920|^eval" "$OUT/paper-$init.log" | tail -3
done

echo "== 4b. Lee et al.'s model size on add3, 0.4% of the pairs (C 384, L 6, NH 6, HS 64, MLP 1536, batch 256, 1000 steps)"
ADD="--task add3 --data-frac 0.004 --device cuda --width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --batch 256 --steps 1000 --eval-every 500"
for init in default mask; do
    if ./maskprior $ADD --init $init --out "$OUT/paper-add3-$init" > "$OUT/add3-$init.log" 2>&1; then
        m="$OUT/paper-add3-$init/metrics.json"
        record "add3 paper-size $init" "$($PY -c "import json; m = json.load(open('$m')); print('seq_acc %.4f digit_acc %.4f prior_mass %s, %.0f s' % (m['seq_acc'], m['digit_acc'], ' '.join('%.2f' % x for x in m['prior_mass']), m['seconds']))")"
    else tail -5 "$OUT/add3-$init.log"; record "add3 paper-size $init" FAILED; fi
    grep -E "^eval" "$OUT/add3-$init.log" | tail -2
done

echo "== 5. speed against PyTorch (same model and batch)"
if $PY tools/bench_gpu.py > "$OUT/bench.log" 2>&1; then record "speed vs PyTorch" "$(tail -1 "$OUT/bench.log")"
else record "speed vs PyTorch" FAILED; fi
cat "$OUT/bench.log"

echo
echo "== summary (logs in $OUT)"
printf '%s' "$results" | awk -F'|' '{ printf "| %-28s | %s\n", $1, $2 }'
! printf '%s' "$results" | grep -q FAILED
