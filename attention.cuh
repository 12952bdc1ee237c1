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
// reduces dS over the batch in a fixed order (kernel 1: one thread per mask entry; kernel 3:
// per batch group, then over the groups): no atomics, so runs are bit-reproducible.
//
// The GPU kernels come in versions, each adding one idea, chosen by --attention-kernel:
// 1 below (the row functions as they are), 2 in attention_warp.cuh, 3 in attention_flash.cuh.
// dev/ runs them side by side (README: "Kernels for learners").
//
// Layout of one qkv row (3·NH·HS floats): all heads' q, then all k, then all v; head h's q
// is at [h·HS, (h+1)·HS), its k at NH·HS + h·HS, its v at 2·NH·HS + h·HS. The output row
// (NH·HS) is the heads' y side by side.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>
#include "layers/common.cuh"   // Device, ceil_div, cudaCheck
#include "layers/gemm_cpu.h"   // gemm_accumulate_serial, StridedMatrix: the CPU fast path
#include "layers/vexp.h"       // vexp: e^x the CPU vectorises

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

// The multiply-adds of one product of the forward (Q K^T or A V): what decides whether the CPU
// loops are worth more than one thread (worth_threads)
inline size_t attention_work(AttentionShape s) { return (size_t)s.B * s.NH * s.T * s.T * s.HS; }

// The (T,T) mask that head h of a layer uses (nullptr when there is no mask).
template <typename F>
__host__ __device__ inline const F* head_mask(const F* mask, AttentionShape s, int h) {
    if (s.mask_heads == 0) return nullptr;
    return mask + (s.mask_heads == 1 ? 0 : (size_t)h * s.T * s.T);
}

// ----------------------------------------------------------------------------
// forward: first the mask term log σ(M), once per call: it is the same for every batch row
// (and, for a shared mask, every head), so computing it inside each score would repeat each
// log and exp B·NH times. Then one query row at a time: scores, softmax and the weighted sum
// of values. The row function is shared by the CPU reference loop and kernel1, so both devices
// compute the same thing; the CPU fast path below shares its softmax.

template <typename F>
void mask_term_cpu(F* mask_term, const F* mask, int count) {
    // mask_term, mask: (mask_heads,T,T), count = mask_heads·T·T
    for (int m = 0; m < count; m++) mask_term[m] = log_sigmoid(mask[m]);
}

__global__ void mask_term_kernel1(float* mask_term, const float* mask, int count) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per mask entry
    if (m < count) mask_term[m] = log_sigmoid(mask[m]);
}

// Where head h's q, k and v of token t of batch row b sit in qkv (B,T,3·NH·HS)
template <typename F>
__host__ __device__ inline const F* head_vector(const F* qkv, AttentionShape s, int part, int b, int t, int h) {
    // part 0: q, 1: k, 2: v
    return qkv + ((size_t)b * s.T + t) * 3 * s.NH * s.HS + part * s.NH * s.HS + h * s.HS;
}

// The scores of one query row, S_ij for j <= last, into att_row: the plain loop (one dot
// product per key, summed along d in order).
template <typename F>
__host__ __device__ inline void attention_row_scores(F* att_row, const F* qkv, const F* mask_row, AttentionShape s,
                                                     int b, int h, int i, int last) {
    const F scale = F(1) / sqrt(F(s.HS));
    const F* q = head_vector(qkv, s, 0, b, i, h);
    for (int j = 0; j <= last; j++) {
        const F* k = head_vector(qkv, s, 1, b, j, h);
        F dot = 0;
        for (int d = 0; d < s.HS; d++) dot += q[d] * k[d];
        att_row[j] = dot * scale + (mask_row ? mask_row[j] : F(0));
    }
}

// The softmax of a row whose scores are in att_row[0..last]: A_ij, 0 beyond last.
template <typename F>
__host__ __device__ inline void attention_row_softmax(F* att_row, int T, int last) {
    F smax = -INFINITY;
    for (int j = 0; j <= last; j++) smax = att_row[j] > smax ? att_row[j] : smax;
    for (int j = 0; j <= last; j++) att_row[j] = vexp(att_row[j] - smax);
    F sum = 0;
    for (int j = 0; j <= last; j++) sum += att_row[j];
    for (int j = 0; j < T; j++) att_row[j] = j <= last ? att_row[j] / sum : F(0);
}

