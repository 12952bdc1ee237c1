#!/bin/sh
# The lesson is the code that runs: a copy of the tree with one line of attention.cuh's forward
# changed (attention_row_scores scales every score by 1.5) trains a different model at
# --cpu-kernel 1, which runs the lesson's loops, and the very same one at --cpu-kernel 2, which runs
# cpu_fast/ and never calls the edited function on the CPU. Both are compared with ./maskprior's
# run at the default version: version 1's log.jsonl must differ, version 2's must not.
# Exit 0 when so, 1 when not or when a build or run fails.
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-lesson-XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
line='        att_row[j] = dot * scale + (mask_row ? mask_row[j] : F(0));'
edited='        att_row[j] = dot * scale * F(1.5) + (mask_row ? mask_row[j] : F(0));'
if [ "$(grep -cxF "$line" "$work/attention.cuh")" != 1 ]; then
    echo "lesson edit check: FAILED: attention.cuh no longer has the line this test edits:"; echo "$line"; exit 1
fi
awk -v line="$line" -v edited="$edited" '$0 == line { print edited; next } { print }' "$work/attention.cuh" \
    > "$work/attention.edited" && mv "$work/attention.edited" "$work/attention.cuh"
# the same program with its CUDA code on the emulation, by the host compiler alone at -O1: it trains
# on the CPU as ./maskprior does, to the same bits, and compiles in less than half the time -O3 takes
if ! make -s -C "$work" maskprior-emulated EMU_OPT=-O1 > "$work/build.log" 2>&1; then
    echo "lesson edit check: FAILED: the edited copy did not build"; tail -5 "$work/build.log"; exit 1
fi
run="--task maj3 --init mask --seed 2 --steps 60 --eval-every 30 --device cpu"
# shellcheck disable=SC2086  # run is words
if ! ./maskprior $run --out "$work/original" > "$work/original.log" 2>&1 ||
   ! "$work/maskprior-emulated" $run --cpu-kernel 1 --out "$work/lesson" > "$work/lesson.log" 2>&1 ||
   ! "$work/maskprior-emulated" $run --cpu-kernel 2 --out "$work/fast" > "$work/fast.log" 2>&1; then
    echo "lesson edit check: FAILED: a run failed"; tail -3 "$work"/*.log; exit 1
fi
if cmp -s "$work/original/log.jsonl" "$work/lesson/log.jsonl"; then
    echo "lesson edit check: FAILED: an edit of attention_row_scores did not change the --cpu-kernel 1 run"; exit 1
fi
if ! cmp -s "$work/original/log.jsonl" "$work/fast/log.jsonl"; then
    echo "lesson edit check: FAILED: an edit of attention_row_scores changed the --cpu-kernel 2 run"
    diff "$work/original/log.jsonl" "$work/fast/log.jsonl" | head -4; exit 1
fi
echo "lesson edit check: with attention_row_scores edited, --cpu-kernel 1 trained another model" \
     "(loss $(sed -n 's/.*"step":60,"loss":\([0-9.e-]*\).*/\1/p' "$work/lesson/log.jsonl") against" \
     "$(sed -n 's/.*"step":60,"loss":\([0-9.e-]*\).*/\1/p' "$work/original/log.jsonl")), --cpu-kernel 2 the same one"
