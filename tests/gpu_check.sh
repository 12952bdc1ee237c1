#!/bin/sh
# make gpu-check, make gpu-check-full: what needs a GPU, in two tiers that each fit one device
# session (docs/gpu.md). Usage: tests/gpu_check.sh [--full]
#   0. build for sm_90 (headers from gpu_include/ when the machine has no Debian packages);
#      BUILD=0 uses the ./maskprior, tests/unit_tests and dev/ programs already there instead
#      (built elsewhere with `make maskprior tests/unit_tests dev ARCH=90 HOST_MARCH=x86-64-v3`
#      and carried along)
# The quick tier (make gpu-check), at most TIER_SECONDS (default 340) after the build:
#   1. a short run of each task family on the GPU (Boolean maj3, arithmetic add3, images: Fashion-
#      MNIST when installed, else a tiny folder written here; language: $LM_DIR, else the fixture
#      text as bytes; a family without its data is skipped with a line), a process and a row each;
#      then at once: the GPU test cases (every kernel at every attention version and with
#      --fast-kernels against the CPU, whole training steps GPU vs CPU, a short run that learns),
#      and the kernel tests (the cases named "GPU ...") under compute-sanitizer memcheck,
#      racecheck, synccheck and initcheck (a runtime that refuses the tool: "refused"). The test
#      cases run through tests/gpu_tests_isolated.sh, a process per test file, so that a crash (a
#      signal, a sticky CUDA error) ends only its file's process: that file's cases then run one
#      process each, the crashed one is named, and every other file still runs and reports
#   2. the kernel lab (dev/): every attention and matmul version checked against the CPU and timed
#   3. the paper-size 2parity model under --profile 2 (a per-kernel table): the default kernels,
#      the fastest (--attention-kernel 3 --fast-kernels), and the fastest with --matmul-kernel 2
#      as one CUDA graph (--cuda-graph: the step's time as one launch)
#   4. the paper-size training step against PyTorch eager, torch.compile and its reduce-overhead
#      mode (tools/bench_gpu.py --paper: about 2 min, up to 3.5, an estimate), the attention
#      layer alone against eager, torch.compile and FlexAttention (tools/bench_attention.py)
#   A --matmul-kernel 2 profile or timing fails where cuBLASLt turned a product down and matmul
#   version 1 ran it (its note on stderr, layers/matmul_lt.cuh): it would be version 1's under
#   version 2's name.
# The full tier (--full, make gpu-check-full), at most TIER_SECONDS (default 570) after the build:
#   5. the make-run size's training step against the same peers (tools/bench_gpu.py --small);
#      paper-size runs: GOTU's model on 2parity, 5 epochs, default and mask init, and the mask
#      init again with the fastest kernels; Lee et al.'s size on add3 (0.4% of the pairs, 300
#      steps), default and mask; ViT-Tiny, mask init, 300 steps on CIFAR-10 (data/cifar10-jpeg or
#      $CIFAR10_DIR, else Fashion-MNIST); a language model (C 384, L 6, T 256) with the ALiBi-shaped
#      mask, 300 steps on $LM_DIR (default data/tinystories-sample-bpe1024), then 100 sampled tokens
#   6. the logits' kernels past 2^31 floats (~18 GB of GPU memory), and the whole test suite (a
#      process per test file, as in step 1)
# Each result is printed as it comes; then a summary table and the verdict on the defaults. A step
# has its own time limit, cut to what is left of the tier; one that cannot start in time is "NOT
# RUN". Logs go to $OUT (default /tmp/maskprior-gpu-check), packed at the end into $OUT/logs.tar.gz.
set -u
cd "$(dirname "$0")/.."
FULL=0
case "${1:-}" in
    --full) FULL=1 ;;
    "") ;;
    *) echo "usage: tests/gpu_check.sh [--full]" >&2; exit 2 ;;