// y_i = sum_j A_ij v_j over j <= last, each y_i[d] summed along j in order.
template <typename F>
__host__ __device__ inline void attention_row_values(F* y, const F* att_row, const F* qkv, AttentionShape s, int b,
                                                     int h, int last) {
    for (int d = 0; d < s.HS; d++) y[d] = 0;
    for (int j = 0; j <= last; j++) {
        const F* v = head_vector(qkv, s, 2, b, j, h);
        for (int d = 0; d < s.HS; d++) y[d] += att_row[j] * v[d];
    }
}

template <typename F>
__host__ __device__ inline void attention_row_forward(F* y, F* att_row, const F* qkv, const F* mask_term,
                                                      AttentionShape s, int b, int h, int i) {
    // y (HS) this head's output for query i; att_row (T) A_i,:; qkv (B,T,3·NH·HS);
    // mask_term log σ(M), shaped like the mask (nullptr without one)
    const F* mask_row = s.mask_heads ? head_mask(mask_term, s, h) + (size_t)i * s.T : nullptr;  // log σ(M_i,:)
    const int last = s.causal ? i : s.T - 1;  // the last key this query may see
    attention_row_scores(att_row, qkv, mask_row, s, b, h, i, last);
    attention_row_softmax(att_row, s.T, last);
    attention_row_values(y, att_row, qkv, s, b, h, last);
}

// The CPU reference: the row function for every (b, h, i).
template <typename F>
void attention_forward_cpu_reference(F* out, F* att, const F* qkv, const F* mask, F* mask_term, AttentionShape s) {
    // out (B,T,NH·HS), att (B,NH,T,T), qkv (B,T,3·NH·HS), mask (T,T) or (NH,T,T) or nullptr,
    // mask_term like mask: room for log σ(M)
    if (s.mask_heads) mask_term_cpu(mask_term, mask, s.mask_heads * s.T * s.T);
    #pragma omp parallel for collapse(2) if (worth_threads(attention_work(s)))
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++)
            for (int i = 0; i < s.T; i++)
                attention_row_forward(out + ((size_t)b * s.T + i) * s.NH * s.HS + h * s.HS,
                                      att + (((size_t)b * s.NH + h) * s.T + i) * s.T, qkv, mask_term, s, b, h, i);
}

// The CPU fast path: attention as small matrix products, per batch row b and head h,
//   S = Q K^T (T,T)    then per row: S·scale + log σ(M), the softmax (the row function's own)
//   Y = A V   (T,HS)
// each through gemm_accumulate_serial (layers/gemm_cpu.h), which sums every output in the
// reference's order: S_ij along d from 0, y_i along j from 0. Y also runs over the keys a
// causal row cannot see, whose A_ij is 0: adding A_ij v_j = ±0 to a sum that started at +0
// leaves its bits as they are. So the fast path gives the reference's bits
// (tests/test_fast_paths.cu), with GEMM_MR rows (4 or 8) at a time in registers instead of one.

// Views of one (b, h) block of qkv (B,T,3·NH·HS) as matrices (StridedMatrix: element (r,c) at
// r·row_stride + c·col_stride): part 0, 1, 2 = q, k, v as (T, HS), or transposed (HS, T).
template <typename F>
StridedMatrix<F> head_matrix(const F* qkv, AttentionShape s, int part, int b, int h, bool transposed = false) {
    const size_t token_stride = (size_t)3 * s.NH * s.HS;
    const F* first = head_vector(qkv, s, part, b, 0, h);
    return transposed ? StridedMatrix<F>{first, 1, token_stride} : StridedMatrix<F>{first, token_stride, 1};
}

