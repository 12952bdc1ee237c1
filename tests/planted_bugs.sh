#!/bin/sh
# The CUDA emulation must catch the bugs of CUDA written without a GPU. Each case plants one
# bug in a copy of the program's sources and runs the test that must now fail:
#   off-by-one      gelu_forward_kernel1 bounds its index by i <= n: writes one past out
#   no-barrier      attention kernel 3 reads its key tile before every thread has copied its
#                   part into shared memory (the __syncthreads after the v tile's copy is gone)
#   host-pointer    the scalar embedding is handed the host's token values (cfg.token_value), not
#                   the device copy model.token_value
#   transposed      the forward matmul passes the weight to cuBLAS untransposed
#   tile-overwrite  attention kernel 3 copies its next key and value tiles into shared memory while
#                   other warps still read the last ones (the __syncthreads that opens its tile
#                   loop is gone); run in reverse order (MASKPRIOR_EMU_SCHEDULE; it fails in index
#                   order too), and again in the kernel lab under ThreadSanitizer, which must name
#                   both threads
# and the bugs that a GPU refuses and an emulation in which the host could touch device memory,
# and stream work ran at once, let pass (emu/device_memory.h, emu/streams.h):
#   host-read       model_read_loss reads the loss through its device pointer (the bug that made
#                   every GPU run stop at step 0)
#   host-write      model_read_step_log clears the device's step log with a host store, not a copy
#   pinned-refill   the batch's pinned copy is refilled without waiting for its last upload's event
#   capture-copy    the training step reads its loss back (a synchronous cudaMemcpy) while a graph
#                   captures it
#   capture-legacy  buffer_zero's memset goes on the legacy default stream, which a capture refuses
# One copy holds all ten, each behind a switch, `planted("NAME")` (planted.h, which this script
# writes into the copy): the code as it was where the switch is off, the bug where
# MASKPRIOR_PLANT=NAME turns it on. So the copy is built twice in all (the emulated tests at -O1,
# and the kernel lab's forward program under ThreadSanitizer), not once a bug, and each bug's test
# runs with its switch on: it must fail, with a line that names what the emulation saw (the line
# each plant expects below). The same tests with every switch off must pass, so that a failure is
# the bug's and not the switch's. Each plant finds its site by the code it changes, never by a
# comment. Exit 0 when every bug made its test fail as expected; 1 when one went unseen, when the
# copy fails without a bug, or when a plant no longer changes its file (the code it targets has
# moved: update the plant).
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-planted-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
copy="$work/tree"
mkdir -p "$copy"
# the working tree's sources, committed or not, without what git ignores (builds, runs)
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$copy"
plants="$work/plants"
: > "$plants"
cat > "$copy/planted.h" <<'EOF'
// The switch of tests/planted_bugs.sh, in its copy of the tree only: planted("NAME") is true in a run
// with MASKPRIOR_PLANT=NAME, so that run has bug NAME and no other.
#pragma once
#include <cstdlib>
#include <cstring>
inline bool planted(const char* name) {
    static const char* on = std::getenv("MASKPRIOR_PLANT");
    return on != nullptr && std::strcmp(on, name) == 0;
}
EOF

# plant NAME FILE SED-EXPRESSION TEST-CASES EXPECTED [SCHEDULE]: puts bug NAME into the copy's FILE
# behind planted("NAME") (SED-EXPRESSION writes the switch); TEST-CASES (a doctest filter, no commas,
# * for any text) must fail with it, in SCHEDULE's order of a block's threads (index when not
# given), with a line holding EXPECTED (grep -E)
plant() {
    cp "$copy/$2" "$work/before"
    sed -i "$3" "$copy/$2"
    if cmp -s "$work/before" "$copy/$2"; then
        echo "planted bug $1: FAILED: the plant no longer changes $2"
        status=1
        return
    fi
    grep -q '^#include "planted.h"' "$copy/$2" || sed -i '1i #include "planted.h"' "$copy/$2"
    printf '%s|%s|%s|%s\n' "$1" "$4" "$5" "${6:-index}" >> "$plants"
}

plant off-by-one layers/pointwise.cuh \
    's/^    if (i < n) out\[i\] = gelu_value(inp\[i\]);$/    if (i < n + planted("off-by-one")) out[i] = gelu_value(inp[i]);/' \
    "GPU embedding* layernorm* gelu*" "gelu_forward_kernel1 wrote .* past the end"
plant no-barrier attention/flash.cuh \
    '/stage_tile(v_tile, HS, head_vector(qkv, s, 2, b, key0, h),/{n;s/^\( *\)__syncthreads();/\1if (!planted("no-barrier")) __syncthreads();/}' \
    "GPU attention matches the CPU at every kernel version*" "ERROR: attention out"
plant host-pointer model.cuh \
    's/(dev, a.encoded, batch.tokens, model.token_value,/(dev, a.encoded, batch.tokens, planted("host-pointer") ? model.cfg.token_value.data() : model.token_value,/' \
    "a training step with scalar encoding and logistic loss: GPU matches the CPU*" \
    "scalar_embedding_forward_kernel1: argument 3 .* is not device memory"
plant transposed layers/matmul.cuh \
    's/CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C,/planted("transposed") ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C,/' \
    "GPU matmul (cuBLAS) matches the CPU loops*" "CUDA emulation: cublasSgemm: lda"
plant tile-overwrite attention/flash.cuh \
    '/attention_forward_kernel3(/,/__syncthreads();/{s/^\( *\)__syncthreads();/\1if (!planted("tile-overwrite")) __syncthreads();/}' \
    "GPU attention matches the CPU at every kernel version*" "ERROR: attention out" reverse
