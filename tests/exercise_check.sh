#!/bin/sh
# tests/exercise_check.sh [STEP...]: the kernel course (dev/exercises/README.md), each step given (all
# nine by default). In a copy of the tree, make exercise must
#   - fail on the step's blank, naming its outputs wrong where and why (the patterns below); step 1's
#     blank is checked as a learner's copy under another name, whose first line names its step;
#   - pass on its solution (the project's own kernels under the exercise's names); step 9's then
#     trains make run's model with them, to kernel 1's very bytes;
#   - fail on that solution with a mistake planted in the project's own kernel (code that only the
#     kernel runs: the CPU's reference stays right), with the message that names it: 1 a bound (a
#     write past the end of a buffer), 2 the row's max not subtracted (a NaN), 3 an index (two
#     threads write one entry), 4 a bound (nothing added), 5 a missing __syncwarp, 6 a missing
#     __syncthreads, 7 = for +=, 8 a thread index without its block, 9 the host reading device memory;
# and stop with one line on a file or a step that does not exist. Exit 0 when so, 1 when not.
# Its cost: three builds of a step's check a step (about 4 s of CPU each: steps 1 to 8, about 64 s),
# and step 9's trainer (main.cu once, about 40 s) and two training runs (about 28 s each): about 120 s.
set -u
cd "$(dirname "$0")/.." || exit 1
steps=${*:-1 2 3 4 5 6 7 8 9}
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-exercise-XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
failed=0
what=""
fail() { echo "exercise check: FAILED: $what: $1"; sed 's/^/    /' "$work/out"; failed=1; }
# the lines the output must have, one grep -E pattern each
expect() {
    for pattern in "$@"; do grep -qE "$pattern" "$work/out" || fail "no line matching: $pattern"; done
}
# make exercise in the copy with these arguments; its output in $work/out
exercise() { make -s -C "$work" exercise "$@" > "$work/out" 2>&1; }
# must_fail DESCRIPTION ARGS... -- PATTERNS...: make exercise ARGS fails, its output matching every pattern
must_fail() {
    what=$1
    shift
    args=""
    while [ "$1" != -- ]; do args="$args $1"; shift; done
    shift
    # shellcheck disable=SC2086  # the arguments are words
    if exercise $args; then fail "make exercise passed"; else expect "$@"; fi
}
# plant FILE OLD NEW: the copy's FILE with OLD (a string found there exactly once) made NEW; unplant FILE
plant() {
    python3 - "$work/$1" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit("exercise check: the planted mistake's text is not once in %s: %s" % (path, old))
open(path, "w").write(text.replace(old, new))
EOF
}
unplant() { cp "$1" "$work/$1"; }
solution() { ls "$work"/dev/exercises/step"$1"_*_solution.cuh; }
# an output's line: NAME LETTERS PLACE WHY (WHY empty: none given)
wrong() { echo "$1 +WRONG at \\($2\\) = \\($3\\): expected [^,]*, got [^:]*${4:+: $4}"; }

for step in $steps; do
    case $step in
    1)
        cp dev/exercises/step1_mask_term_exercise.cuh "$work/my_step1.cuh"
        must_fail "step 1's blank, a copy named my_step1.cuh" EXERCISE="$work/my_step1.cuh" -- \
            "^step 1, the mask term" "$(wrong 'log σ\(M\)' 'h, i, j' '0, 0, 0' 'never written')" "^FAILED: " "^hint: "
        plant attention.cuh "if (m < count) mask_term[m] = log_sigmoid(mask[m]);" \
            "if (m <= count) mask_term[m] = log_sigmoid(mask[m]);"
        must_fail "step 1's solution, a bound planted in mask_term_kernel1" EXERCISE="$(solution 1)" -- \
            "^a mask of 1 head\(s\), T 16: ok" "CUDA emulation: .* wrote 0 bytes past the end of a cudaMalloc block" \
            "^FAILED: the run stopped"
        unplant attention.cuh ;;
    2)
        must_fail "step 2's blank" STEP=2 -- \
            "$(wrong A 'b, h, i, j' '0, 0, 0, 0' 'its starting value, nothing was written here')"
        plant attention.cuh "att_row[j] = vexp(att_row[j] - smax);" "att_row[j] = vexp(att_row[j]);"
        must_fail "step 2's solution, the row's max not subtracted in attention_row_softmax" EXERCISE="$(solution 2)" -- \
            "$(wrong A 'b, h, i, j' '0, 0, 2, [0-9]+' 'a NaN went into it')"
        unplant attention.cuh ;;
    3)
        must_fail "step 3's blank" STEP=3 -- "$(wrong A 'b, h, i, j' '0, 0, 0, 0' 'never written')" \
            "$(wrong y 'b, t, h, d' '0, 0, 0, 0' 'never written')"
        plant attention.cuh "attention_row_forward(out + ((size_t)r.b * s.T + r.i) * s.NH * s.HS + r.h * s.HS," \
            "attention_row_forward(out + ((size_t)r.b * s.T + r.i) * s.NH * s.HS,"
        must_fail "step 3's solution, head h's output index planted in attention_forward_kernel1" \
            EXERCISE="$(solution 3)" -- "A +ok" \
            "y +WRONG at \(b, t, h, d\) = \(0, 0, 0, 0\): .*it changes with the order of a block's threads: two threads"
        unplant attention.cuh ;;
    4)
        must_fail "step 4's blank" STEP=4 -- "$(wrong dS 'b, h, i, j' '0, 0, 0, 0' 'never written')" \
            "$(wrong dq 'b, t, h, d' '0, 0, 0, 0' 'its starting value')" \
            "$(wrong dk 'b, t, h, d' '0, 0, 0, 0' 'its starting value')" \
            "$(wrong dv 'b, t, h, d' '0, 0, 0, 0' 'its starting value')" \
            "$(wrong dM 'h, i, j' '0, 0, 0' 'its starting value, nothing was added here')"
        plant attention.cuh "if (m < s.mask_heads * s.T * s.T) attention_mask_entry_backward(" \
            "if (m < s.mask_heads * s.T * s.T - 1) attention_mask_entry_backward("
        must_fail "step 4's solution, a bound planted in attention_backward_mask_kernel1" EXERCISE="$(solution 4)" -- \
            "dS +ok" "dq +ok" "dk +ok" "dv +ok" "$(wrong dM 'h, i, j' '0, 15, 15' 'its starting value, nothing was added')"
        unplant attention.cuh ;;
    5)
        must_fail "step 5's blank" STEP=5 -- "^warp_max and warp_sum" "$(wrong warp_max 'w, l' '0, 0' '')" \
            "$(wrong warp_sum 'w, l' '0, 0' '')"
        plant attention/warp.cuh "    __syncwarp();  // A_i,: was written by all lanes; below every lane reads all of it