template <typename F>
void attention_forward_cpu(F* out, F* att, const F* qkv, const F* mask, F* mask_term, AttentionShape s) {
    // shapes as in attention_forward_cpu_reference
    const int T = s.T, HS = s.HS, OUT_ROW = s.NH * s.HS;
    const F scale = F(1) / sqrt(F(HS));
    if (s.mask_heads) mask_term_cpu(mask_term, mask, s.mask_heads * T * T);
    #pragma omp parallel if (worth_threads(attention_work(s)))
    {
        std::vector<F> panels;  // this thread's packing room for gemm
        #pragma omp for collapse(2)
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++) {
                F* att_bh = att + ((size_t)b * s.NH + h) * T * T;   // (T,T)
                F* y_bh = out + (size_t)b * T * OUT_ROW + h * HS;  // (T,HS), row stride NH·HS
                std::fill(att_bh, att_bh + (size_t)T * T, F(0));
                gemm_accumulate_serial<F>(att_bh, T, head_matrix(qkv, s, 0, b, h), head_matrix(qkv, s, 1, b, h, true),
                                          T, T, HS, panels);
                for (int i = 0; i < T; i++) {
                    F* att_row = att_bh + (size_t)i * T;
                    const F* mask_row = s.mask_heads ? head_mask(mask_term, s, h) + (size_t)i * T : nullptr;
                    const int last = s.causal ? i : T - 1;
                    for (int j = 0; j <= last; j++) att_row[j] = att_row[j] * scale + (mask_row ? mask_row[j] : F(0));
                    attention_row_softmax(att_row, T, last);
                    std::fill(y_bh + (size_t)i * OUT_ROW, y_bh + (size_t)i * OUT_ROW + HS, F(0));
                }
                gemm_accumulate_serial<F>(y_bh, OUT_ROW, {att_bh, (size_t)T, 1}, head_matrix(qkv, s, 2, b, h), T, HS, T,
                                          panels);
            }
    }
}

// the (b, h, i) of the row (or key column) numbered `row` of the (B, NH, T) grid: the kernels'
// thread (kernel 1) or warp (kernel 2) index, which is also the row's place in att and dscores
struct RowIndex { int b, h, i; };
__device__ inline RowIndex row_index(int row, AttentionShape s) {
    return {row / (s.T * s.NH), (row / s.T) % s.NH, row % s.T};
}

