// attention.cuh: multi-head attention with a learnable additive mask, forward and backward.
// This file is the method; docs/method.md derives it and says why the mask's prior persists.
//
// Per batch row b and head h, with q, k, v the head's slices of the qkv projection:
//   S_ij = q_i . k_j / sqrt(HS) + log σ(M_ij)            (T, T)  the mask term
//   A_ij = softmax_j(S_ij)      (causal: j > i is -inf before the softmax, so A_ij = 0)
//   y_i  = sum_j A_ij v_j                                 (HS)
// M is (T, T) shared by the heads, or (NH, T, T) one per head, or absent (no mask term).
// log σ(m) = min(m, 0) - log1p(exp(-|m|)) is stable for any m and always <= 0: the mask can
// only down-weight a key. Its derivative is σ(-m).
//
// Backward, quoting the forward lines:
//   y_i = sum_j A_ij v_j        ->  dA_ij = dy_i . v_j ;  dv_j += sum_i A_ij dy_i
//   A = softmax(S)              ->  dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik)
//   S_ij = q_i.k_j/sqrt(HS)     ->  dq_i += sum_j dS_ij k_j / sqrt(HS) ; dk_j += sum_i dS_ij q_i / sqrt(HS)
//   S_ij += log σ(M_ij)         ->  dM_ij += sum_b (sum_h when shared) dS_ij σ(-M_ij)
// dS, the gradient of the scores, is one (B, NH, T, T) buffer named dscores wherever it
// appears (dA is never stored: step 1 below turns dy into dS directly). The mask gradient
// reduces dS over the batch in a fixed order, one thread per mask entry: no atomics, so runs
// are bit-reproducible.
//
// Layout of one qkv row (3·NH·HS floats): all heads' q, then all k, then all v; head h's q
// is at [h·HS, (h+1)·HS), its k at NH·HS + h·HS, its v at 2·NH·HS + h·HS. The output row
// (NH·HS) is the heads' y side by side.
#pragma once
#include "layers/common.cuh"  // Device, ceil_div, cudaCheck

struct AttentionShape {
    int B, T, NH, HS;
    int mask_heads;  // 0: no mask, 1: one (T,T) mask shared by all heads, NH: one per head
    bool causal;
};

template <typename F>
__host__ __device__ inline F log_sigmoid(F m) {
    return (m < F(0) ? m : F(0)) - log1p(exp(-fabs(m)));
}

template <typename F>
__host__ __device__ inline F sigmoid_of_minus(F m) {  // σ(-m), the slope of log σ at m
    return F(1) / (F(1) + exp(m));
}

// The (T,T) mask that head h of a layer uses (nullptr when there is no mask).
template <typename F>
__host__ __device__ inline const F* head_mask(const F* mask, AttentionShape s, int h) {
    if (s.mask_heads == 0) return nullptr;
    return mask + (s.mask_heads == 1 ? 0 : (size_t)h * s.T * s.T);
}

// ----------------------------------------------------------------------------
// forward, one query row: scores, softmax and the weighted sum of values.
// Shared by the CPU loop and kernel1, so both devices compute the same thing.

template <typename F>
__host__ __device__ inline void attention_row_forward(F* y, F* att_row, const F* qkv, const F* mask,
                                                      AttentionShape s, int b, int h, int i) {
    // y (HS) this head's output for query i; att_row (T) A_i,:; qkv (B,T,3·NH·HS); mask as above
    const int T = s.T, HS = s.HS, row = 3 * s.NH * s.HS;
    const F scale = F(1) / sqrt(F(HS));
    const F* q = qkv + ((size_t)b * T + i) * row + h * HS;
    const F* M = head_mask(mask, s, h);
    const int last = s.causal ? i : T - 1;  // the last key this query may see
    F smax = -INFINITY;
    for (int j = 0; j <= last; j++) {
        const F* k = qkv + ((size_t)b * T + j) * row + s.NH * HS + h * HS;
        F dot = 0;
        for (int d = 0; d < HS; d++) dot += q[d] * k[d];
        F score = dot * scale + (M ? log_sigmoid(M[i * T + j]) : F(0));
        att_row[j] = score;
        smax = score > smax ? score : smax;
    }
    F sum = 0;
    for (int j = 0; j <= last; j++) { att_row[j] = exp(att_row[j] - smax); sum += att_row[j]; }
    for (int j = 0; j < T; j++) att_row[j] = j <= last ? att_row[j] / sum : F(0);
    for (int d = 0; d < HS; d++) y[d] = 0;
    for (int j = 0; j <= last; j++) {
        const F* v = qkv + ((size_t)b * T + j) * row + 2 * s.NH * HS + h * HS;
        for (int d = 0; d < HS; d++) y[d] += att_row[j] * v[d];
    }
}

