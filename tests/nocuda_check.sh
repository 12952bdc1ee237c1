#!/bin/sh
# tests/nocuda_check.sh (.ci/run, after make check): the build without CUDA, on a machine that has
# nvcc. A copy of the tree built with `make CUDA=0` (./maskprior and tests/unit_tests by the host
# compiler, CXX, the CUDA code on the emulation) runs the unit tests (their GPU cases skip, as
# without a GPU) and one run of make run's (maj3, mask init, seed 1, as experiments/headline.sh
# has it), whose log.jsonl and checkpoint tensors must be the bytes of the same run of this tree's
# ./maskprior, the nvcc build's.
# Exit 0 when the build and the tests pass and the bytes match; 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-nocuda-XXXXXX")
trap 'rm -rf "$work"' EXIT
[ -x ./maskprior ] || { echo "no-CUDA check: FAILED: no ./maskprior to compare with (make maskprior)"; exit 1; }
# the working tree's sources, committed or not, without what git ignores (builds, runs)
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
if ! make -s -C "$work" -j2 CUDA=0 maskprior tests/unit_tests > "$work/build.log" 2>&1; then
    echo "no-CUDA check: FAILED: the build"; tail -5 "$work/build.log"; exit 1
fi
echo "no-CUDA check: built in $(($(date +%s) - start)) s: $("$work/maskprior" --version | tail -1)"
# from this tree's root, which has the kernel lab's emulated programs that a unit test runs (the same
# in both builds); the command-line cases run the copy's ./maskprior
if ! MASKPRIOR_BINARY="$work/maskprior" "$work/tests/unit_tests" --no-intro=true > "$work/unit_tests.log" 2>&1; then
    echo "no-CUDA check: FAILED: the unit tests:"; grep -B2 -A6 "ERROR" "$work/unit_tests.log" | head -40; exit 1
fi
echo "no-CUDA check: the unit tests: $(grep "test cases:" "$work/unit_tests.log" | sed 's/\[doctest\] *//')"
run="--task maj3 --init mask --seed 1 --optimizer adam --eval-every 250 --device cpu"
# shellcheck disable=SC2086  # run is words
if ! ./maskprior $run --out "$work/nvcc" > "$work/nvcc.log" 2>&1 ||
   ! "$work/maskprior" $run --out "$work/host" > "$work/host.log" 2>&1; then
    echo "no-CUDA check: FAILED: a run failed"; tail -3 "$work/nvcc.log" "$work/host.log"; exit 1
fi
# a safetensors file's tensor bytes: what follows its 8-byte header length and its JSON header
tensors() { tail -c +$((9 + $(od -An -t u8 -N 8 "$1" | tr -d ' '))) "$1"; }
tensors "$work/nvcc/model.safetensors" > "$work/nvcc.bin"
tensors "$work/host/model.safetensors" > "$work/host.bin"
if cmp -s "$work/nvcc/log.jsonl" "$work/host/log.jsonl" && cmp -s "$work/nvcc.bin" "$work/host.bin"; then
    echo "no-CUDA check: make run's maj3 mask seed 1 wrote the same log.jsonl and checkpoint tensors in both" \
         "builds; $(($(date +%s) - start)) s in all"
    exit 0
fi
echo "no-CUDA check: FAILED: the build without CUDA and ./maskprior differ:"
cmp "$work/nvcc.bin" "$work/host.bin"
diff "$work/nvcc/log.jsonl" "$work/host/log.jsonl" | head -4
exit 1