__global__ void attention_forward_kernel1(float* out, float* att, const float* qkv, const float* mask_term,
                                          AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per (b, h, i)
    if (idx >= s.B * s.NH * s.T) return;
    const RowIndex r = row_index(idx, s);
    attention_row_forward(out + ((size_t)r.b * s.T + r.i) * s.NH * s.HS + r.h * s.HS,
                          att + (size_t)idx * s.T, qkv, mask_term, s, r.b, r.h, r.i);
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

// Step 1 once dA_i,: is in dscores_row: dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik), in place (zero
// where A is zero: causal).
template <typename F>
__host__ __device__ inline void attention_row_softmax_backward(F* dscores_row, const F* att_row, int T) {
    F weighted = 0;
    for (int j = 0; j < T; j++) weighted += att_row[j] * dscores_row[j];
    for (int j = 0; j < T; j++) dscores_row[j] = att_row[j] * (dscores_row[j] - weighted);
}

// The end of step 1: dq_i += sum_j dS_ij k_j / sqrt(HS)
template <typename F>
__host__ __device__ inline void attention_row_dquery(F* dqkv, const F* dscores_row, const F* qkv, AttentionShape s,
                                                     int b, int h, int i) {
    const F scale = F(1) / sqrt(F(s.HS));
    F* dq = dqkv + (head_vector(qkv, s, 0, b, i, h) - qkv);
    for (int j = 0; j < s.T; j++) {
        const F* k = head_vector(qkv, s, 1, b, j, h);
        const F ds = dscores_row[j] * scale;
        for (int d = 0; d < s.HS; d++) dq[d] += ds * k[d];
    }
}

template <typename F>
__host__ __device__ inline void attention_row_backward(F* dqkv, F* dscores_row, const F* dout, const F* qkv,
                                                       const F* att_row, AttentionShape s, int b, int h, int i) {
    if (dout) {
        // dA_ij = dy_i . v_j, held in dscores_row until the softmax's backward turns it into dS
        const F* dy = dout + ((size_t)b * s.T + i) * s.NH * s.HS + h * s.HS;
        for (int j = 0; j < s.T; j++) {
            const F* v = head_vector(qkv, s, 2, b, j, h);
            F da = 0;
            for (int d = 0; d < s.HS; d++) da += dy[d] * v[d];
            dscores_row[j] = da;
        }
        attention_row_softmax_backward(dscores_row, att_row, s.T);
    }
    attention_row_dquery(dqkv, dscores_row, qkv, s, b, h, i);
}
template <typename F>
__host__ __device__ inline void attention_column_backward(F* dqkv, const F* dscores, const F* dout, const F* qkv,
                                                          const F* att, AttentionShape s, int b, int h, int j) {
    const int T = s.T, HS = s.HS;
    const F scale = F(1) / sqrt(F(HS));
    const F* att_bh = att + ((size_t)b * s.NH + h) * T * T;      // (T,T)
    const F* ds_bh = dscores + ((size_t)b * s.NH + h) * T * T;  // (T,T)
    F* dk = dqkv + (head_vector(qkv, s, 1, b, j, h) - qkv);
    F* dv = dqkv + (head_vector(qkv, s, 2, b, j, h) - qkv);
    for (int i = 0; i < T; i++) {
        const F* q = head_vector(qkv, s, 0, b, i, h);
        const F ds = ds_bh[i * T + j] * scale;
        for (int d = 0; d < HS; d++) dk[d] += ds * q[d];
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

// The CPU reference: the row, column and mask-entry functions, as the GPU runs them.
template <typename F>
void attention_backward_cpu_reference(F* dqkv, F* dmask, F* dscores, const F* dout, const F* qkv, const F* att,
                                      const F* mask, AttentionShape s) {
    // dqkv (B,T,3·NH·HS), dmask like mask, dscores (B,NH,T,T) dS (written here), dout (B,T,NH·HS),
    // qkv (B,T,3·NH·HS), att (B,NH,T,T)
    const int T = s.T;
    #pragma omp parallel for collapse(2) if (worth_threads(attention_work(s)))
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++) {
            for (int i = 0; i < T; i++) {
                size_t r = (((size_t)b * s.NH + h) * T + i) * T;
                attention_row_backward(dqkv, dscores + r, dout, qkv, att + r, s, b, h, i);
            }
            for (int j = 0; j < T; j++) attention_column_backward(dqkv, dscores, dout, qkv, att, s, b, h, j);
        }
    if (s.mask_heads == 0) return;
    #pragma omp parallel for if (worth_threads((size_t)s.B * s.NH * T * T))
    for (int m = 0; m < s.mask_heads * T * T; m++) attention_mask_entry_backward(dmask, dscores, mask, s, m);
}

// The CPU fast path, bit for bit the reference, as matrix products per (b, h) like the forward:
//   dA = dY V^T (T,T), then per row the softmax's backward: dS
//   dQ += (dS·scale) K,   dK += (dS·scale)^T Q,   dV += A^T dY
// each output summed in the reference's order (j for dq, i for dk and dv).
template <typename F>
void attention_backward_cpu(F* dqkv, F* dmask, F* dscores, const F* dout, const F* qkv, const F* att,
                            const F* mask, AttentionShape s) {
    // shapes as in attention_backward_cpu_reference
    const int T = s.T, HS = s.HS, ROW = 3 * s.NH * s.HS, OUT_ROW = s.NH * s.HS;
    const F scale = F(1) / sqrt(F(HS));
    #pragma omp parallel if (worth_threads(attention_work(s)))
    {
        std::vector<F> panels, ds_scaled((size_t)T * T);  // this thread's gemm room, and dS·scale (T,T)
        #pragma omp for collapse(2)
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++) {
                const size_t block = ((size_t)b * s.NH + h) * T * T;
                F* ds_bh = dscores + block;  // (T,T)
                const F* att_bh = att + block;
                const F* dy_first = dout ? dout + (size_t)b * T * OUT_ROW + h * HS : nullptr;
                const StridedMatrix<F> dy_bh = {dy_first, (size_t)OUT_ROW, 1};  // (T,HS)
                if (dout) {
                    std::fill(ds_bh, ds_bh + (size_t)T * T, F(0));
                    gemm_accumulate_serial<F>(ds_bh, T, dy_bh, head_matrix(qkv, s, 2, b, h, true), T, T, HS, panels);
                    for (int i = 0; i < T; i++)
                        attention_row_softmax_backward(ds_bh + (size_t)i * T, att_bh + (size_t)i * T, T);
                }
                for (size_t e = 0; e < (size_t)T * T; e++) ds_scaled[e] = ds_bh[e] * scale;
                // where the gradients of head h's q, k and v of batch row b sit in dqkv
                F* dq_bh = dqkv + (head_vector(qkv, s, 0, b, 0, h) - qkv);
                F* dk_bh = dqkv + (head_vector(qkv, s, 1, b, 0, h) - qkv);
                F* dv_bh = dqkv + (head_vector(qkv, s, 2, b, 0, h) - qkv);
                gemm_accumulate_serial<F>(dq_bh, ROW, {ds_scaled.data(), (size_t)T, 1}, head_matrix(qkv, s, 1, b, h), T,
                                          HS, T, panels);
                gemm_accumulate_serial<F>(dk_bh, ROW, {ds_scaled.data(), 1, (size_t)T}, head_matrix(qkv, s, 0, b, h), T,
                                          HS, T, panels);
                if (dout) gemm_accumulate_serial<F>(dv_bh, ROW, {att_bh, 1, (size_t)T}, dy_bh, T, HS, T, panels);
            }
    }
    if (s.mask_heads == 0) return;
    #pragma omp parallel for if (worth_threads((size_t)s.B * s.NH * T * T))
    for (int m = 0; m < s.mask_heads * T * T; m++) attention_mask_entry_backward(dmask, dscores, mask, s, m);
}

__global__ void attention_backward_rows_kernel1(float* dqkv, float* dscores, const float* dout, const float* qkv,
                                                const float* att, AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per (b, h, i)
    if (idx >= s.B * s.NH * s.T) return;
    const RowIndex r = row_index(idx, s);
    attention_row_backward(dqkv, dscores + (size_t)idx * s.T, dout, qkv, att + (size_t)idx * s.T, s, r.b, r.h, r.i);
}

__global__ void attention_backward_columns_kernel1(float* dqkv, const float* dscores, const float* dout,
                                                   const float* qkv, const float* att, AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per (b, h, j)
    if (idx >= s.B * s.NH * s.T) return;
    const RowIndex c = row_index(idx, s);  // c.i is the key j
    attention_column_backward(dqkv, dscores, dout, qkv, att, s, c.b, c.h, c.i);
}

__global__ void attention_backward_mask_kernel1(float* dmask, const float* dscores, const float* mask,
                                                AttentionShape s) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per mask entry
    if (m < s.mask_heads * s.T * s.T) attention_mask_entry_backward(dmask, dscores, mask, s, m);
}

