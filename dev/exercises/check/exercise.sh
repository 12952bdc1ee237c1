#!/bin/sh
# dev/exercises/check/exercise.sh EXERCISE STEP: make exercise, the kernel course's check
# (dev/exercises/README.md). EXERCISE is a step's file (a blank, a solution, a learner's copy) or
# a step's number; STEP a step's number, which without EXERCISE names that step's blank. The step
# of a file is in its name (step<N>_...) or, in a copy under another name, in its first line
# ("// dev/exercises/step<N>_..."). Neither: the list of the steps.
# It builds dev/exercises/check/step<N>.cu with the file included into build/exercises/step<N>, on
# the CUDA emulation, and runs it: every output against the CPU's, the first wrong entry named
# (check/check.h). Step 9 then builds the trainer with the file's launchers (train.cu, linked with
# build/exercises/train-main.o, main.cu built once with ATTENTION_EXERCISE) and trains make run's
# model with them and with kernel 1, comparing the two logs (check/train.py).
# The Makefile hands it EMU_CXX, EXERCISE_FLAGS (the emulation's flags, at EXERCISE_OPT), EMU_LIBS and
# PYTHON. Exit 0 when the file passes, 1 when it does not, 2 for a file or step that does
# not exist.
set -u
exercise=$1 step=$2
case $exercise in [1-9]) step=$exercise exercise="" ;; esac
if [ -z "$exercise" ] && [ -z "$step" ]; then
    echo "the kernel course (dev/exercises/README.md): make exercise STEP=N checks step N's blank, and"
    echo "make exercise EXERCISE=FILE any step's file (your copy of a blank, or a *_solution.cuh):"
    for blank in dev/exercises/step*_exercise.cuh; do
        echo "  $(basename "$blank" _exercise.cuh | sed 's/^step\([0-9]*\)_/\1  /; s/_/ /g')"
    done
    exit 0
fi
if [ -z "$exercise" ]; then
    exercise=$(ls dev/exercises/step"$step"_*_exercise.cuh 2>/dev/null)
    [ -n "$exercise" ] || { echo "make exercise: STEP=$step: no such step (1 to 9)" >&2; exit 2; }
fi
[ -f "$exercise" ] || { echo "make exercise: EXERCISE=$exercise: no such file" >&2; exit 2; }
if [ -z "$step" ]; then
    step=$(basename "$exercise" | sed -n 's/^step\([1-9]\)_.*/\1/p')
    [ -n "$step" ] || step=$(sed -n '1s|^// dev/exercises/step\([1-9]\)_.*|\1|p' "$exercise")
    [ -n "$step" ] || { echo "make exercise: EXERCISE=$exercise: which step? neither its name nor its first line" \
                             "names one (step<N>_...): say STEP=N" >&2; exit 2; }
fi
[ -f dev/exercises/check/step"$step".cu ] || { echo "make exercise: STEP=$step: no such step (1 to 9)" >&2; exit 2; }

mkdir -p build/exercises
program=build/exercises/step$step
out=build/exercises/step$step.out
# shellcheck disable=SC2086  # the flags are words
if ! $EMU_CXX $EXERCISE_FLAGS -DEXERCISE="\"$exercise\"" -o "$program" -x c++ dev/exercises/check/step"$step".cu \
        -x none $EMU_LIBS; then
    echo "FAILED: $exercise does not compile with step $step's check (the compiler's lines above)"
    exit 1
fi
"./$program" > "$out" 2>&1
rc=$?
cat "$out"
if ! grep -q '^PASSED: \|^FAILED: ' "$out"; then
    echo "FAILED: the run stopped (exit $rc) before its checks were done: the emulation's line above says why (a" \
         "write past the end of a buffer, a barrier some threads never reach, the host touching device memory)"
    exit 1
fi
[ "$rc" = 0 ] || exit 1
[ "$step" = 9 ] || exit 0

# step 9: the trainer with the file's launchers, then the two runs
# (make, not $(MAKE) in the Makefile's recipe, which make -n would run; MAKEFLAGS carries its variables)
make -s -q build/exercises/train-main.o ||
    echo "building the trainer, main.cu with ATTENTION_EXERCISE, once (build/exercises/train-main.o: about 40 s)"
make -s build/exercises/train-main.o || exit 1
# shellcheck disable=SC2086
$EMU_CXX $EXERCISE_FLAGS -DEXERCISE="\"$exercise\"" -c -o build/exercises/train-kernels.o \
    -x c++ dev/exercises/check/train.cu &&
    $EMU_CXX $EXERCISE_FLAGS -o build/exercises/maskprior-exercise build/exercises/train-main.o \
        build/exercises/train-kernels.o $EMU_LIBS || exit 1
exec "${PYTHON:-python3}" dev/exercises/check/train.py build/exercises/maskprior-exercise build/exercises/train-main.o \
    build/exercises/runs
