#!/bin/sh
# tests/test_gpu_tests_isolated.sh: tests/gpu_tests_isolated.sh, the way make gpu-check runs the GPU
# cases, on a doctest program with a crash planted in one case (make check; about 15 s, most of it
# compiling doctest). Its three families: main.cpp, two cases that pass; planted.h, a case that passes,
# one that raises SIGSEGV, one that fails an assertion, one that exits in the middle as cudaCheck does
# on a sticky CUDA error, one that hangs, and one that passes after them; gpu.h, two "GPU cases" that
# skip themselves under MASKPRIOR_TESTS_WITHOUT_GPU (one with commas in its name) and a CPU case
# whose name says gpu. The runner must report the passing ones ok, name the crashed, failed and hung
# ones, and exit 1; report a family that fails without crashing by its failing case; a family cut by
# --total as not finished (exit 3); exit 0 when every case passes and 77 when none matches; with
# --gpu-cases choose the two GPU cases alone (where the filter "*GPU*" also takes the CPU case),
# with --first run the named one first, in a part of its own; and when sent SIGTERM, stop the part
# then running, timeout(1)'s process group and all, before it exits. Then,
# when tests/emulated_tests is built, the same runner on two of its files, a process each, and again
# with a bad MASKPRIOR_EMU_CUBLASLT, which ends matmul version 2's case in the middle: the other file
# must pass, and the case be named. Exit 0 when all hold.
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/main.cpp" <<'EOF'
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
TEST_CASE("passes in a family of its own") { CHECK(1 + 1 == 2); }
TEST_CASE("passes in a family of its own, again") { CHECK(2 + 2 == 4); }
#include "planted.h"
#include "gpu.h"
EOF
cat > "$tmp/gpu.h" <<'EOF'
#include <cstdlib>
static const bool NO_GPU = getenv("MASKPRIOR_TESTS_WITHOUT_GPU") != nullptr;
TEST_CASE("GPU kernels match the CPU" * doctest::skip(NO_GPU)) { CHECK(true); }
TEST_CASE("a training step on the GPU, with commas, matches the CPU's" * doctest::skip(NO_GPU)) { CHECK(true); }
TEST_CASE("tools/bench_gpu.py still runs (a CPU case)") { CHECK(true); }
EOF
cat > "$tmp/planted.h" <<'EOF'
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
TEST_CASE("passes before the crash") { CHECK(true); }
TEST_CASE("crashes with SIGSEGV") { raise(SIGSEGV); }
TEST_CASE("fails an assertion") { CHECK(1 + 1 == 3); }
TEST_CASE("exits in the middle, as cudaCheck does") {
    fprintf(stderr, "maskprior: CUDA error at planted.h:9: an illegal memory access was encountered\n");
    exit(1);
}
TEST_CASE("hangs") { sleep(60); }
TEST_CASE("passes after them") { CHECK(true); }
EOF
(cd "$tmp" && ${CXX:-g++} -std=c++17 -O0 -o fixture main.cpp) || { echo "FAILED: the fixture does not build"; exit 1; }

errors=0
# expect WHAT TEXT FILE: a line of FILE holds TEXT
expect() {
    if grep -q -F -- "$2" "$3"; then echo "  ok: $1"
    else echo "  FAILED: $1: no line '$2' in:"; cat "$3"; errors=$((errors + 1)); fi
}
# expect_rc WHAT RC WANTED
expect_rc() {
    if [ "$2" = "$3" ]; then echo "  ok: $1 (exit $2)"
    else echo "  FAILED: $1: exit $2, wanted $3"; errors=$((errors + 1)); fi
}

echo "== the planted crash (each process 3 s at most)"
sh tests/gpu_tests_isolated.sh --each 3 "$tmp/fixture" > "$tmp/all.out" 2>&1
expect_rc "some case failed" $? 1
expect "the other family, in one process" "ok       main.cpp: 2 cases (" "$tmp/all.out"
expect "the crashed family named with its case" \
    "CRASHED  planted.h (signal SEGV) in \"crashes with SIGSEGV\"; its 6 cases again, a process each:" "$tmp/all.out"
expect "the case before the crash" "  ok       \"passes before the crash\"" "$tmp/all.out"
expect "the crash" "  CRASHED  \"crashes with SIGSEGV\" (signal SEGV)" "$tmp/all.out"
expect "the failed assertion" "  FAILED   \"fails an assertion\" (exit 1)" "$tmp/all.out"
expect "the exit in a case" "  CRASHED  \"exits in the middle, as cudaCheck does\" (exit 1 before doctest's summary)" \
    "$tmp/all.out"
expect "the hang" "  CRASHED  \"hangs\" (timed out after 3 s)" "$tmp/all.out"
expect "the case after them" "  ok       \"passes after them\"" "$tmp/all.out"
expect "the other families, in one process each" "ok       gpu.h: 3 cases (" "$tmp/all.out"
expect "the summary" "gpu_tests_isolated: 7 of 11 cases passed; FAILED: \"fails an assertion\"; CRASHED:\
 \"crashes with SIGSEGV\" (signal SEGV); \"exits in the middle, as cudaCheck does\" (exit 1 before doctest's\
 summary); \"hangs\" (timed out after 3 s) (" "$tmp/all.out"
expect "the crash's own output shown" "maskprior: CUDA error at planted.h:9: an illegal memory access was encountered" \
    "$tmp/all.out"

