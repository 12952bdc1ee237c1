#!/bin/sh
# tests/sanitize.sh [--quick]: the program and its tests under AddressSanitizer (with
# LeakSanitizer) and UndefinedBehaviorSanitizer. The binaries are built by nvcc, which hands the
# sanitizer flags to the host compiler (Makefile: SANITIZE_FLAGS); any report ends the program
# with a non-zero exit, so it fails the check. On a CPU every layer runs as host code; the CUDA
# kernels meet the same sanitizers on their emulation (tests/emulated_tests_asan, in make check).
#   make test-sanitize (no argument): every unit test (tests/unit_tests_sanitize), whose
#       command-line cases run ./maskprior-sanitize (every bad-input answer, resume, --continue,
#       sampling, a run of each init), then tests/test_faults.sh on ./maskprior-sanitize: a short
#       run of each task family (Boolean, arithmetic, language, images), killed at exact points and
#       continued. About 10 minutes on 2 cores, after about 7 of building.
#   --quick (make check, so CI): the command-line cases of the plain tests/unit_tests on
#       ./maskprior-sanitize: every bad-input answer of every task family, corrupt checkpoints,
#       bad output paths, a diverging run, --continue, and short runs of each family, resumed
#       bit-exactly. A few minutes.
# Exits 0 when clean; prints the reports otherwise.
set -u
cd "$(dirname "$0")/.."
# A CUDA runtime maps memory where ASan's shadow gap is: leave the gap unprotected (needed on a GPU)
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
export MASKPRIOR_BINARY=./maskprior-sanitize
if [ "${1:-}" = --quick ]; then
    exec ./tests/unit_tests --no-intro=true \
        -tc="bad *,faults:*,--resume*,*: bad flags*,--task lm: a short run*,image tasks: --resume*,--dump-state*"
fi
status=0
./tests/unit_tests_sanitize --no-intro=true || status=1
sh tests/test_faults.sh || status=1
exit $status
