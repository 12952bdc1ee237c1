#!/bin/sh
# The CUDA emulation must catch the bugs of CUDA written without a GPU. Each case plants one
# bug in a copy of the program's sources, builds the emulated GPU tests from the copy, and runs
# the test that must now fail:
#   off-by-one      gelu_forward_kernel1 bounds its index by i <= n: writes one past out
#   no-barrier      attention kernel 3 reads its key tile before every thread has copied its
#                   part into shared memory (the __syncthreads after the v tile's copy is gone)
#   host-pointer    the scalar embedding is handed the host's token values (cfg.token_value), not
#                   the device copy model.token_value
#   transposed      the forward matmul passes the weight to cuBLAS untransposed
#   tile-overwrite  attention kernel 3 copies its next key and value tiles into shared memory while
#                   other warps still read the last ones (the __syncthreads that opens its tile
#                   loop is gone); run in reverse order (MASKPRIOR_EMU_SCHEDULE; it fails in index
#                   order too), and again under ThreadSanitizer, which must name both threads
# and the bugs that a GPU refuses and an emulation in which the host could touch device memory,
# and stream work ran at once, let pass (emu/device_memory.h, emu/streams.h):
#   host-read       model_read_loss reads the loss through its device pointer (the bug that made
#                   every GPU run stop at step 0)
#   host-write      model_read_step_log clears the device's step log with a host store, not a copy
#   pinned-refill   the batch's pinned copy is refilled without waiting for its last upload's event
#   capture-copy    the training step reads its loss back (a synchronous cudaMemcpy) while a graph
#                   captures it
#   capture-legacy  buffer_zero's memset goes on the legacy default stream, which a capture refuses
# Each plant finds its site by the code it changes, never by a comment. Exit 0 when every bug
# made its test fail; 1 when one went unseen, or when a plant no longer changes its file (the
# code it targets has moved: update the plant).
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-planted-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0

# plant NAME FILE SED-EXPRESSION TEST-CASES [SCHEDULE] (TEST-CASES: a doctest filter, no commas, *
# for any text; SCHEDULE: the emulation's order of a block's threads, index when not given)
plant() {
    copy="$work/$1"
    mkdir -p "$copy"
    # the working tree's sources, committed or not, without what git ignores (builds, runs)
    git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$copy"
    sed -i "$3" "$copy/$2"
    if cmp -s "$2" "$copy/$2"; then
        echo "planted bug $1: FAILED: the plant no longer changes $2"
        status=1
        return
    fi
    # -O1: a third less compiling than the default -O2, and the tests a plant runs still take seconds
    if ! make -s -C "$copy" tests/emulated_tests EMU_OPT=-O1 > "$copy/build.log" 2>&1; then
        echo "planted bug $1: FAILED: the copy with the bug does not build"
        tail -5 "$copy/build.log"
        status=1
        return
    fi
    # (`; exit $?`: the subshell waits for the tests, so that its line for a test a host access stops,
    # "Segmentation fault", goes to the log too)
    if (cd "$copy" && MASKPRIOR_EMU_SCHEDULE=${5:-index} ./tests/emulated_tests --no-intro=true -tc="$4"; exit $?) \
        > "$copy/run.log" 2>&1; then
        echo "planted bug $1: FAILED: \"$4\" still passes with the bug"
        status=1
    elif grep -q "test cases: *0 |" "$copy/run.log"; then
        echo "planted bug $1: FAILED: no test case is named \"$4\""
        status=1
    else
        seen=$(grep -m1 -E "CUDA emulation:|ERROR:" "$copy/run.log" | cut -c1-260)
        echo "planted bug $1: caught by \"$4\" in ${5:-index} order: $seen"
    fi
}

# named_race NAME TEST-CASES: NAME's copy (plant made it) built under ThreadSanitizer, which must
# report a data race in TEST-CASES with both CUDA threads named; it stops at the first report
named_race() {
    copy="$work/$1"
    if ! make -s -C "$copy" tests/emulated_tests_tsan > "$copy/tsan-build.log" 2>&1; then
        echo "planted bug $1: FAILED: the copy with the bug does not build under ThreadSanitizer"
        tail -5 "$copy/tsan-build.log"
        status=1
        return
    fi
    (cd "$copy" && TSAN_OPTIONS=halt_on_error=1 ./tests/emulated_tests_tsan --no-intro=true -tc="$2") \
        > "$copy/tsan.log" 2>&1
    # "  Thread T12 'CUDA thread (3,0,0) of block (1,0,0)' (tid=...": one line per thread of the report
    threads=$(grep -E "^  Thread T[0-9]+ 'CUDA thread" "$copy/tsan.log" | cut -d"'" -f2)
    if grep -q "WARNING: ThreadSanitizer: data race" "$copy/tsan.log" && [ "$(echo "$threads" | wc -l)" -ge 2 ]; then
        echo "planted bug $1: ThreadSanitizer names both threads: $(echo "$threads" | head -2 | paste -sd ';')"
    else
        echo "planted bug $1: FAILED: ThreadSanitizer did not name two CUDA threads in a race"
        status=1
    fi
}

plant off-by-one layers/pointwise.cuh \
    's/    if (i < n) out\[i\] = gelu_value(inp\[i\]);/    if (i <= n) out[i] = gelu_value(inp[i]);/' \
    "GPU embedding* layernorm* gelu*"
plant no-barrier attention/flash.cuh \
    '/stage_tile(v_tile, HS, head_vector(qkv, s, 2, b, key0, h),/{n;/^ *__syncthreads();/d}' \
    "GPU attention matches the CPU at every kernel version*"
plant host-pointer model.cuh \
    's/(dev, a.encoded, batch.tokens, model.token_value,/(dev, a.encoded, batch.tokens, model.cfg.token_value.data(),/' \
    "a training step with scalar encoding and logistic loss: GPU matches the CPU*"
plant transposed layers/matmul.cuh \
    's/CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C,/CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C,/' \
    "GPU matmul (cuBLAS) matches the CPU loops*"
plant tile-overwrite attention/flash.cuh \
    '/attention_forward_kernel3(/,/__syncthreads();/{/__syncthreads();/d}' \
    "GPU attention matches the CPU at every kernel version*" reverse
named_race tile-overwrite "GPU attention gives the same bits at every run*"
plant host-read model.cuh \
    's/{ return value_read(model.dev, model.mean_loss); }$/{ return *model.mean_loss; }/' \
    "a whole training step on the GPU matches the CPU*"
plant host-write run/step.cuh \
    's/^    value_write(model.dev, model.step_log, step_log_cleared());$/    *model.step_log = step_log_cleared();/' \
    "training steps replayed from a captured graph*"
plant pinned-refill gpu/model_batch.cuh \
    '/^    cudaCheck(cudaEventSynchronize(b.copied\[b.next\]));$/d' \
    "training steps replayed from a captured graph*"
plant capture-copy run/step.cuh \
    's/^    model_log_step(model);$/    model_log_step(model);\n    (void)model_read_loss(model);/' \
    "training steps replayed from a captured graph*"
plant capture-legacy layers/device.cuh \
    's/cudaMemsetAsync(p, 0, count \* sizeof(float), gpu_stream())/cudaMemsetAsync(p, 0, count * sizeof(float), nullptr)/' \
    "training steps replayed from a captured graph*"
exit $status
