#!/bin/sh
# tests/test_docs.sh: the documents name only paths, make targets and flags that exist, name
# every flag and every make target the program and the Makefile's header offer, and give the
# counts of runs the tables' scripts make (tests/check_docs.py); and the checker catches a stale
# name: a copy of README.md, checked against this tree, gets one planted at a time (a missing
# path, a missing make target, a flag the program does not have, in prose code spans, indented
# and fenced code blocks; a wrong count of a table's seeds; a figure of "Results in brief" that
# docs/results.md does not give), and a binary whose --help prints one flag more is checked
# against the real documents; the checker must fail on each and name it.
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

if "$python" tests/check_docs.py --root "$root" > "$work/real.out" 2>&1; then
    echo "docs check: the real documents: $(tail -1 "$work/real.out")"
else
    echo "docs check: FAILED: the real documents name what does not exist:"
    sed 's/^/    /' "$work/real.out"
    failed=1
fi

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
exit $failed