esac
OUT=${OUT:-/tmp/maskprior-gpu-check}
mkdir -p "$OUT"
if [ $FULL = 1 ]; then TIER_SECONDS=${TIER_SECONDS:-570}; else TIER_SECONDS=${TIER_SECONDS:-340}; fi
# the Python with PyTorch: $MASKPRIOR_PYTHON, else the first python3 on the PATH that has it
PY=python3
for p in "${MASKPRIOR_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] && "$p" -c "import torch" 2>/dev/null && { PY=$p; break; }
done
export MASKPRIOR_PYTHON="$PY" PYTHONUNBUFFERED=1
results=""
# record NAME RESULT: one row of the summary, also printed at once
record() { results="$results$1|$2
"; echo "-> $1: $2"; }
# limit SECONDS: SECONDS, or what is left of the tier (which starts after the build) when that is less
limit() {
    left=$((TIER_SECONDS - ($(date +%s) - start)))
    if [ $left -lt 0 ]; then echo 0; elif [ $left -lt "$1" ]; then echo $left; else echo "$1"; fi
}
# timed SECONDS LOG COMMAND...: COMMAND under limit SECONDS (kept in LIMIT), its output to LOG; its
# exit status (124: past the limit), or 125 when the tier has no time left
timed() {
    LIMIT=$(limit "$1"); log=$2; shift 2
    if [ "$LIMIT" -le 0 ]; then echo "not run: the tier's $TIER_SECONDS s are spent" > "$log"; return 125; fi
    timeout "$LIMIT" "$@" > "$log" 2>&1
}
# failed NAME RC [LOG]: the row of a step that did not succeed (after timed); its log is kept for the verdict
bad_logs=""
failed() {
    case $2 in
        125) record "$1" "NOT RUN: the tier's $TIER_SECONDS s were spent" ;;
        124) record "$1" "FAILED: did not finish in $LIMIT s" ;;
        *) record "$1" "FAILED (exit $2)" ;;
    esac
    bad_logs="$bad_logs ${3:-}"
}
# tests_row NAME LOG RC: the row of a doctest run (after timed): ok when RC is 0 and some case passed
# on a GPU (without one every GPU case is skipped, and doctest exits 0)
tests_row() {
    cases=$(sed -n 's/.*test cases: *[0-9]* *| *\([0-9]*\) passed.*/\1/p' "$2" | tail -1)
    if [ "$3" = 0 ] && [ "${cases:-0}" -gt 0 ] && [ $NO_GPU = 0 ]; then
        record "$1" "ok, $(grep 'test cases:' "$2" | tr -s ' ')"
    elif [ "$3" = 0 ]; then record "$1" "FAILED: no GPU, its GPU cases skipped"; bad_logs="$bad_logs $2"
    else grep -E "ERROR|FATAL|version :=|test cases:" "$2" | head -20; failed "$1" "$3" "$2"; fi
}
# isolated_row NAME LOG RC: the row of a tests/gpu_tests_isolated.sh run (after timed), whose parts'
# logs are in LOG's name without .log: its summary, ok when RC is 0 on a GPU (without one every GPU
# case is skipped: exit 77, or CPU cases alone ran). A failure keeps LOG and the parts' logs.
isolated_row() {
    summary=$(sed -n 's/^gpu_tests_isolated: //p' "$2" | tail -1)
    grep -E '^ *(ok|FAILED|CRASHED|NOT RUN) ' "$2"
    if [ "$3" = 0 ] && [ $NO_GPU = 0 ]; then record "$1" "ok, $summary"; return; fi
    if [ "$3" = 0 ] || [ "$3" = 77 ]; then record "$1" "FAILED: no GPU, its GPU cases skipped"
    elif [ "$3" = 124 ] || [ "$3" = 125 ]; then failed "$1" "$3"
    else record "$1" "FAILED (exit $3)${summary:+: $summary}"; fi
    bad_logs="$bad_logs $2 ${2%.log}/*.log"
}
# the note a --matmul-kernel 2 run prints where cuBLASLt turned a product down (layers/matmul_lt.cuh)
FALLBACK_NOTE="maskprior: note: cuBLASLt .* matmul version 1 runs it"
# bench_row NAME LOG RC: the row of a tools/bench_gpu.py run (after timed): its last line, the
# summary, or the FAILED line it ends with when a row of its tables failed (a fallen-back timing)
bench_row() {
    if [ "$3" = 0 ]; then record "$1" "$(tail -1 "$2")"
    elif [ "$3" = 1 ] && tail -1 "$2" | grep -q '^FAILED: '; then
        record "$1" "$(tail -1 "$2")"; bad_logs="$bad_logs $2"
    else failed "$1" "$3" "$2"; fi
}
# metrics RUN_DIR KEY...: each KEY and its value (a list: every layer's) from the run's metrics.json, and its time
metrics() {
    $PY -c 'import json, sys
m = json.load(open(sys.argv[1] + "/metrics.json"))
value = lambda v: " ".join("%.2f" % x for x in v) if isinstance(v, list) else "%.4f" % v
print(" ".join("%s %s" % (k, value(m[k])) for k in sys.argv[2:] if k in m) + ", %.0f s" % m["seconds"])' "$@"
}
# the kernels a failing log names (a sanitizer's report, a test's message), for the verdict
kernels_named() { grep -o -E '[a-z0-9_]+_kernel[0-9]+' "$1" 2>/dev/null | sort -u | tr '\n' ' '; }

