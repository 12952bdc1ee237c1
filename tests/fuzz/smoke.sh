#!/bin/sh
# tests/fuzz/smoke.sh: the fuzzers' smoke test for the test suite (make fuzz-smoke runs the same):
# every harness of tests/fuzz/ checks that its valid seeds parse, then fuzzes for 10 s
# (FUZZ_SMOKE_SECONDS), one after another: about 90 s once the harnesses are built (make builds
# them first, ~15 s each, when missing or stale).
# Exit 0 when all ran clean, 77 (skipped) when there is no clang++ (${FUZZ_CXX:-clang++}),
# anything else when a harness failed to build, found something or rejected a valid seed
# (tests/fuzz/run_fuzz.sh prints which, and where the reproducer is: tests/fuzz/out/smoke/, so
# that a smoke test never clobbers what a make fuzz left in tests/fuzz/out/).
cd "$(dirname "$0")/../.." || exit 1
if ! command -v "${FUZZ_CXX:-clang++}" >/dev/null 2>&1; then
    echo "fuzz smoke test: skipped (no ${FUZZ_CXX:-clang++}; make check installs clang)"
    exit 77
fi
echo "== the fuzzers, ${FUZZ_SMOKE_SECONDS:-10} s each (tests/fuzz/run_fuzz.sh)"
start=$(date +%s)
FUZZ_OUT=tests/fuzz/out/smoke sh tests/fuzz/run_fuzz.sh --seconds "${FUZZ_SMOKE_SECONDS:-10}"
status=$?
echo "(the fuzz smoke test took $(($(date +%s) - start)) s)"
[ $status = 0 ] || echo "fuzz smoke test: FAILED"
exit $status
