#!/bin/sh
# tests/nocuda_check.sh (make check): one build, two proofs. A copy of the tree is built without
# CUDA (`make CUDA=0`: ./maskprior and tests/unit_tests by the host compiler, CXX, the CUDA code on
# the emulation) and for x86-64-v2 (SSE only: 128-bit vectors, no FMA, no AVX), and then:
#   - the build without CUDA works on a machine that has nvcc: its unit tests pass (their GPU cases
#     skip, as without a GPU), and one run of make run's (maj3, mask init, seed 1, as
#     experiments/headline.sh has it) writes the bytes of the same run of this tree's ./maskprior,
#     the nvcc build's, at another vector width;
#   - the CPU result depends neither on the vector width nor on the CPU version: the copy running
#     the lesson's plain loops (--cpu-kernel 1) at 1 thread and ./maskprior (HOST_MARCH, native by
#     default) with the fast paths (--cpu-kernel 2, the widest vectors) at 2 threads train the same
#     short run. cpu_fast/gemm.h says why they can: every sum keeps the reference's order whatever
#     the lanes, and -ffp-contract=off keeps a multiply and an add two roundings on every CPU.
# "The same" is every tensor of the checkpoint and every line of log.jsonl (the evaluations, prior
# mass and persistence included). Exit 0 when the build and the tests pass and the bytes match; 1
# otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-nocuda-XXXXXX")
trap 'rm -rf "$work"' EXIT
[ -x ./maskprior ] || { echo "no-CUDA check: FAILED: no ./maskprior to compare with (make maskprior)"; exit 1; }
# the working tree's sources, committed or not, without what git ignores (builds, runs)
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
if ! make -s -C "$work" CUDA=0 HOST_MARCH=x86-64-v2 maskprior tests/unit_tests > "$work/build.log" 2>&1; then
    echo "no-CUDA check: FAILED: the build"; tail -5 "$work/build.log"; exit 1
fi
echo "no-CUDA check: built in $(($(date +%s) - start)) s: $("$work/maskprior" --version | tail -1)"
# from this tree's root, which has the kernel lab's emulated programs that a unit test runs (the same
# in both builds); the command-line cases run the copy's ./maskprior
if ! MASKPRIOR_BINARY="$work/maskprior" "$work/tests/unit_tests" --no-intro=true > "$work/unit_tests.log" 2>&1; then
    echo "no-CUDA check: FAILED: the unit tests:"; grep -B2 -A6 "ERROR" "$work/unit_tests.log" | head -40; exit 1
fi
echo "no-CUDA check: the unit tests: $(grep "test cases:" "$work/unit_tests.log" | sed 's/\[doctest\] *//')"

# a safetensors file's tensor bytes: what follows its 8-byte header length and its JSON header
# (whose metadata holds the command line, which names the folder)
tensors() { tail -c +$((9 + $(od -An -t u8 -N 8 "$1" | tr -d ' '))) "$1"; }
# same NAME RUN THREADS VERSION COPY-THREADS COPY-VERSION: RUN by ./maskprior at THREADS and --cpu-kernel
# VERSION, and by the copy at its own, must write the same bytes
same() {
    # shellcheck disable=SC2086  # run is words
    if ! OMP_NUM_THREADS=$3 ./maskprior $2 --cpu-kernel $4 --out "$work/$1-nvcc" > "$work/$1-nvcc.log" 2>&1 ||
       ! OMP_NUM_THREADS=$5 "$work/maskprior" $2 --cpu-kernel $6 --out "$work/$1-copy" > "$work/$1-copy.log" 2>&1
    then
        echo "no-CUDA check: FAILED: a run failed"; tail -3 "$work/$1-nvcc.log" "$work/$1-copy.log"; return 1
    fi
    tensors "$work/$1-nvcc/model.safetensors" > "$work/$1-nvcc.bin"
    tensors "$work/$1-copy/model.safetensors" > "$work/$1-copy.bin"
    if cmp -s "$work/$1-nvcc/log.jsonl" "$work/$1-copy/log.jsonl" && cmp -s "$work/$1-nvcc.bin" "$work/$1-copy.bin"
    then
        return 0
    fi
    echo "no-CUDA check: FAILED: $1: the copy and ./maskprior differ:"
    cmp "$work/$1-nvcc.bin" "$work/$1-copy.bin"
    diff "$work/$1-nvcc/log.jsonl" "$work/$1-copy/log.jsonl" | head -4
    return 1
}
same make-run "--task maj3 --init mask --seed 1 --optimizer adam --eval-every 250 --device cpu" 2 2 2 2 || exit 1
native_bits=$(sed -n 's/.*, \([0-9]*\)-bit vectors.*/\1/p' "$work/make-run-nvcc.log" | head -1)
echo "no-CUDA check: make run's maj3 mask seed 1 wrote the same log.jsonl and checkpoint tensors in the build" \
     "without CUDA (128-bit vectors) and in ./maskprior ($native_bits-bit)"
same widths "--task maj3 --init mask --seed 3 --steps 300 --eval-every 100 --device cpu" 2 2 1 1 || exit 1
echo "no-CUDA check: the $native_bits-bit fast paths at 2 threads and the 128-bit x86-64-v2 lesson's loops at" \
     "1 thread (--cpu-kernel 1) wrote the same checkpoint tensors ($(wc -c < "$work/widths-copy.bin") bytes)" \
     "and log.jsonl; $(($(date +%s) - start)) s in all"