echo "== 0. build (sm_90); tier: $([ $FULL = 1 ] && echo full || echo quick), $TIER_SECONDS s after the build"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
NO_GPU=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { NO_GPU=1; record GPU "FAILED: nvidia-smi finds none"; }
inc=""
[ -d gpu_include ] && inc="EXTRA_INCLUDE=gpu_include"
if [ "${BUILD:-1}" = 0 ]; then
    if [ -x maskprior ] && [ -x tests/unit_tests ] && [ -x dev/attention_forward ] && [ -x dev/attention_backward ] &&
       [ -x dev/matmul ]
    then record build "prebuilt binaries (BUILD=0)"
    else record build "FAILED: BUILD=0 but ./maskprior, tests/unit_tests or a dev/ program is missing"; fi
elif make -j3 -B maskprior tests/unit_tests dev ARCH=90 $inc > "$OUT/build.log" 2>&1; then record build ok
else tail -30 "$OUT/build.log"; record build FAILED; fi
start=$(date +%s)

PAPER="--task 2parity --device cuda --width 256 --layers 12 --heads 6 --head-size 64 --mlp 256 --optimizer adam"
PAPER="$PAPER --lr 1e-5 --wd 1e-3 --batch 256"
FASTEST="--attention-kernel 3 --fast-kernels"

if [ $FULL = 0 ]; then
    echo "== 1. a short run of each task family; the GPU test cases and the kernel tests under compute-sanitizer"
    sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
    tools="memcheck racecheck synccheck initcheck"
    # the sanitizers first, in the background (the kernels run slowest under their tools): five
    # runners on 16 cores with the test cases' below, the CPU references' OpenMP threads shared out.
    # Each runner stops starting files 5 s before its limit, so that it still prints its summary.
    for tool in $tools; do
        [ -x "$sanitizer" ] || break
        ( lim=$(limit 120)
          timed 120 "$OUT/sanitizer-$tool.log" env OMP_NUM_THREADS=3 sh tests/gpu_tests_isolated.sh \
              --each 100 --total $((lim > 5 ? lim - 5 : 0)) --logs "$OUT/sanitizer-$tool" \
              --wrap "$sanitizer --tool $tool --error-exitcode 9" ./tests/unit_tests "GPU *"
          echo $? $LIMIT > "$OUT/sanitizer-$tool.rc" ) &
    done
    # each task family's first steps on the GPU, a process each: the whole path of each, at a tiny size
    SMALL="--device cuda --width 16 --layers 1 --heads 2 --head-size 8 --mlp 16 --batch 32 --steps 5 --eval-every 5"
    fashion=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
    [ -d fashion-mnist ] && fashion=fashion-mnist
    if [ -f "$fashion/t10k-labels-idx1-ubyte.gz" ] || [ -f "$fashion/t10k-labels-idx1-ubyte" ]; then
        images="--task fashion-mnist --data-dir $fashion --patch 7"
    else  # two classes of 8x8 BMP images, 8 to train and 4 to test each
        images="--task images --data-dir $OUT/tiny-images --patch 4"
        $PY - "$OUT/tiny-images" <<'EOF' || images=""
