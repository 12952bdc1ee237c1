#!/bin/sh
# make test: the doctest suite (layers, attention, model, inits, tasks, command line,
# checkpoints, the PyTorch cross-check; GPU cases skip themselves without a GPU), then the
# plot script's test, then one closing line.
log=$(mktemp)
{ ./tests/unit_tests --no-intro=true "$@" 2>&1; echo $? > "$log.rc"; } | tee "$log"
status=$(cat "$log.rc")
summary=$(grep "test cases:" "$log" | tail -1)
rm -f "$log" "$log.rc"
count() { echo "$summary" | sed -n "s/.*| *\([0-9]*\) $1.*/\1/p"; }
passed=$(count passed); failed=$(count failed); skipped=$(count skipped)
[ "${skipped:-0}" != 0 ] && echo "(skipped: the GPU cases, as there is no GPU here; make gpu-check runs them)"
sh tests/test_plot.sh
case $? in
    0) passed=$((${passed:-0} + 1)) ;;
    77) skipped=$((${skipped:-0} + 1)) ;;
    *) failed=$((${failed:-0} + 1)); status=1 ;;
esac
echo "tests: ${passed:-0} passed, ${failed:-1} failed, ${skipped:-0} skipped"
[ "$status" = 0 ] && [ "${failed:-1}" = 0 ]
