// dev/exercises/step3_attention_forward_exercise.cuh: the kernel course, step 3 of 9, blank: the
// attention forward as kernel 1 runs it, a thread per query row (dev/exercises/README.md says it in
// full). Work in a copy, and check it on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step3_attention_forward_exercise.cuh $HOME/step3.cuh
//   make exercise EXERCISE=$HOME/step3.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// Per batch row b and head h, with q, k, v the head's slices of each token's qkv row:
//   S_ij = q_i . k_j / sqrt(HS) + log σ(M_ij)       j <= last (last = i when causal, else T-1)
//   A_i,: = softmax(S_i,:)                           step 2; A_ij = 0 for j > last
//   y_i  = sum_{j <= last} A_ij v_j                  (HS)
// log σ(M) is already computed (step 1): mask_term, shaped like the mask, nullptr without one.
// One thread takes one query row (b, h, i): it writes A's row i of head (b, h), all T entries, and
// y_i of head h, HS floats. To get the CPU's very bits, sum each dot product along d in order, each
// y_i[d] along j in order, and take e^x from vexp (the CPU loops do; other orders are right too,
// within the check's tolerance).
//
// From attention.cuh, which this file includes:
//   AttentionShape s                    B, T, NH, HS; mask_heads 0 (no mask), 1 (one (T,T) mask the
//                                       heads share) or NH (one per head); causal
//   row_index(r, s)                     {b, h, i} of row r of the (B, NH, T) grid, r = (b·NH + h)·T + i
//   head_vector(qkv, s, part, b, t, h)  where head h's q (part 0), k (1) or v (2) of token t of batch
//                                       row b starts in qkv: HS floats
//   head_mask(mask_term, s, h)          the (T,T) log σ(M) that head h uses (nullptr without a mask)
//   attention_row_softmax(row, T, last) step 2's answer; yours from step 2 is as good
// The launch (the check's, kernel 1's): ceil(B·NH·T / 128) blocks of 128 threads; thread
// r = blockIdx.x·blockDim.x + threadIdx.x takes row r; threads past the last row do nothing.
#pragma once
#include "attention.cuh"    // the project's attention (attention_forward_kernel1 there is this step's answer)
#include "cpu_fast/vexp.h"  // vexp(x): e^x

__global__ void attention_forward_exercise(float* __restrict__ out, float* __restrict__ att,
                                           const float* __restrict__ qkv, const float* __restrict__ mask_term,
                                           AttentionShape s) {
    // out (B,T,NH·HS) written: y, head h of token i of batch row b at (b·T + i)·NH·HS + h·HS;
    // att (B,NH,T,T) written: A, row r at r·T; qkv (B,T,3·NH·HS); mask_term (mask_heads,T,T) or nullptr
    // YOUR CODE HERE
}