import os, struct, sys
for split, count in (("train", 8), ("test", 4)):
    for c in range(2):
        os.makedirs("%s/%s/c%d" % (sys.argv[1], split, c), exist_ok=True)
        for i in range(count):
            pixels = bytes((40 + 150 * c + 7 * i + j) % 256 for j in range(8 * 8 * 3))
            head = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
            info = struct.pack("<IiiHHIIiiII", 40, 8, 8, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
            open("%s/%s/c%d/%d.bmp" % (sys.argv[1], split, c, i), "wb").write(head + info + pixels)
EOF
    fi
    lm_dir=${LM_DIR:-data/tinystories-sample-bpe1024}
    if [ ! -f "$lm_dir/train.bin" ]; then
        lm_dir=$OUT/tiny-text
        $PY data/prepare_text.py --input tests/fixtures/text/tiny.txt --out "$lm_dir" --tokenizer bytes \
            > "$OUT/tiny-text.log" 2>&1 || lm_dir=""
    fi
    for family in Boolean arithmetic images language; do
        case $family in
            Boolean) task="--task maj3" key=acc_cube ;;
            arithmetic) task="--task add3 --max-test 32" key=seq_acc ;;
            images) task=$images key=acc ;;
            language) task="${lm_dir:+--task lm --data-dir $lm_dir --seq-len 16 --eval-windows 8}" key=val_loss ;;
        esac
        name="short run: $family${task:+ ($(echo $task | cut -d' ' -f2))}"
        if [ -z "$task" ]; then record "$name" "skipped: no data (neither installed nor written here)"
        elif timed 30 "$OUT/short-$family.log" ./maskprior $task $SMALL --out "$OUT/short-$family"
        then record "$name" "ok, $(metrics "$OUT/short-$family" $key)"
        else rc=$?; tail -5 "$OUT/short-$family.log"; failed "$name" $rc "$OUT/short-$family.log"; fi
    done
    lim=$(limit 120)
    timed 120 "$OUT/tests-gpu.log" env OMP_NUM_THREADS=3 sh tests/gpu_tests_isolated.sh --each 100 \
        --total $((lim > 5 ? lim - 5 : 0)) --logs "$OUT/tests-gpu" ./tests/unit_tests "*GPU*"
    isolated_row "unit tests (GPU cases)" "$OUT/tests-gpu.log" $?
    wait
    for tool in $tools; do
        log="$OUT/sanitizer-$tool.log"
        read -r rc LIMIT < "$OUT/sanitizer-$tool.rc" || rc=1
        if [ ! -x "$sanitizer" ]; then record "compute-sanitizer $tool" "NOT RUN: no compute-sanitizer"
        elif [ "$rc" != 0 ] && grep -q -E "Device not supported|not supported on this|is not supported" "$log"
        then record "compute-sanitizer $tool" "refused by this machine's runtime (not a failure)"
        else isolated_row "compute-sanitizer $tool" "$log" "$rc"; fi
    done

    echo "== 2. the kernel lab: every attention and matmul version, checked and timed"
    for program in attention_forward attention_backward matmul; do
        if timed 40 "$OUT/dev-$program.txt" ./dev/$program
        then record "dev/$program" "every version matches the CPU (table in $OUT/dev-$program.txt)"
        else failed "dev/$program" $? "$OUT/dev-$program.txt"; fi
        cat "$OUT/dev-$program.txt"
    done

    echo "== 3. the paper-size 2parity model, --profile 2: the default kernels, the fastest, then as a graph"
    for kernels in default fastest graph; do
        extra=""
        [ $kernels = fastest ] && extra=$FASTEST
        [ $kernels = graph ] && extra="$FASTEST --matmul-kernel 2 --cuda-graph"
        timed 40 "$OUT/profile-$kernels.txt" ./maskprior $PAPER $extra --profile 2
        rc=$?
        if [ $rc != 0 ]; then failed "profile ($kernels kernels)" $rc "$OUT/profile-$kernels.txt"
        elif grep -q "$FALLBACK_NOTE" "$OUT/profile-$kernels.txt"
        then record "profile ($kernels kernels)" "FAILED: cuBLASLt turned products down, version 1 ran them (its note)"
        else record "profile ($kernels kernels)" "ok (table in $OUT/profile-$kernels.txt)"; fi
        cat "$OUT/profile-$kernels.txt"
    done

    echo "== 4. speed against PyTorch: the training step, then the attention layer alone"
    # its last line: per size and mask variant, maskprior's fastest row over eager, compile, reduce-overhead
    timed 210 "$OUT/bench.log" $PY tools/bench_gpu.py --paper
    bench_row "speed vs PyTorch" "$OUT/bench.log" $?
    cat "$OUT/bench.log"
    if timed 120 "$OUT/bench-attention.log" $PY tools/bench_attention.py
    then record "attention vs PyTorch" "$(tail -1 "$OUT/bench-attention.log")"
    else failed "attention vs PyTorch" $?; fi
    cat "$OUT/bench-attention.log"
