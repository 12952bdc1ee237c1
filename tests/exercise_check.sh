#!/bin/sh
# tests/exercise_check.sh: the kernel exercise (dev/exercises/) fails on the blank and passes on
# the solution. In a copy of the tree, `make exercise` must:
#   - on the blank, fail, naming dS (never written), dq, dk, dv and dM (each its starting value)
#     WRONG, each at its (b, h, i, j), (b, t, h, d) or (h, i, j);
#   - on the solution (kernel 1's own kernels under the exercise's names), pass;
#   - on kernel 1's rows and columns kernels with a mask kernel that does nothing, fail naming dM
#     alone, with the others ok: the message points at the one wrong output;
#   - on an EXERCISE that does not exist, stop with a line that says so.
# Exit 0 when so, 1 when not.
set -u
cd "$(dirname "$0")/.." || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-exercise-XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
failed=0
fail() { echo "exercise check: FAILED: $1"; sed 's/^/    /' "$work/out"; failed=1; }
# the lines the output must have, one grep -E pattern each
expect() {
    for pattern in "$@"; do grep -qE "$pattern" "$work/out" || fail "no line matching: $pattern"; done
}

if make -s -C "$work" exercise > "$work/out" 2>&1; then
    fail "make exercise passed on the blank"
else
    expect "dS  WRONG at \(b, h, i, j\) = \(0, 0, 0, 0\): expected .*, got nan: never written" \
           "dq  WRONG at \(b, t, h, d\) = \(0, 0, 0, 0\): .*its starting value" \
           "dk  WRONG at \(b, t, h, d\) = .*its starting value" "dv  WRONG at \(b, t, h, d\) = .*its starting value" \
           "dM  WRONG at \(h, i, j\) = \(0, 0, 0\): .*its starting value" "^FAILED: "
fi
blank=$(grep -m1 "WRONG" "$work/out" | sed 's/^ *//')

if ! make -s -C "$work" exercise EXERCISE=dev/exercises/attention_backward_solution.cuh > "$work/out" 2>&1; then
    fail "make exercise failed on the solution"
else
    expect "^PASSED: "
fi

# kernel 1's rows and columns, and a mask kernel that adds nothing
sed -n '/^#pragma once/,/^#include/p' dev/exercises/attention_backward_solution.cuh > "$work/no_dm.cuh"
grep -E "^constexpr auto attention_backward_(rows|columns)_exercise" dev/exercises/attention_backward_solution.cuh \
    >> "$work/no_dm.cuh"
cat >> "$work/no_dm.cuh" <<'EOF'
__global__ void attention_backward_mask_exercise(float* __restrict__ dmask, const float* __restrict__ dscores,
                                                 const float* __restrict__ mask, AttentionShape s) {}
EOF
if make -s -C "$work" exercise EXERCISE="$work/no_dm.cuh" > "$work/out" 2>&1; then
    fail "make exercise passed with a mask kernel that does nothing"
else
    expect "dS  ok" "dq  ok" "dk  ok" "dv  ok" "dM  WRONG at \(h, i, j\) = \(0, 0, 0\): .*its starting value"
fi

if make -s -C "$work" exercise EXERCISE=no/such/file.cuh > "$work/out" 2>&1; then
    fail "make exercise passed on a file that does not exist"
else
    expect "^make exercise: EXERCISE=no/such/file.cuh: no such file$"
fi

[ "$failed" = 0 ] || exit 1
echo "exercise check: make exercise fails on the blank (\"$blank\", then dq, dk, dv and dM), passes on" \
     "the solution, and names dM alone when only the mask kernel is empty"
