// dev/exercises/step4_attention_backward_exercise.cuh: the kernel course, step 4 of 9, blank: the
// attention backward, the mask gradient dM included, as the three kernels below, a thread per query
// row, per key column and per mask entry, as kernel 1 (attention.cuh) runs it
// (dev/exercises/README.md says it in full). Work in a copy, and check it against the CPU on the
// CUDA emulation (no GPU needed):
//   cp dev/exercises/step4_attention_backward_exercise.cuh $HOME/step4.cuh
//   make exercise EXERCISE=$HOME/step4.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// The forward, per batch row b and head h (q, k, v: the head's slices of the token's qkv row):
//   S_ij = q_i . k_j / sqrt(HS) + log σ(M_ij)    (T, T)  the mask term
//   A_ij = softmax_j(S_ij)                       causal: A_ij = 0 for j > i
//   y_i  = sum_j A_ij v_j                        (HS)
// The backward, each line the derivative of a forward line, from dy (the loss's gradient in y):
//   y_i = sum_j A_ij v_j         ->  dA_ij = dy_i . v_j ;   dv_j += sum_i A_ij dy_i
//   A_i,: = softmax(S_i,:)       ->  dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik)
//   S_ij = q_i . k_j / sqrt(HS)  ->  dq_i += sum_j dS_ij k_j / sqrt(HS) ;   dk_j += sum_i dS_ij q_i / sqrt(HS)
//   S_ij += log σ(M_ij)          ->  dM_ij += σ(-M_ij) · sum over b (and over h, when the heads share
//                                            one mask) of dS_bhij
// Every gradient is added (+=) to what its buffer holds; dS is scratch, written (=).
//
// From attention.cuh, which this file includes:
//   AttentionShape s                      B, T, NH, HS; mask_heads: 0 (no mask), 1 (one (T,T) mask that
//                                         every head uses) or NH (one per head); causal
//   head_vector(qkv, s, part, b, t, h)    where head h's q (part 0), k (1) or v (2) of token t of batch
//                                         row b starts in qkv (HS floats); its gradient starts at the
//                                         same offset in dqkv: dqkv + (head_vector(qkv, ...) - qkv)
//   row_index(r, s)                       {b, h, i} of row r of the (B, NH, T) grid, r = (b·NH + h)·T + i
//   sigmoid_of_minus(m)                   σ(-m) = 1 / (1 + e^m), the slope of log σ(m)
// No atomics: a thread adds only into numbers that no other thread adds into (the README says why
// that takes three kernels). The launches (the check's, kernel 1's): ceil(B·NH·T / 128) blocks of 128
// threads for the rows and for the columns, ceil(mask_heads·T·T / 128) for the mask entries.
#pragma once
#include "attention.cuh"  // AttentionShape, head_vector, row_index, sigmoid_of_minus (and kernel 1: the answer)

// The rows pass: a thread per query row, r = blockIdx.x·blockDim.x + threadIdx.x over the B·NH·T
// rows (a thread past the last row does nothing), (b, h, i) = row_index(r, s). It writes dS_i,:,
// all T entries (0 where A is 0), and adds dq_i. dout is never nullptr here (in the model it can
// be, when dscores holds dS already: attention.cuh's kernel 1 takes that case too).
__global__ void attention_backward_rows_exercise(float* __restrict__ dqkv, float* __restrict__ dscores,
                                                 const float* __restrict__ dout, const float* __restrict__ qkv,
                                                 const float* __restrict__ att, AttentionShape s) {
    // dqkv (B,T,3·NH·HS) dq added; dscores (B,NH,T,T) row r written: dS_i,: of (b, h);
    // dout (B,T,NH·HS) dy, head h's dy_i at (b·T + i)·NH·HS + h·HS; qkv (B,T,3·NH·HS);
    // att (B,NH,T,T) A, row r: A_i,: of (b, h)
    // YOUR CODE HERE
}

// The columns pass, after the rows pass: a thread per key column, c over the B·NH·T columns,
// (b, h, j) = row_index(c, s). It adds dk_j and dv_j, summing over the queries i the dS that the
// rows pass wrote and A.
__global__ void attention_backward_columns_exercise(float* __restrict__ dqkv, const float* __restrict__ dscores,
                                                    const float* __restrict__ dout, const float* __restrict__ qkv,
                                                    const float* __restrict__ att, AttentionShape s) {
    // dqkv (B,T,3·NH·HS) dk, dv added; dscores (B,NH,T,T) dS, column j of (b, h): entries (i·T + j);
    // dout (B,T,NH·HS) dy; qkv (B,T,3·NH·HS); att (B,NH,T,T) A
    // YOUR CODE HERE
}

// The mask pass, after the rows pass (launched only when there is a mask): a thread per mask entry,
// m = (g·T + i)·T + j over the mask_heads·T·T entries, g the mask's head. It adds
// dM_m = σ(-M_m) · the sum of dS_bhij over every batch row b and every head h that uses entry m
// (all NH heads when mask_heads is 1; head g alone when there is one mask per head).
__global__ void attention_backward_mask_exercise(float* __restrict__ dmask, const float* __restrict__ dscores,
                                                 const float* __restrict__ mask, AttentionShape s) {
    // dmask (mask_heads,T,T) dM added; dscores (B,NH,T,T) dS; mask (mask_heads,T,T) M
    // YOUR CODE HERE
}