else
    echo "== 5. the make-run size's step against PyTorch; paper-size runs"
    timed 150 "$OUT/bench-small.log" $PY tools/bench_gpu.py --small
    bench_row "speed vs PyTorch (make-run size)" "$OUT/bench-small.log" $?
    cat "$OUT/bench-small.log"
    echo "   paper-size runs (C 256, L 12, NH 6, HS 64, MLP 256, GOTU's Adam lr 1e-5 wd 1e-3, batch 256, 5 epochs)"
    for run in default mask mask-fastest; do
        init=${run%-fastest} extra=""
        [ $run = mask-fastest ] && extra=$FASTEST
        if timed 90 "$OUT/paper-$run.log" ./maskprior $PAPER --epochs 5 --eval-every 240 --init $init $extra \
            --out "$OUT/paper-2parity-$run"; then
            record "2parity paper-size $run" \
                "$(metrics "$OUT/paper-2parity-$run" acc_cube acc_unseen mdi_agreement prior_mass)"
        else rc=$?; tail -5 "$OUT/paper-$run.log"; failed "2parity paper-size $run" $rc; fi
        grep -E "^step .*/480|^eval" "$OUT/paper-$run.log" | tail -3
    done

    echo "== 5b. Lee et al.'s model size on add3, 0.4% of the pairs (C 384, L 6, NH 6, HS 64, MLP 1536, 300 steps)"
    ADD="--task add3 --data-frac 0.004 --device cuda --width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536"
    ADD="$ADD --batch 256 --steps 300 --eval-every 300"
    for init in default mask; do
        if timed 80 "$OUT/add3-$init.log" ./maskprior $ADD --init $init --out "$OUT/paper-add3-$init"; then
            record "add3 paper-size $init" "$(metrics "$OUT/paper-add3-$init" seq_acc digit_acc prior_mass)"
        else rc=$?; tail -5 "$OUT/add3-$init.log"; failed "add3 paper-size $init" $rc; fi
        grep -E "^eval" "$OUT/add3-$init.log" | tail -2
    done

    echo "== 5c. ViT-Tiny (C 192, L 12, NH 3, HS 64, MLP 768, patch 4), mask init, batch 128, 300 steps"
    cifar=${CIFAR10_DIR:-data/cifar10-jpeg}
    if [ -f "$cifar/data_batch_1.bin" ]; then vision="--task cifar10 --data-dir $cifar"
    elif [ -d "$cifar/train" ]; then vision="--task images --data-dir $cifar"
    elif [ -d fashion-mnist ]; then vision="--task fashion-mnist --data-dir fashion-mnist"
    else vision="--task fashion-mnist"; fi
    VIT="$vision --device cuda --init mask --width 192 --layers 12 --heads 3 --head-size 64 --mlp 768 --patch 4"
    VIT="$VIT --batch 128 --steps 300 --eval-every 300 --log-every 100"
    if timed 120 "$OUT/vit.log" ./maskprior $VIT --out "$OUT/vit-tiny-mask"; then
        record "ViT-Tiny mask ($(echo $vision | cut -d' ' -f2))" \
            "$(metrics "$OUT/vit-tiny-mask" acc train_acc prior_mass)"
    else rc=$?; tail -5 "$OUT/vit.log"; failed "ViT-Tiny mask" $rc; fi
    grep -E "^step|^eval" "$OUT/vit.log" | tail -2

    echo "== 5d. a language model (C 384, L 6, NH 6, HS 64, MLP 1536, T 256, batch 64), ALiBi-shaped mask, 300 steps"
    lm_dir=${LM_DIR:-data/tinystories-sample-bpe1024}
    LM="--task lm --data-dir $lm_dir --device cuda --init mask --mask-prior alibi --width 384 --layers 6 --heads 6"
    LM="$LM --head-size 64 --mlp 1536 --seq-len 256 --batch 64 --steps 300 --eval-every 300 --eval-windows 128"
    if [ ! -f "$lm_dir/train.bin" ]; then
        record "LM mask-alibi" "skipped: no token folder $lm_dir (data/prepare_text.py)"
    elif timed 100 "$OUT/lm.log" ./maskprior $LM --log-every 100 --out "$OUT/lm-alibi"; then
        record "LM mask-alibi" "$(metrics "$OUT/lm-alibi" val_loss bits_per_byte prior_mass)"
        timed 30 "$OUT/lm-sample.txt" ./maskprior --generate "$OUT/lm-alibi/model.safetensors" \
            --prompt "Once upon a time" --sample-tokens 100 --top-k 40 --temperature 0.8 && cat "$OUT/lm-sample.txt"
    else rc=$?; tail -5 "$OUT/lm.log"; failed "LM mask-alibi" $rc; fi
    grep -E "^step|^eval" "$OUT/lm.log" 2>/dev/null | tail -2

    echo "== 6. the logits' kernels past 2^31 floats, then the whole test suite (CPU cases on this machine's CPU)"
    timed 60 "$OUT/large.log" env MASKPRIOR_LARGE_TESTS=1 ./tests/unit_tests --no-intro=true -tc="*past 2^31*"
    tests_row "logits past 2^31 floats" "$OUT/large.log" $?
    lim=$(limit 300)
    timed 300 "$OUT/tests.log" sh tests/gpu_tests_isolated.sh --each 200 --total $((lim > 5 ? lim - 5 : 0)) \
        --logs "$OUT/tests" ./tests/unit_tests
    isolated_row "unit tests (all)" "$OUT/tests.log" $?
