#!/bin/sh
# make gpu-check: everything that needs a GPU, in one script.
#   1. build for sm_90 (headers from gpu_include/ when the machine has no Debian packages);
#      BUILD=0 uses the ./maskprior, tests/unit_tests and dev/ programs already there instead
#      (built elsewhere with `make maskprior tests/unit_tests dev ARCH=90 HOST_MARCH=x86-64-v3`
#      and carried along)
#   2. the GPU test cases: every kernel (every attention version) against its CPU reference, a
#      whole training step GPU vs CPU, a short GPU training run that must learn
#   2b. the kernel lab (dev/): every attention version checked and timed, forward and backward
#   3. the GPU kernel tests under compute-sanitizer memcheck (racecheck, slower, after step 5;
#      some GPU machines' runtimes refuse the tool: reported as "refused", not as a failure)
#   4. the paper-size GOTU model on 2parity, 5 epochs: default and mask init (the full 20-epoch
#      runs are make table-boolean BOOLEAN_ARGS=--paper); Lee et al.'s model size on add3 at 0.4%
#      of the pairs, 300 steps: default and mask; ViT-Tiny on CIFAR-10 (data/cifar10-jpeg or
#      $CIFAR10_DIR: the binary version or an image folder; else Fashion-MNIST), 300 steps: mask;
#      a language model (C 384, L 6, T 256) on a token folder ($LM_DIR, default
#      data/tinystories-sample-bpe1024), 300 steps, the ALiBi-shaped mask, then 100 sampled tokens;
#      and the logits' kernels past 2^31 floats (MASKPRIOR_LARGE_TESTS=1, ~18 GB of GPU memory)
#   5. the same model and batch timed in PyTorch eager and torch.compile against ours
#   5c. the attention layer alone, forward + backward with dM: kernels 1-3 against PyTorch eager,
#      torch.compile and FlexAttention with a learnable bias, at T 64 and 256, with a bitwise
#      determinism check of each (tools/bench_attention.py)
#   6. the whole test suite (the CPU cases too, on this machine's CPU)
# then one summary table. Every step has a time limit (a step past it is recorded as such).
# Logs go to $OUT (default /tmp/maskprior-gpu-check).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/maskprior-gpu-check}
mkdir -p "$OUT"
# the Python with PyTorch: $MASKPRIOR_PYTHON, else the first python3 on the PATH that has it
PY=python3
for p in "${MASKPRIOR_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] && "$p" -c "import torch" 2>/dev/null && { PY=$p; break; }
done
export MASKPRIOR_PYTHON="$PY"
inc=""
[ -d gpu_include ] && inc="EXTRA_INCLUDE=gpu_include"
results=""
# record NAME RESULT: one row of the summary, also printed at once (a run cut short by its
# caller's time limit still shows what it had done)
record() { results="$results$1|$2
"; echo "-> $1: $2"; }
# failed NAME LIMIT RC: the row for a step that did not succeed
failed() { if [ "$3" = 124 ]; then record "$1" "FAILED: did not finish in $2 s"; else record "$1" "FAILED (exit $3)"; fi; }

echo "== 1. build (sm_90)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [ "${BUILD:-1}" = 0 ]; then
    if [ -x maskprior ] && [ -x tests/unit_tests ] && [ -x dev/attention_forward ] && [ -x dev/attention_backward ]
    then record build "prebuilt binaries (BUILD=0)"
    else record build "FAILED: BUILD=0 but ./maskprior, tests/unit_tests or a dev/ program is missing"; fi
elif make -B maskprior tests/unit_tests dev ARCH=90 $inc > "$OUT/build.log" 2>&1; then record build ok
else cat "$OUT/build.log"; record build FAILED; fi

echo "== 2. the GPU test cases"
if timeout 300 ./tests/unit_tests --no-intro=true -tc="*GPU*" > "$OUT/tests-gpu.log" 2>&1
then record "unit tests (GPU cases)" "ok, $(grep 'test cases:' "$OUT/tests-gpu.log" | tr -s ' ')"
else failed "unit tests (GPU cases)" 300 $?; fi
grep -E "ERROR|FATAL|test cases:" "$OUT/tests-gpu.log"

echo "== 2b. the kernel lab: every attention version, checked and timed"
for program in attention_forward attention_backward; do
    if timeout 120 ./dev/$program > "$OUT/dev-$program.txt" 2>&1
    then record "dev/$program" "every version matches the CPU (table in $OUT/dev-$program.txt)"
    else failed "dev/$program" 120 $?; fi
    cat "$OUT/dev-$program.txt"
done

# sanitize TOOL: the GPU kernel tests under compute-sanitizer's TOOL
sanitize() {
    tool=$1
    timeout 180 compute-sanitizer --tool $tool --error-exitcode 9 ./tests/unit_tests --no-intro=true \
        -tc="GPU attention*,GPU matmul*,GPU embedding*,GPU losses*,GPU fused*,GPU LayerNorm a warp*,GPU cross-entropy with*" \
        > "$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then record "compute-sanitizer $tool" ok
    elif grep -q -E "Device not supported|not supported on this" "$OUT/sanitizer-$tool.log"
    then record "compute-sanitizer $tool" "refused by this machine's runtime (not a failure)"
    else tail -20 "$OUT/sanitizer-$tool.log"; failed "compute-sanitizer $tool" 180 $rc; fi
}
echo "== 3. compute-sanitizer memcheck on the GPU kernel tests"
sanitize memcheck

echo "== 4. paper-size model on 2parity (C 256, L 12, NH 6, HS 64, MLP 256, GOTU's Adam lr 1e-5 wd 1e-3, batch 256, 5 epochs)"
PAPER="--task 2parity --device cuda --width 256 --layers 12 --heads 6 --head-size 64 --mlp 256 --optimizer adam --lr 1e-5 --wd 1e-3 --batch 256 --epochs 5 --eval-every 240"
for init in default mask; do
    if timeout 150 ./maskprior $PAPER --init $init --out "$OUT/paper-2parity-$init" > "$OUT/paper-$init.log" 2>&1; then
        m="$OUT/paper-2parity-$init/metrics.json"
        record "2parity paper-size $init" "$($PY -c "import json; m = json.load(open('$m')); print('acc_cube %.4f acc_unseen %.4f mdi_agreement %.4f prior_mass %s, %.0f s' % (m['acc_cube'], m['acc_unseen'], m['mdi_agreement'], ' '.join('%.2f' % x for x in m['prior_mass']), m['seconds']))")"
    else rc=$?; tail -5 "$OUT/paper-$init.log"; failed "2parity paper-size $init" 150 $rc; fi
    grep -E "^step .*/480|^eval" "$OUT/paper-$init.log" | tail -3
done

echo "== 4b. Lee et al.'s model size on add3, 0.4% of the pairs (C 384, L 6, NH 6, HS 64, MLP 1536, batch 256, 300 steps)"
ADD="--task add3 --data-frac 0.004 --device cuda --width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --batch 256 --steps 300 --eval-every 300"
for init in default mask; do
    if timeout 120 ./maskprior $ADD --init $init --out "$OUT/paper-add3-$init" > "$OUT/add3-$init.log" 2>&1; then
        m="$OUT/paper-add3-$init/metrics.json"
        record "add3 paper-size $init" "$($PY -c "import json; m = json.load(open('$m')); print('seq_acc %.4f digit_acc %.4f prior_mass %s, %.0f s' % (m['seq_acc'], m['digit_acc'], ' '.join('%.2f' % x for x in m['prior_mass']), m['seconds']))")"
    else rc=$?; tail -5 "$OUT/add3-$init.log"; failed "add3 paper-size $init" 120 $rc; fi
    grep -E "^eval" "$OUT/add3-$init.log" | tail -2
done

echo "== 4c. ViT-Tiny (C 192, L 12, NH 3, HS 64, MLP 768, patch 4), mask init, batch 128, 300 steps"
cifar=${CIFAR10_DIR:-data/cifar10-jpeg}
if [ -f "$cifar/data_batch_1.bin" ]; then vision="--task cifar10 --data-dir $cifar"
elif [ -d "$cifar/train" ]; then vision="--task images --data-dir $cifar"
elif [ -d fashion-mnist ]; then vision="--task fashion-mnist --data-dir fashion-mnist"
else vision="--task fashion-mnist"; fi
VIT="$vision --device cuda --init mask --width 192 --layers 12 --heads 3 --head-size 64 --mlp 768 --patch 4 --batch 128 --steps 300 --eval-every 300 --log-every 100"
if timeout 240 ./maskprior $VIT --out "$OUT/vit-tiny-mask" > "$OUT/vit.log" 2>&1; then
    m="$OUT/vit-tiny-mask/metrics.json"
    record "ViT-Tiny mask ($(echo $vision | cut -d' ' -f2))" "$($PY -c "import json; m = json.load(open('$m')); print('acc %.4f train_acc %.4f prior_mass %.2f-%.2f, %.0f s' % (m['acc'], m.get('train_acc', 0), min(m['prior_mass']), max(m['prior_mass']), m['seconds']))")"
else rc=$?; tail -5 "$OUT/vit.log"; failed "ViT-Tiny mask" 240 $rc; fi
grep -E "^step|^eval" "$OUT/vit.log" | tail -2

echo "== 4d. a language model (C 384, L 6, NH 6, HS 64, MLP 1536, T 256, batch 64), ALiBi-shaped mask, 300 steps"
lm_dir=${LM_DIR:-data/tinystories-sample-bpe1024}
LM="--task lm --data-dir $lm_dir --device cuda --init mask --mask-prior alibi --width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --seq-len 256 --batch 64 --steps 300 --eval-every 300 --eval-windows 128 --log-every 100"
if [ ! -f "$lm_dir/train.bin" ]; then record "LM mask-alibi" "skipped: no token folder $lm_dir (data/prepare_text.py)"
elif timeout 150 ./maskprior $LM --out "$OUT/lm-alibi" > "$OUT/lm.log" 2>&1; then
    m="$OUT/lm-alibi/metrics.json"
    record "LM mask-alibi" "$($PY -c "import json; m = json.load(open('$m')); print('val_loss %.4f bits_per_byte %.4f prior_mass %s, %.0f s' % (m['val_loss'], m['bits_per_byte'], ' '.join('%.2f' % x for x in m['prior_mass']), m['seconds']))")"
    timeout 30 ./maskprior --generate "$OUT/lm-alibi/model.safetensors" --prompt "Once upon a time" --sample-tokens 100 \
        --top-k 40 --temperature 0.8 > "$OUT/lm-sample.txt" 2>&1 && cat "$OUT/lm-sample.txt"
else rc=$?; tail -5 "$OUT/lm.log"; failed "LM mask-alibi" 150 $rc; fi
grep -E "^step|^eval" "$OUT/lm.log" 2>/dev/null | tail -2

echo "== 4e. the logits' kernels past 2^31 floats"
if MASKPRIOR_LARGE_TESTS=1 timeout 120 ./tests/unit_tests --no-intro=true -tc="*past 2^31*" > "$OUT/large.log" 2>&1
then record "logits past 2^31 floats" "ok, $(grep 'assertions:' "$OUT/large.log" | tr -s ' ')"
else failed "logits past 2^31 floats" 120 $?; fi

echo "== 5. speed against PyTorch (same model and batch)"
if timeout 150 $PY tools/bench_gpu.py > "$OUT/bench.log" 2>&1; then record "speed vs PyTorch" "$(tail -1 "$OUT/bench.log")"
else failed "speed vs PyTorch" 150 $?; fi
cat "$OUT/bench.log"

echo "== 5c. the attention layer alone against PyTorch eager, torch.compile and FlexAttention"
if timeout 240 $PY tools/bench_attention.py > "$OUT/bench-attention.log" 2>&1
then record "attention vs PyTorch" "$(tail -1 "$OUT/bench-attention.log")"
else failed "attention vs PyTorch" 240 $?; fi
cat "$OUT/bench-attention.log"

echo "== 5b. compute-sanitizer racecheck on the GPU kernel tests"
sanitize racecheck

echo "== 6. the whole test suite (CPU cases on this machine's CPU)"
if timeout 400 ./tests/unit_tests --no-intro=true > "$OUT/tests.log" 2>&1
then record "unit tests (all)" "ok, $(grep 'test cases:' "$OUT/tests.log" | tr -s ' ')"
else failed "unit tests (all)" 400 $?; fi
grep -E "ERROR|FATAL|test cases:" "$OUT/tests.log"

echo
echo "== summary (logs in $OUT)"
printf '%s' "$results" | awk -F'|' '{ printf "| %-28s | %s\n", $1, $2 }'
! printf '%s' "$results" | grep -q FAILED