// ----------------------------------------------------------------------------
// the faster kernel versions, each in its own file and each adding one idea; dev/ checks and
// times them side by side (README: "Kernels for learners")
#include "attention_warp.cuh"   // version 2: one warp per row, warp shuffles for the softmax
#include "attention_flash.cuh"  // version 3: shared-memory tiles, online softmax; dM in a fixed order

struct AttentionKernel {
    int version;
    const char* idea;
};
inline const AttentionKernel ATTENTION_KERNELS[] = {
    {1, "a thread per row, column, mask entry: the CPU's loops"},
    {2, "a warp per row: lanes over keys, shuffles for max, sum"},
    {3, "shared k/v tiles, online softmax; dM in batch groups"},
};
constexpr int ATTENTION_KERNEL_COUNT = 3;
constexpr int ATTENTION_KERNEL_DEFAULT = 1;  // the fastest version verified on a GPU so far (README: GPU)

// The version the GPU launchers run (--attention-kernel); the CPU paths are the same at every version.
inline int& attention_kernel_version() {
    static int version = ATTENTION_KERNEL_DEFAULT;
    return version;
}

// Whether version v exists and can run heads of HS dims (version 3 keeps HS/32 dims a lane)
inline bool attention_kernel_runs(int version, int HS) {
    return version >= 1 && version <= ATTENTION_KERNEL_COUNT && !(version == 3 && HS > FLASH_MAX_HS);
}

