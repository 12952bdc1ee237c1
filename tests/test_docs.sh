#!/bin/sh
# tests/test_docs.sh: the documents name only paths, make targets and flags that exist, name
# every flag and every make target the program and the Makefile's header offer, and give the
# counts of runs the tables' scripts make (tests/check_docs.py); and the checker catches a stale
# name: a copy of README.md, checked against this tree, gets one planted at a time (a missing
# path, a missing make target, a flag the program does not have, in prose code spans, indented
# and fenced code blocks; a wrong count of a table's seeds; a figure of "Results in brief" that
# docs/results.md does not give), and a binary whose --help prints one flag more is checked
# against the real documents; the checker must fail on each and name it. Then what the documents
# and comments say of the code (tests/check_references.py) on the real tree, and once on copies
# with one planted mistake of each class, all checked in one run: a metrics.json key a run writes
# left out of docs/runs.md's list, and one no run writes added; a target and a package left out of
# package sets' rows in docs/testing.md; a place past its file's end, and one whose name is not
# there (the emulation's cudaMalloc site back at ./model.cuh:156); a `name` (`file`) whose file
# does not define it (README's model_set_batch), and a comment's name (file) whose file's code does
# not use it; an include's comment naming what its header does not define; a name the lesson's
# attention.cuh uses that no include's comment names (worth_threads); a figure of README's make run
# table that docs/results.md's row does not give, and one before a link whose page does not; a
# Results in brief bullet measured on the AMD EPYC alone that does not say so.
# Exit 0 when the real documents pass and every plant is caught, 1 otherwise, 77 (skip) when
# there is no binary to ask for its flags (MASKPRIOR_BINARY, default ./maskprior: build it with make).
# shellcheck disable=SC2016  # the plants' backquotes are markdown's, not command substitutions
set -u
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
binary=${MASKPRIOR_BINARY:-$root/maskprior}
if [ ! -x "$binary" ]; then
    echo "docs check: SKIPPED: no binary $binary to ask for its flags (make, or set MASKPRIOR_BINARY)"
    exit 77
fi
export MASKPRIOR_BINARY="$binary"
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-docs-XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0

# real LABEL CHECKER WHY: CHECKER must pass on the real tree (WHY: what its failing means)
real() {
    if "$python" "$2" --root "$root" > "$work/real.out" 2>&1; then
        echo "$1: the real tree: $(tail -1 "$work/real.out")"
    else
        echo "$1: FAILED: $3:"
        sed 's/^/    /' "$work/real.out"
        failed=1
    fi
}
real "docs check" tests/check_docs.py "the real documents name what does not exist"

# plant NAME TOKEN TEXT: TEXT appended to a copy of README.md must fail the check, naming TOKEN
plant() {
    name=$1 token=$2 text=$3
    cp README.md "$work/README.md"
    printf '\n%s\n' "$text" >> "$work/README.md"
    "$python" tests/check_docs.py --root "$root" "$work/README.md" > "$work/plant.out" 2>&1
    rc=$?
    if [ "$rc" = 1 ] && grep -F -- "$token is named but" "$work/plant.out" | grep -q -F -- "$work/README.md:"; then
        echo "docs check: planted $name: caught: $(grep -F -- "$token is named but" "$work/plant.out" | head -1 | sed "s|^$work/||")"
    else
        echo "docs check: FAILED: planted $name ($token) was not caught (exit $rc):"
        sed 's/^/    /' "$work/plant.out"
        failed=1
    fi
}
plant "a path that does not exist" "path layers/attention_old.cuh" \
    'The old kernel is in `layers/attention_old.cuh`.'
plant "a make target that does not exist" "make target test-everything" \
    '    make test-everything        # every test there is'
plant "a flag the program does not have" "flag --no-such-flag" \
    '    ./maskprior --task maj3 --no-such-flag'
plant "a flag the program does not have, in a code span" "flag --no-such-flag" \
    'Run `./maskprior --task maj3 --no-such-flag` for that.'
plant "a path that does not exist, in a fenced block" "path tests/no_such_test.sh" \
    "$(printf '```sh\nsh tests/no_such_test.sh --quick\n```')"
plant "a wrong count of a table's runs" "count 2 seeds" \
    '    make table-boolean          # 4 tasks x 5 variants x 2 seeds'

# a figure of the README's "Results in brief" that the section it links does not give: the vision
# table's older +2.1, which the README once kept after docs/results.md had moved to +1.75
sed 's/(+1\.75 points)/(+2.1 points)/' README.md > "$work/README.md"
"$python" tests/check_docs.py --root "$root" "$work/README.md" > "$work/plant.out" 2>&1
rc=$?
caught=$(grep -F -- "figure 2.1 is named but" "$work/plant.out" | grep -F -- "$work/README.md:")
if [ "$rc" = 1 ] && [ -n "$caught" ]; then
    echo "docs check: planted a stale figure in Results in brief: caught: ${caught#"$work/"}"