template <typename F>
void attention_forward_cpu(F* out, F* att, const F* qkv, const F* mask, AttentionShape s) {
    // out (B,T,NH·HS), att (B,NH,T,T), qkv (B,T,3·NH·HS), mask (T,T) or (NH,T,T) or nullptr
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++)
            for (int i = 0; i < s.T; i++)
                attention_row_forward(out + ((size_t)b * s.T + i) * s.NH * s.HS + h * s.HS,
                                      att + (((size_t)b * s.NH + h) * s.T + i) * s.T, qkv, mask, s, b, h, i);
}

__global__ void attention_forward_kernel1(float* out, float* att, const float* qkv, const float* mask,
                                          AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per (b, h, i)
    if (idx >= s.B * s.NH * s.T) return;
    int i = idx % s.T, h = (idx / s.T) % s.NH, b = idx / (s.T * s.NH);
    attention_row_forward(out + ((size_t)b * s.T + i) * s.NH * s.HS + h * s.HS,
                          att + (size_t)idx * s.T, qkv, mask, s, b, h, i);
}

// ----------------------------------------------------------------------------
// backward in three steps, each one thread per row/column/mask entry on the GPU:
//   1. per query row i: dA_i,: from dy_i and v, then dS_i,: (written, not accumulated:
//      dS is scratch), and dq_i
//   2. per key column j: dk_j and dv_j (a column sum over queries, so no two threads collide)
//   3. per mask entry: dM_ij = sum over b (and h when shared) of dS_ij σ(-M_ij)
// With dout = nullptr, dscores comes in already holding dS (a loss placed on the scores
// themselves, as the qk-opt initialisation does): step 1 then only computes dq, and dv is not
// touched.

template <typename F>
__host__ __device__ inline void attention_row_backward(F* dqkv, F* dscores_row, const F* dout, const F* qkv,
                                                       const F* att_row, AttentionShape s, int b, int h, int i) {
    const int T = s.T, HS = s.HS, row = 3 * s.NH * s.HS;
    const F scale = F(1) / sqrt(F(HS));
    if (dout) {
        const F* dy = dout + ((size_t)b * T + i) * s.NH * HS + h * HS;
        // dA_ij = dy_i . v_j, held in dscores_row for now; then sum_k A_ik dA_ik
        F weighted = 0;
        for (int j = 0; j < T; j++) {
            const F* v = qkv + ((size_t)b * T + j) * row + 2 * s.NH * HS + h * HS;
            F da = 0;
            for (int d = 0; d < HS; d++) da += dy[d] * v[d];
            dscores_row[j] = da;
            weighted += att_row[j] * da;
        }
        // dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik): zero where A is zero (causal)
        for (int j = 0; j < T; j++) dscores_row[j] = att_row[j] * (dscores_row[j] - weighted);
    }
    F* dq = dqkv + ((size_t)b * T + i) * row + h * HS;
    for (int j = 0; j < T; j++) {
        const F* k = qkv + ((size_t)b * T + j) * row + s.NH * HS + h * HS;
        for (int d = 0; d < HS; d++) dq[d] += dscores_row[j] * k[d] * scale;
    }
}

template <typename F>
__host__ __device__ inline void attention_column_backward(F* dqkv, const F* dscores, const F* dout, const F* qkv,
                                                          const F* att, AttentionShape s, int b, int h, int j) {
    const int T = s.T, HS = s.HS, row = 3 * s.NH * s.HS;
    const F scale = F(1) / sqrt(F(HS));
    const F* att_bh = att + ((size_t)b * s.NH + h) * T * T;      // (T,T)
    const F* ds_bh = dscores + ((size_t)b * s.NH + h) * T * T;  // (T,T)
    F* dk = dqkv + ((size_t)b * T + j) * row + s.NH * HS + h * HS;
    F* dv = dqkv + ((size_t)b * T + j) * row + 2 * s.NH * HS + h * HS;
    for (int i = 0; i < T; i++) {
        const F* q = qkv + ((size_t)b * T + i) * row + h * HS;
        F ds = ds_bh[i * T + j];
        for (int d = 0; d < HS; d++) dk[d] += ds * q[d] * scale;
        if (!dout) continue;
        const F* dy = dout + ((size_t)b * T + i) * s.NH * HS + h * HS;
        for (int d = 0; d < HS; d++) dv[d] += att_bh[i * T + j] * dy[d];
    }
}

