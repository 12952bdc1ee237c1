// dev/exercises/step7_mask_groups_exercise.cuh: the kernel course, step 7 of 9, blank: the mask
// gradient dM summed over the batch in fixed groups, in parallel and with the same bits at every
// run, without atomics, as version 3 (attention/flash.cuh) computes it (dev/exercises/README.md
// says it in full). Work in a copy, and check it on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step7_mask_groups_exercise.cuh $HOME/step7.cuh
//   make exercise EXERCISE=$HOME/step7.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// Step 4's mask kernel gives each of the mask_heads·T·T entries one thread that adds the B (·NH)
// terms of its sum alone:
//   dM_m += σ(-M_m) · sum over b (and over h, when the heads share the mask) of dS_bhij
// At T = 16 that is 256 threads for the whole GPU, each walking the batch. Atomics would let
// every (b, entry) add into dM at once, in whatever order the threads happen to run: other bits
// at every run. Instead, in two launches, each sum in a fixed order:
//   stage 1: a thread per (group g, entry m), g = 0 .. ceil(B / 8)-1: it sums dS over its group's
//     batch rows b = 8g .. min(8g+8, B)-1 (and the entry's heads), in order, and writes that
//     partial sum over dS at (b = 8g, h = the entry's first head, i, j): an entry of dS that only
//     this thread reads, and it has read it by then (dS is scratch: the backward is done with it);
//   stage 2: a thread per entry m adds the groups' partial sums in group order:
//     dM_m += σ(-M_m) · (partial_0 + partial_1 + ...)
// The host code between them is yours too: two launches, in order, on one stream (the launch
// order is the only ordering needed: a launch starts after the one before it ends).
// From the project, which this file includes:
//   MASK_GROUP_ROWS (8), sigmoid_of_minus(m) = σ(-m), ceil_div(n, block), BLOCK (256)
//   launch_kernel<kernel>(blocks, threads, shared_bytes, args...): kernel<<<blocks, threads, ...>>>
#pragma once
#include "attention/flash.cuh"  // MASK_GROUP_ROWS (attention_mask_{partials,sum}_kernel3 there: the answer)

// stage 1: a thread per (group g, mask entry m), idx = g·count + m, count = mask_heads·T·T
__global__ void attention_mask_partials_exercise(float* dscores, AttentionShape s) {
    // dscores (B,NH,T,T): dS in; group g's partial sums out, at b = 8g (the entry's first head)
    // YOUR CODE HERE
}

// stage 2: a thread per mask entry m
__global__ void attention_mask_sum_exercise(float* __restrict__ dmask, const float* __restrict__ dscores,
                                            const float* __restrict__ mask, AttentionShape s) {
    // dmask (mask_heads,T,T) dM added; dscores: the partial sums; mask (mask_heads,T,T) M
    // YOUR CODE HERE
}

// dM from dS (which it overwrites), on the host: the two launches. Called with a mask only.
inline void attention_mask_backward_exercise(float* dmask, float* dscores, const float* mask, AttentionShape s) {
    // YOUR CODE HERE
}