else
    echo "docs check: FAILED: a stale figure in Results in brief (+2.1) was not caught (exit $rc):"
    sed 's/^/    /' "$work/plant.out"
    failed=1
fi

# a flag no document names: the binary's --help with one more line
{
    echo '#!/bin/sh'
    echo "\"$binary\" \"\$@\"; rc=\$?"
    echo '[ "$1" = --help ] && echo "  --planted-flag N    a flag no document names"'
    echo 'exit $rc'
} > "$work/maskprior"
chmod +x "$work/maskprior"
MASKPRIOR_BINARY="$work/maskprior" "$python" tests/check_docs.py --root "$root" > "$work/plant.out" 2>&1
rc=$?
caught=$(grep -F -- "flag --planted-flag is in" "$work/plant.out" | grep -F "docs/command-line.md")
if [ "$rc" = 1 ] && [ -n "$caught" ]; then
    echo "docs check: planted a flag that --help prints and no document names: caught: $caught"
else
    echo "docs check: FAILED: a flag that --help prints and no document names was not caught (exit $rc):"
    sed 's/^/    /' "$work/plant.out"
    failed=1
fi

# what the documents and comments say of the code: the real tree, then one run over planted copies
real "references check" tests/check_references.py "the real tree's documents or comments say what the code does not"
mkdir "$work/planted"
# planted REL SED [TEXT]: a copy of REL into $work/planted, the sed script applied and TEXT appended
planted() {
    sed "$2" "$1" > "$work/planted/${1##*/}"
    [ -z "${3:-}" ] || printf '\n%s\n' "$3" >> "$work/planted/${1##*/}"
}
planted docs/runs.md 's/ and `cuda_graph`,/,/; s/final_loss, train_examples/final_loss, bogus_key, train_examples/'
planted docs/testing.md 's/`make exercise`, //; s/ python3-venv,//'
planted docs/emulation.md 's|(cudaMalloc number 112, ./layers/device.cuh:168)|(cudaMalloc number 112, ./model.cuh:156)|'
planted attention.cuh '/^#include "layers\/device.cuh"/d'
planted model.cuh 's|#include "gpu/stream.cuh"              // gpu_setup$|#include "gpu/stream.cuh"              // gpu_stream_setup|'
planted README.md 's/| 0.9750 (0.875-1.000) |/| 0.9800 (0.875-1.000) |/; s/, a 2-core AMD EPYC):/):/' \
    'The batch goes up in `model_set_batch` (`gpu/model_batch.cuh`); its shape is at `run/report.cuh:9999`; the naive kernels ran at 0.42x PyTorch eager ([docs/gpu.md](docs/gpu.md)).'
planted run/keeper.cuh '' '// the batch goes up in model_send_batch (gpu/model_batch.cuh)'
"$python" tests/check_references.py --root "$root" --as docs/runs.md "$work/planted/runs.md" \
    --as docs/testing.md "$work/planted/testing.md" --as docs/emulation.md "$work/planted/emulation.md" \
    --as attention.cuh "$work/planted/attention.cuh" --as model.cuh "$work/planted/model.cuh" \
    --as README.md "$work/planted/README.md" --as run/keeper.cuh "$work/planted/keeper.cuh" > "$work/plant.out" 2>&1
rc=$?
# caught NAME FILE TOKEN: the run above failed, naming TOKEN on a line of the planted FILE
caught() {
    line=$(grep -F -- "$3" "$work/plant.out" | grep -F -- "$work/planted/$2:" | head -1)
    if [ "$rc" = 1 ] && [ -n "$line" ]; then
        echo "references check: planted $1: caught: ${line#"$work/planted/"}"
    else
        echo "references check: FAILED: planted $1 ($3 in $2) was not caught (exit $rc):"
        sed 's/^/    /' "$work/plant.out"
        failed=1
    fi
}
caught "a metrics.json key left out of the list" runs.md "key cuda_graph is in metrics.json"
caught "a key no run writes" runs.md "key bogus_key is named but"
caught "a target left out of a package set" testing.md "leave out make exercise"
caught "a package left out of a package set" testing.md "leave out python3-venv"
caught "a place whose name is not there" emulation.md "cudaMalloc at ./model.cuh:156 is named but"
caught "a place past its file's end" README.md "place run/report.cuh:9999 is named but"
caught "a name its file does not define" README.md "\`model_set_batch\` (\`gpu/model_batch.cuh\`) is named but"
caught "a comment's name its file does not use" keeper.cuh "model_send_batch (gpu/model_batch.cuh) is named but"
caught "an include's comment naming what its header lacks" model.cuh "gpu_stream_setup (#include"
caught "a name the lesson uses from an unnamed header" attention.cuh "worth_threads is used but"
caught "a figure of the make run table" README.md "figure 0.9800 of mask is named but"
caught "a figure its link does not give" README.md "figure 0.42 is named but"
caught "a bullet that hides its machine" README.md "a bullet measured on AMD EPYC is named but"
exit $failed
