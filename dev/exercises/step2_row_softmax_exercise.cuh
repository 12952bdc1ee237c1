// dev/exercises/step2_row_softmax_exercise.cuh: the kernel course, step 2 of 9, blank: the softmax of
// one row of scores, what one thread of kernel 1 does for its query row (dev/exercises/README.md
// says it in full). Work in a copy, and check it on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step2_row_softmax_exercise.cuh $HOME/step2.cuh
//   make exercise EXERCISE=$HOME/step2.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// A query row i of one head holds its scores S_i0 .. S_i,last (last = i when causal: a query sees
// no later key; else T-1). Its softmax, in place:
//   A_ij = e^(S_ij - m) / sum_{k <= last} e^(S_ik - m)    for j <= last,   m = max_{k <= last} S_ik
//   A_ij = 0                                               for j > last
// Subtracting the row's max m changes nothing in exact arithmetic (it cancels) and everything in
// floats: e^x overflows to inf past x = 88.7, and inf / inf is NaN. With m subtracted every
// exponent is <= 0, so every e^x is in (0, 1] and the sum is at least 1. The check's rows include
// scores up to 100. Entries past `last` hold NaN (no score was computed there): write 0 over them.
// The project sums e^x with vexp (cpu_fast/vexp.h, the same arithmetic on the CPU and the GPU,
// bit for bit); expf is right too, within the check's tolerance.
//
// The check calls your function from a kernel with a thread per row (b, h, i) of A (B,NH,T,T), as
// kernel 1 (attention.cuh) calls its row functions: step 3 is that kernel.
#pragma once
#include "attention.cuh"    // the project's attention (attention_row_softmax there is this step's answer)
#include "cpu_fast/vexp.h"  // vexp(x): e^x

__device__ void attention_row_softmax_exercise(float* att_row, int T, int last) {
    // att_row (T): the scores S_i,: in (NaN past last), A_i,: out
    // YOUR CODE HERE
}
