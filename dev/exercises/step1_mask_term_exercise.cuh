// dev/exercises/step1_mask_term_exercise.cuh: the kernel course, step 1 of 9, blank: the mask term
// log σ(M), a thread per entry (dev/exercises/README.md says it in full). Work in a copy, and check
// it against the CPU on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step1_mask_term_exercise.cuh $HOME/step1.cuh
//   make exercise EXERCISE=$HOME/step1.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// The model adds log σ(M_ij) to every score S_ij of a head (attention.cuh): the mask can only
// down-weight a key, by as much as M says. M is one (T,T) mask that the heads share or one (T,T)
// mask per head: mask_heads·T·T entries, one flat buffer either way. Its log σ is computed once a
// call, for the whole mask, by this kernel:
//   mask_term[m] = log σ(mask[m]) = log(1 / (1 + e^-mask[m]))        m = 0 .. count-1
// Written as it stands, e^-x overflows to inf for x below about -88 (an entry held shut), and
// log(1 / inf) = -inf. The stable form, right for every x and never above 0:
//   log σ(x) = min(x, 0) - log1p(e^-|x|)
// The check holds entries as far out as ±100. Write it yourself: attention.cuh's log_sigmoid is
// this step's answer.
//
// The launch (the check's, as attention/versions.cuh launches the project's kernel):
// ceil(count / 128) blocks of 128 threads. Thread m = blockIdx.x·blockDim.x + threadIdx.x takes
// entry m; the last block's threads past the last entry must do nothing.
#pragma once
#include "attention.cuh"  // the project's attention (mask_term_kernel1 there is this step's answer)

__global__ void mask_term_exercise(float* __restrict__ mask_term, const float* __restrict__ mask, int count) {
    // mask_term (count) written: log σ(M); mask (count) M, (mask heads, T, T) flat
    // YOUR CODE HERE
}