plant host-read model.cuh \
    's/{ return value_read(model.dev, model.mean_loss); }$/{ return planted("host-read") ? *model.mean_loss : value_read(model.dev, model.mean_loss); }/' \
    "a whole training step on the GPU matches the CPU*" "the host read device memory"
plant host-write run/step.cuh \
    's/^    value_write(model.dev, model.step_log, step_log_cleared());$/    if (planted("host-write")) *model.step_log = step_log_cleared(); else value_write(model.dev, model.step_log, step_log_cleared());/' \
    "training steps replayed from a captured graph*" "the host wrote device memory"
plant pinned-refill gpu/model_batch.cuh \
    's/^    cudaCheck(cudaEventSynchronize(b.copied\[b.next\]));$/    if (!planted("pinned-refill")) cudaCheck(cudaEventSynchronize(b.copied[b.next]));/' \
    "training steps replayed from a captured graph*" "the host wrote into the source"
plant capture-copy run/step.cuh \
    's/^    model_log_step(model);$/    model_log_step(model);\n    if (planted("capture-copy")) (void)model_read_loss(model);/' \
    "training steps replayed from a captured graph*" "cudaMemcpy while a stream captures a graph"
plant capture-legacy layers/device.cuh \
    's/cudaMemsetAsync(p, 0, count \* sizeof(float), gpu_stream())/cudaMemsetAsync(p, 0, count * sizeof(float), planted("capture-legacy") ? nullptr : gpu_stream())/' \
    "training steps replayed from a captured graph*" "on the legacy default stream while a stream captures"

# the copy built once, at -O1 (a third less compiling than the default -O2; the tests a plant runs
# still take seconds)
if ! make -s -C "$copy" tests/emulated_tests EMU_OPT=-O1 > "$work/build.log" 2>&1; then
    echo "planted bugs: FAILED: the copy with the switches does not build"
    tail -5 "$work/build.log"
    exit 1
fi

# every plant's tests with every switch off: they pass, so a failure below is the bug's
all_cases=$(cut -d'|' -f2 "$plants" | sort -u | paste -sd, -)
if (cd "$copy" && ./tests/emulated_tests --no-intro=true -tc="$all_cases"; exit $?) > "$work/none.log" 2>&1; then
    echo "planted bugs: with every switch off, the copy passes $(grep 'test cases:' "$work/none.log" | sed 's/.*test cases: *//')"
else
    echo "planted bugs: FAILED: the copy fails with every switch off:"
    grep -m3 -E "CUDA emulation:|ERROR:" "$work/none.log"
    status=1
fi

# each plant's test with its switch on must fail, with the line the plant expects
while IFS='|' read -r name cases expected schedule; do
    # (`; exit $?`: the subshell waits for the tests, so that its line for a test a host access stops,
    # "Segmentation fault", goes to the log too)
    if (cd "$copy" && MASKPRIOR_PLANT=$name MASKPRIOR_EMU_SCHEDULE=$schedule ./tests/emulated_tests \
            --no-intro=true -tc="$cases"; exit $?) > "$work/$name.log" 2>&1; then
        echo "planted bug $name: FAILED: \"$cases\" still passes with the bug"
        status=1
    elif grep -q "test cases: *0 |" "$work/$name.log"; then
        echo "planted bug $name: FAILED: no test case is named \"$cases\""
        status=1
    elif ! grep -q -E "$expected" "$work/$name.log"; then
        echo "planted bug $name: FAILED: \"$cases\" failed without a line holding \"$expected\":"
        grep -m2 -E "CUDA emulation:|ERROR:" "$work/$name.log"
        status=1
    else
        seen=$(grep -m1 -E "$expected" "$work/$name.log" | cut -c1-260)
        echo "planted bug $name: caught by \"$cases\" in $schedule order: $seen"
    fi
done < "$plants"

# tile-overwrite under ThreadSanitizer, in the kernel lab's forward program (dev/attention_forward.cu:
# attention kernel 3 on the lab's shapes; a small program, so this build takes seconds where the
# whole emulated suite's would take minutes): it must report a data race with both CUDA threads
# named, and stops at the first report. One OpenMP thread: libgomp is not instrumented.
if ! make -s -C "$copy" dev/attention_forward-emulated EMU_OPT="-O1 -g1 -fsanitize=thread" \
        > "$work/tsan-build.log" 2>&1; then
    echo "planted bug tile-overwrite: FAILED: the copy's kernel lab does not build under ThreadSanitizer"
    tail -5 "$work/tsan-build.log"
    exit 1
fi
(cd "$copy" && MASKPRIOR_PLANT=tile-overwrite OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 \
    timeout 300 ./dev/attention_forward-emulated 3 --quick) > "$work/tsan.log" 2>&1
# "  Thread T12 'CUDA thread (3,0,0) of block (1,0,0)' (tid=...": one line per thread of the report
threads=$(grep -E "^  Thread T[0-9]+ 'CUDA thread" "$work/tsan.log" | cut -d"'" -f2)
if grep -q "WARNING: ThreadSanitizer: data race" "$work/tsan.log" && [ "$(echo "$threads" | wc -l)" -ge 2 ]; then
    echo "planted bug tile-overwrite: ThreadSanitizer names both threads: $(echo "$threads" | head -2 | paste -sd ';')"
else
    echo "planted bug tile-overwrite: FAILED: ThreadSanitizer did not name two CUDA threads in a race"
    status=1
fi
exit $status