echo "== a family that fails without crashing"
sh tests/gpu_tests_isolated.sh "$tmp/fixture" "*fails*,passes*" > "$tmp/failed.out" 2>&1
expect_rc "a case failed" $? 1
expect "the failing case named" "FAILED   planted.h (exit 1): 1 of 3 cases failed: \"fails an assertion\"" \
    "$tmp/failed.out"

echo "== a family still running when --total's seconds run out: not a crash, and not run again"
sh tests/gpu_tests_isolated.sh --each 30 --total 4 "$tmp/fixture" "hangs,passes*" > "$tmp/total.out" 2>&1
expect_rc "nothing failed, something did not finish" $? 3
expect "the hang did not finish" "DID NOT FINISH  planted.h: 3 cases, did not finish: the 4 s ran out after" \
    "$tmp/total.out"
expect "the summary" "gpu_tests_isolated: 2 of 5 cases passed; DID NOT FINISH: 3 (" "$tmp/total.out"

echo "== every case passing, and none matching"
sh tests/gpu_tests_isolated.sh "$tmp/fixture" "passes*" > "$tmp/passed.out" 2>&1
expect_rc "every case passed" $? 0
expect "both families ok" "ok       planted.h: 2 cases (" "$tmp/passed.out"
expect "the summary" "gpu_tests_isolated: 4 of 4 cases passed (" "$tmp/passed.out"
sh tests/gpu_tests_isolated.sh "$tmp/fixture" "no such case" > "$tmp/none.out" 2>&1
expect_rc "no case to run" $? 77
sh tests/gpu_tests_isolated.sh --each soon "$tmp/fixture" > "$tmp/bad.out" 2>&1
expect_rc "a bad time limit" $? 2

echo "== the GPU cases: those that skip themselves when told there is no GPU, a name filter cannot tell"
sh tests/gpu_tests_isolated.sh --list "$tmp/fixture" "*GPU*" > "$tmp/named.out" 2>&1
expect "a name filter takes the CPU case (doctest ignores case)" "tools/bench_gpu.py still runs" "$tmp/named.out"
sh tests/gpu_tests_isolated.sh --list --gpu-cases "$tmp/fixture" > "$tmp/gpu.out" 2>&1
expect_rc "listed" $? 0
printf 'gpu.h\tGPU kernels match the CPU\ngpu.h\ta training step on the GPU, with commas, matches the CPU%ss\n' "'" \
    > "$tmp/gpu.want"
if cmp -s "$tmp/gpu.out" "$tmp/gpu.want"; then echo "  ok: --gpu-cases chooses the two GPU cases, and no other"
else echo "  FAILED: --gpu-cases chose:"; cat "$tmp/gpu.out"; errors=$((errors + 1)); fi
sh tests/gpu_tests_isolated.sh --gpu-cases --first "*commas*" "$tmp/fixture" > "$tmp/first.out" 2>&1
expect_rc "they pass, a comma in a name and all" $? 0
expect "--first's part first" "ok       first: *commas*: 1 case (" "$tmp/first.out"
expect "then the file's" "ok       gpu.h: 1 case (" "$tmp/first.out"
expect "the summary" "gpu_tests_isolated: 2 of 2 cases passed (" "$tmp/first.out"

echo "== SIGTERM to the runner stops the part then running, in timeout's process group"
sh tests/gpu_tests_isolated.sh --each 30 "$tmp/fixture" "hangs" > "$tmp/term.out" 2>&1 &
runner=$!
sleep 1
kill -TERM $runner
wait $runner
expect_rc "stopped" $? 143
sleep 0.5
if pgrep -f "$tmp/fixture" > "$tmp/left.out"; then
    echo "  FAILED: the part's processes outlived the runner:"; cat "$tmp/left.out"; errors=$((errors + 1))
else echo "  ok: no process of the part is left"; fi

if [ -x tests/emulated_tests ]; then
    echo "== tests/emulated_tests: the emulation's schedule cases, and matmul version 2's, which a bad"
    echo "   MASKPRIOR_EMU_CUBLASLT ends in the middle (one line, exit 2), as cudaCheck ends a case"
    filter="emulation: MASKPRIOR_EMU_SCHEDULE*,GPU matmul version 2 (*"
    sh tests/gpu_tests_isolated.sh tests/emulated_tests "$filter" > "$tmp/emulated.out" 2>&1
    expect_rc "they pass" $? 0
    expect "one family a process" "ok       tests/test_emulation.cu: 1 case (" "$tmp/emulated.out"
    expect "the other" "ok       tests/test_gpu_matmul.cu: 1 case (" "$tmp/emulated.out"
    MASKPRIOR_EMU_CUBLASLT=sometimes sh tests/gpu_tests_isolated.sh tests/emulated_tests "$filter" \
        > "$tmp/emulated-bad.out" 2>&1
    expect_rc "one crashed" $? 1
    expect "the family unharmed" "ok       tests/test_emulation.cu: 1 case (" "$tmp/emulated-bad.out"
    expect "the crashed case named" "  CRASHED  \"GPU matmul version 2 (cuBLASLt, bias epilogue and BGRADB) matches the\
 CPU and version 1, with and without bias; two runs give the same bits\" (exit 2 before doctest's summary)" \
        "$tmp/emulated-bad.out"
else
    echo "== (tests/emulated_tests is not built: its part skipped)"
fi
[ $errors = 0 ] && echo "gpu_tests_isolated.sh: every check held" || echo "gpu_tests_isolated.sh: $errors checks FAILED"
[ $errors = 0 ]