// Why version v cannot run heads of HS dims, or "" when it can
inline std::string attention_kernel_refusal(int version, int HS) {
    if (attention_kernel_runs(version, HS)) return "";
    if (version < 1 || version > ATTENTION_KERNEL_COUNT)
        return "attention kernel " + std::to_string(version) + " does not exist (1 to " +
               std::to_string(ATTENTION_KERNEL_COUNT) + ")";
    return "attention kernel 3 holds at most " + std::to_string(FLASH_MAX_HS) + " dims a head (--head-size " +
           std::to_string(HS) + ")";
}

// The one-line refusal of --attention-kernel when the chosen version cannot run heads of HS dims
inline void attention_kernel_check(int HS) {
    const std::string refusal = attention_kernel_refusal(attention_kernel_version(), HS);
    if (!refusal.empty()) fail("--attention-kernel: %s", refusal.c_str());
}

// mask_term: (mask_heads,T,T) on dev, room for log σ(M); unused (may be nullptr) without a mask
inline void attention_forward(Device dev, float* out, float* att, const float* qkv, const float* mask,
                              float* mask_term, AttentionShape s) {
    if (dev == DEVICE_CPU)
        return CPU_REFERENCE ? attention_forward_cpu_reference(out, att, qkv, mask, mask_term, s)
                             : attention_forward_cpu(out, att, qkv, mask, mask_term, s);
    const int version = attention_kernel_version();
    if (!attention_kernel_runs(version, s.HS))  // setup refused it already; a caller that skipped setup
        throw std::logic_error("attention_forward: " + attention_kernel_refusal(version, s.HS));
    if (s.mask_heads) {
        int count = s.mask_heads * s.T * s.T;
        launch_kernel<mask_term_kernel1>(ceil_div(count, 128), 128, 0, mask_term, mask, count);
    }
    if (version == 1)
        launch_kernel<attention_forward_kernel1>(ceil_div((size_t)s.B * s.NH * s.T, 128), 128, 0, out, att, qkv,
                                                 mask_term, s);
    else if (version == 2) attention_forward_gpu2(out, att, qkv, mask_term, s);
    else attention_forward_gpu3(out, att, qkv, mask_term, s);
}

inline void attention_backward(Device dev, float* dqkv, float* dmask, float* dscores, const float* dout,
                               const float* qkv, const float* att, const float* mask, AttentionShape s) {
    if (dev == DEVICE_CPU)
        return CPU_REFERENCE ? attention_backward_cpu_reference(dqkv, dmask, dscores, dout, qkv, att, mask, s)
                             : attention_backward_cpu(dqkv, dmask, dscores, dout, qkv, att, mask, s);
    const int version = attention_kernel_version(), rows = s.B * s.NH * s.T;
    if (version == 3) return attention_backward_gpu3(dqkv, dmask, dscores, dout, qkv, att, mask, s);
    if (version == 1) {
        launch_kernel<attention_backward_rows_kernel1>(ceil_div(rows, 128), 128, 0, dqkv, dscores, dout, qkv, att, s);
        launch_kernel<attention_backward_columns_kernel1>(ceil_div(rows, 128), 128, 0, dqkv, dscores, dout, qkv, att,
                                                          s);
    } else {
        attention_backward_gpu2(dqkv, dscores, dout, qkv, att, s);
    }
    if (s.mask_heads == 0) return;
    launch_kernel<attention_backward_mask_kernel1>(ceil_div((size_t)s.mask_heads * s.T * s.T, 128), 128, 0, dmask,
                                                   dscores, mask, s);
}
