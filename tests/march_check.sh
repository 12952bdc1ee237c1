#!/bin/sh
# The CPU result depends neither on the vector width nor on the CPU version: ./maskprior
# (HOST_MARCH, native by default) with the fast paths (--cpu-kernel 2, the widest vectors) and a
# copy built for x86-64-v2 (SSE only: 128-bit vectors, no FMA, no AVX; built without CUDA, by the
# host compiler alone, which is quicker) running the lesson's plain loops (--cpu-kernel 1) train
# the same short run, at 2 threads and at 1, and must write the same
# bytes: every tensor of the checkpoint and every line of log.jsonl (the evaluations, prior
# mass and persistence included). cpu_fast/gemm.h says why they can: every sum keeps the
# reference's order whatever the lanes, and -ffp-contract=off keeps a multiply and an add two
# roundings on every CPU.
# Exit 0 when they match, 1 when they do not or a build or run fails.
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-march-XXXXXX")
trap 'rm -rf "$work"' EXIT
# the working tree's sources, committed or not, without what git ignores (builds, runs)
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
if ! make -s -C "$work" CUDA=0 maskprior HOST_MARCH=x86-64-v2 > "$work/build.log" 2>&1; then
    echo "march check: FAILED: the x86-64-v2 build failed"; tail -5 "$work/build.log"; exit 1
fi
run="--task maj3 --init mask --seed 3 --steps 300 --eval-every 100 --device cpu"
# shellcheck disable=SC2086  # run is words
if ! OMP_NUM_THREADS=2 ./maskprior $run --cpu-kernel 2 --out "$work/native" > "$work/native.log" 2>&1 ||
   ! OMP_NUM_THREADS=1 "$work/maskprior" $run --cpu-kernel 1 --out "$work/v2" > "$work/v2.log" 2>&1; then
    echo "march check: FAILED: a run failed"; tail -3 "$work/native.log" "$work/v2.log"; exit 1
fi
# a safetensors file's tensor bytes: what follows its 8-byte header length and its JSON header
# (whose metadata holds the command line, which names the folder)
tensors() { tail -c +$((9 + $(od -An -t u8 -N 8 "$1" | tr -d ' '))) "$1"; }
tensors "$work/native/model.safetensors" > "$work/native.bin"
tensors "$work/v2/model.safetensors" > "$work/v2.bin"
native_bits=$(sed -n 's/.*, \([0-9]*\)-bit vectors.*/\1/p' "$work/native.log" | head -1)
if cmp -s "$work/native.bin" "$work/v2.bin" && cmp -s "$work/native/log.jsonl" "$work/v2/log.jsonl"; then
    echo "march check: the $native_bits-bit fast paths at 2 threads and the 128-bit x86-64-v2 lesson's loops at" \
         "1 thread (--cpu-kernel 1) wrote the same checkpoint tensors ($(wc -c < "$work/v2.bin") bytes) and log.jsonl"
    exit 0
fi
echo "march check: FAILED: the $native_bits-bit fast paths and the x86-64-v2 lesson's loops differ:"
cmp "$work/native.bin" "$work/v2.bin"
diff "$work/native/log.jsonl" "$work/v2/log.jsonl" | head -4
exit 1