fi

echo
echo "== summary ($(( $(date +%s) - start )) s after the build; logs in $OUT, packed in $OUT/logs.tar.gz)"
printf '%s' "$results" | awk -F'|' '{ printf "| %-32s | %s\n", $1, $2 }'
bad=$(printf '%s' "$results" | grep -E '\|(FAILED|NOT RUN)' | cut -d'|' -f1 | tr '\n' ';' | sed 's/;$//; s/;/; /g')
if [ $FULL = 1 ]; then
    if [ -z "$bad" ]; then
        echo "verdict: every paper-size run finished, the fastest kernels' among them (compare its row with mask's)"
    else echo "verdict: did not pass: $bad"; fi
elif [ -z "$bad" ]; then
    refused=$(printf '%s' "$results" | grep 'refused' | cut -d'|' -f1 | tr '\n' ';' | sed 's/;$//; s/;/; /g')
    echo "verdict: attention kernel 3, --fast-kernels, --matmul-kernel 2 and --cuda-graph passed every check:" \
         "switch the defaults (compare the profile and bench rows first)" \
         "${refused:+; not run under the refused tools: $refused}"
else
    named=$(for log in $bad_logs; do kernels_named "$log"; done | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
    versions=$(grep -h -o 'version := [0-9]*' $bad_logs /dev/null 2>/dev/null | sort -u | tr '\n' ' ')
    echo "verdict: keep the defaults: $bad did not pass"
    [ -n "$versions$named" ] && echo "  what their logs name: $versions$named"
fi
tar -czf "$OUT/logs.tar.gz.part" -C "$OUT" --exclude=logs.tar.gz --exclude=logs.tar.gz.part . 2>/dev/null &&
    mv "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"
[ -z "$bad" ]
