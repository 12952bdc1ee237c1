#!/bin/sh
# make test: the doctest suite (layers, attention, model, inits, tasks, command line,
# checkpoints, the PyTorch cross-check; its GPU cases skip themselves without a GPU), the GPU
# tests on the CPU emulation of CUDA (tests/emulated_tests, and tests/emulated_tests_asan under
# the sanitizers), the kernel lab's programs on the emulation (dev/), the planted bugs the
# emulation must catch (tests/planted_bugs.sh), the same run's bytes from builds at two vector
# widths (tests/march_check.sh), the plot script's and
# prepare_text.py's tests, the faults (runs killed and continued: tests/test_faults.sh; the
# command-line cases on ./maskprior-sanitize: tests/sanitize.sh --quick; every parser's fuzzer
# for a few seconds: tests/fuzz/smoke.sh), the scheduler scripts (tests/test_scheduler.sh), then
# one closing line.
passed=0; failed=0; skipped=0; status=0
# one doctest binary: its output, then its counts added to the totals
run_doctest() {
    log=$(mktemp)
    { "$@" --no-intro=true 2>&1; echo $? > "$log.rc"; } | tee "$log"
    [ "$(cat "$log.rc")" = 0 ] || status=1
    summary=$(grep "test cases:" "$log" | tail -1)
    rm -f "$log" "$log.rc"
    count() { echo "$summary" | sed -n "s/.*| *\([0-9]*\) $1.*/\1/p"; }
    [ -z "$summary" ] && { failed=$((failed + 1)); return; }
    passed=$((passed + $(count passed))); failed=$((failed + $(count failed))); skipped=$((skipped + $(count skipped)))
}
# a program that exits 0 (passed), 77 (skipped) or anything else (failed)
run_program() {
    "$@"
    case $? in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)); status=1 ;;
    esac
}
run_script() { run_program sh "$@"; }
run_doctest ./tests/unit_tests
gpu_cases_skipped=$skipped
echo "== the GPU tests on the CPU emulation of CUDA (emu/)"
start=$(date +%s)
run_doctest ./tests/emulated_tests
echo "(the emulated GPU tests took $(($(date +%s) - start)) s)"
echo "== the same under AddressSanitizer and UndefinedBehaviorSanitizer (all but the 400-step run)"
start=$(date +%s)
run_doctest ./tests/emulated_tests_asan -tce="a short GPU training run*"
echo "(under the sanitizers they took $(($(date +%s) - start)) s)"
echo "== the kernel lab on the emulation: every attention version against the CPU (dev/*-emulated --quick)"
run_program ./dev/attention_forward-emulated --quick
run_program ./dev/attention_backward-emulated --quick
run_script tests/planted_bugs.sh
echo "== the CPU result at two vector widths (tests/march_check.sh)"
run_script tests/march_check.sh
run_script tests/test_plot.sh
run_script tests/test_prepare_text.sh
echo "== faults: runs killed with SIGKILL and continued (tests/test_faults.sh)"
run_script tests/test_faults.sh --timed 2
echo "== the command line under AddressSanitizer and UndefinedBehaviorSanitizer (tests/sanitize.sh --quick)"
run_script tests/sanitize.sh --quick
echo "== every input parser under libFuzzer, a few seconds each (tests/fuzz/smoke.sh)"
run_script tests/fuzz/smoke.sh
echo "== the table scripts' schedulers: JOBS, a Slurm array run locally (tests/test_scheduler.sh)"
run_script tests/test_scheduler.sh
[ "$gpu_cases_skipped" != 0 ] && echo "(skipped: $gpu_cases_skipped GPU cases of tests/unit_tests, as there is no GPU here;" \
    "the emulation ran them, and make gpu-check runs them on a GPU)"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$status" = 0 ] && [ "$failed" = 0 ]
