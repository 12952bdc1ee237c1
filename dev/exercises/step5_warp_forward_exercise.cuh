// dev/exercises/step5_warp_forward_exercise.cuh: the kernel course, step 5 of 9, blank: the attention
// forward with a warp per query row, and the warp reductions it needs, as version 2
// (attention/warp.cuh) runs it (dev/exercises/README.md says it in full). Work in a copy, and check
// it on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step5_warp_forward_exercise.cuh $HOME/step5.cuh
//   make exercise EXERCISE=$HOME/step5.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// Step 3's thread walks its row's T keys alone. Here the 32 threads of a warp (which run in
// lockstep) share a row: lane l takes keys l, l+32, l+64, ... and, for y, dims d = l, l+32, ....
// The row's max and sum then live in 32 pieces, one a lane, and a warp reduction combines them in
// registers: five butterfly steps, lane l adding (or taking the max of) the value of lane l ^ 16,
// then l ^ 8, 4, 2, 1, read with
//   __shfl_xor_sync(0xFFFFFFFFu, x, offset)    x as lane (this lane ^ offset) holds it
// after which every lane holds the whole warp's max (sum), in the same order at every run.
// Between a lane writing A_ij (its keys j) and every lane reading all of A_i,: for y stands
// __syncwarp(): the other lanes' writes are seen only after it.
//
// The math is step 3's: S_ij = q_i . k_j / sqrt(HS) + log σ(M_ij) for j <= last, A_i,: its
// softmax (0 past last), y_i = sum_j A_ij v_j. The helpers are step 3's (attention.cuh:
// row_index, head_vector, head_mask) and vexp; WARP (32) is layers/launch.cuh's.
// The launch (the check's, version 2's): ceil(B·NH·T / 4) blocks of 128 threads, 4 warps a block;
// warp r = (blockIdx.x·blockDim.x + threadIdx.x) / 32 takes row r, lane = threadIdx.x % 32; a
// warp past the last row does nothing (the whole warp: a row is a warp's).
#pragma once
#include "attention.cuh"    // row_index, head_vector, head_mask (attention/warp.cuh has this step's answer)
#include "cpu_fast/vexp.h"  // vexp(x): e^x

// The max (sum) of x over the warp's 32 lanes, in every lane; every lane calls it
__device__ float warp_max_exercise(float x) {
    // YOUR CODE HERE
    return x;
}

__device__ float warp_sum_exercise(float x) {
    // YOUR CODE HERE
    return x;
}

__global__ void attention_forward_warp_exercise(float* __restrict__ out, float* __restrict__ att,
                                                const float* __restrict__ qkv, const float* __restrict__ mask_term,
                                                AttentionShape s) {
    // out (B,T,NH·HS) written: y; att (B,NH,T,T) written: A; qkv (B,T,3·NH·HS);
    // mask_term (mask_heads,T,T) log σ(M) or nullptr
    // YOUR CODE HERE
}
