#!/bin/sh
# make test: the doctest suite (layers, attention, model, tasks, command line, checkpoints,
# the PyTorch cross-check; GPU cases skip themselves without a GPU), then one closing line.
log=$(mktemp)
{ ./tests/unit_tests --no-intro=true "$@" 2>&1; echo $? > "$log.rc"; } | tee "$log"
status=$(cat "$log.rc")
summary=$(grep "test cases:" "$log" | tail -1)
rm -f "$log" "$log.rc"
count() { echo "$summary" | sed -n "s/.*| *\([0-9]*\) $1.*/\1/p"; }
passed=$(count passed); failed=$(count failed); skipped=$(count skipped)
[ "${skipped:-0}" != 0 ] && echo "(skipped: the GPU cases, as there is no GPU here; make gpu-check runs them)"
echo "tests: ${passed:-0} passed, ${failed:-1} failed, ${skipped:-0} skipped"
[ "$status" = 0 ] && [ "${failed:-1}" = 0 ]