template <typename F>
__host__ __device__ inline void attention_mask_entry_backward(F* dmask, const F* dscores, const F* mask,
                                                              AttentionShape s, int m) {
    // m indexes the mask: (mask_heads, T, T); shared masks sum over heads too
    const int TT = s.T * s.T, ij = m % TT, mh = m / TT;
    const int h_first = s.mask_heads == 1 ? 0 : mh, h_last = s.mask_heads == 1 ? s.NH - 1 : mh;
    F sum = 0;
    for (int b = 0; b < s.B; b++)
        for (int h = h_first; h <= h_last; h++) sum += dscores[((size_t)b * s.NH + h) * TT + ij];
    dmask[m] += sum * sigmoid_of_minus(mask[m]);
}

template <typename F>
void attention_backward_cpu(F* dqkv, F* dmask, F* dscores, const F* dout, const F* qkv, const F* att,
                            const F* mask, AttentionShape s) {
    // dqkv (B,T,3·NH·HS), dmask like mask, dscores (B,NH,T,T) dS (written here), dout (B,T,NH·HS),
    // qkv (B,T,3·NH·HS), att (B,NH,T,T)
    const int T = s.T;
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++) {
            for (int i = 0; i < T; i++) {
                size_t r = (((size_t)b * s.NH + h) * T + i) * T;
                attention_row_backward(dqkv, dscores + r, dout, qkv, att + r, s, b, h, i);
            }
            for (int j = 0; j < T; j++) attention_column_backward(dqkv, dscores, dout, qkv, att, s, b, h, j);
        }
    if (s.mask_heads == 0) return;
    #pragma omp parallel for
    for (int m = 0; m < s.mask_heads * T * T; m++) attention_mask_entry_backward(dmask, dscores, mask, s, m);
}

__global__ void attention_backward_rows_kernel1(float* dqkv, float* dscores, const float* dout, const float* qkv,
                                                const float* att, AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per (b, h, i)
    if (idx >= s.B * s.NH * s.T) return;
    int i = idx % s.T, h = (idx / s.T) % s.NH, b = idx / (s.T * s.NH);
    attention_row_backward(dqkv, dscores + (size_t)idx * s.T, dout, qkv, att + (size_t)idx * s.T, s, b, h, i);
}

__global__ void attention_backward_columns_kernel1(float* dqkv, const float* dscores, const float* dout,
                                                   const float* qkv, const float* att, AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per (b, h, j)
    if (idx >= s.B * s.NH * s.T) return;
    int j = idx % s.T, h = (idx / s.T) % s.NH, b = idx / (s.T * s.NH);
    attention_column_backward(dqkv, dscores, dout, qkv, att, s, b, h, j);
}

__global__ void attention_backward_mask_kernel1(float* dmask, const float* dscores, const float* mask,
                                                AttentionShape s) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per mask entry
    if (m < s.mask_heads * s.T * s.T) attention_mask_entry_backward(dmask, dscores, mask, s, m);
}

inline void attention_forward(Device dev, float* out, float* att, const float* qkv, const float* mask,
                              AttentionShape s) {
    if (dev == DEVICE_CPU) return attention_forward_cpu(out, att, qkv, mask, s);
    launch_kernel<attention_forward_kernel1>(ceil_div((size_t)s.B * s.NH * s.T, 128), 128, 0, out, att, qkv, mask, s);
}

inline void attention_backward(Device dev, float* dqkv, float* dmask, float* dscores, const float* dout,
                               const float* qkv, const float* att, const float* mask, AttentionShape s) {
    if (dev == DEVICE_CPU) return attention_backward_cpu(dqkv, dmask, dscores, dout, qkv, att, mask, s);
    int rows = s.B * s.NH * s.T;
    launch_kernel<attention_backward_rows_kernel1>(ceil_div(rows, 128), 128, 0, dqkv, dscores, dout, qkv, att, s);
    launch_kernel<attention_backward_columns_kernel1>(ceil_div(rows, 128), 128, 0, dqkv, dscores, dout, qkv, att, s);
    if (s.mask_heads == 0) return;
    launch_kernel<attention_backward_mask_kernel1>(ceil_div((size_t)s.mask_heads * s.T * s.T, 128), 128, 0, dmask,
                                                   dscores, mask, s);
}