" ""
        must_fail "step 5's solution, the __syncwarp before y taken out of attention_forward_kernel2" \
            EXERCISE="$(solution 5)" -- "warp_max and warp_sum .*: ok" "A +ok" \
            "y +WRONG at \(b, t, h, d\) = \(0, 0, 0, 0\): .*it changes with the order of a block's threads"
        unplant attention/warp.cuh ;;
    6)
        must_fail "step 6's blank" STEP=6 -- "$(wrong dk 'b, t, h, d' '0, 0, 0, 0' 'its starting value')" \
            "$(wrong dv 'b, t, h, d' '0, 0, 0, 0' 'its starting value')" "dq +ok"
        plant attention/flash.cuh "query0 < T; query0 += FLASH_KEY_TILE) {
        __syncthreads();
" "query0 < T; query0 += FLASH_KEY_TILE) {
"
        must_fail "step 6's solution, the barrier before a tile is copied over taken out of the columns kernel 3" \
            EXERCISE="$(solution 6)" -- "^T16, shared mask .*: ok" \
            "dk +WRONG at \(b, t, h, d\) = .*it changes with the order of a block's threads"
        unplant attention/flash.cuh ;;
    7)
        must_fail "step 7's blank" STEP=7 -- "$(wrong dM 'h, i, j' '0, 0, 0' 'its starting value, nothing was added here')"
        plant attention/flash.cuh "    dmask[m] += sum * sigmoid_of_minus(mask[m]);" \
            "    dmask[m] = sum * sigmoid_of_minus(mask[m]);"
        must_fail "step 7's solution, = for += planted in attention_mask_sum_kernel3" EXERCISE="$(solution 7)" -- \
            "$(wrong dM 'h, i, j' '0, 0, 0' 'the new part alone, without the starting value: the kernel stores \(=\)')"
        unplant attention/flash.cuh ;;
    8)
        must_fail "step 8's blank" STEP=8 -- "$(wrong out 'n, c' '0, 0' 'never written')" \
            "$(wrong mean n 0 'never written')" "$(wrong rstd n 0 'never written')" \
            "$(wrong dinp 'n, c' '0, 0' 'its starting value')" "$(wrong dweight c 0 'its starting value')" \
            "$(wrong dbias c 0 'its starting value')"
        plant layers/layernorm.cuh "int c = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per channel" \
            "int c = threadIdx.x;  // one thread per channel"
        must_fail "step 8's solution, the channel's index without its block in layernorm_backward_params_kernel1" \
            EXERCISE="$(solution 8)" -- "^N 7 rows, C 3 channels: ok" "dinp +ok" "dweight +WRONG at \(c\) = \(0\): "
        unplant layers/layernorm.cuh ;;
    9)
        must_fail "step 9's blank" STEP=9 -- "$(wrong A 'b, h, i, j' '0, 0, 0, 0' 'never written')" "^FAILED: fix"
        what="step 9's solution"
        if ! exercise EXERCISE="$(solution 9)"; then
            fail "make exercise failed"
        else
            expect "^PASSED: your launchers" "^  step 0: .* the same bytes" "^  step 50: .* the same bytes" \
                "^PASSED: your kernels train the model: log.jsonl has kernel 1's very bytes"
        fi
        plant attention.cuh "const float* mask_term, AttentionShape s) {
    const LaunchCost cost" "const float* mask_term, AttentionShape s) {
    if (qkv[0] != qkv[0]) return;  // the host reading device memory
    const LaunchCost cost"
        must_fail "step 9's solution, the host reading qkv planted in attention_forward_gpu1" EXERCISE="$(solution 9)" \
            -- "CUDA emulation: the host read device memory at .* of the cudaMalloc block" "^FAILED: the run stopped"
        unplant attention.cuh ;;
    *)
        echo "exercise check: no step $step (1 to 9)"
        exit 1 ;;
    esac
done

must_fail "a file that does not exist" EXERCISE=no/such/file.cuh -- \
    "^make exercise: EXERCISE=no/such/file.cuh: no such file$"
must_fail "a step that does not exist" STEP=10 -- "^make exercise: STEP=10: no such step \(1 to 9\)$"

[ "$failed" = 0 ] || exit 1
echo "exercise check: step(s) $steps: make exercise fails on each blank naming what is wrong, passes on each" \
     "solution$(echo " $steps " | grep -q ' 9 ' && echo ' (step 9 training the model to kernel 1'"'"'s bytes)'), and" \
     "names the mistake planted in each step's own kernel"
