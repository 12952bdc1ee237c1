// cpu_fast/attention.h: the CPU's attention, bit for bit attention.cuh's loops, as small matrix
// products per batch row b and head h:
//   S = Q K^T (T,T)    then per row: S·scale + log σ(M), the softmax (softmax_rows, below)
//   Y = A V   (T,HS)
// and in the backward
//   dA = dY V^T (T,T), then per row the softmax's backward: dS
//   dQ += (dS·scale) K,   dK += (dS·scale)^T Q,   dV += A^T dY
// each through gemm_accumulate_serial (cpu_fast/gemm.h), which sums every output in the loops'
// order: S_ij along d from 0, y_i along j from 0, dq along j, dk and dv along i. Y also runs over
// the keys a causal row cannot see, whose A_ij is 0: adding A_ij v_j = ±0 to a sum that started at
// +0 leaves its bits as they are. So these give the loops' bits (tests/test_fast_paths.cu), with
// GEMM_SMALL_MR rows (4 or 8) at a time in registers instead of one. dM is the loops' own.
#pragma once
#include <algorithm>
#include <vector>
#include "attention.cuh"    // AttentionShape, head_vector, vexp, dM
#include "cpu_fast/gemm.h"  // gemm_accumulate_serial, StridedMatrix, VECTOR_BYTES

// The row softmax and its backward (attention.cuh: attention_row_softmax and
// attention_row_softmax_backward) over SOFTMAX_ROWS rows of a (b, h) block at once, with their
// bits, without their waits. The row functions run their max and their sum each as one chain
// along the row, every step waiting for the one before (a max's or an add's latency, about 4
// cycles, where the core could start two a cycle): at T 50 (the ViT) the two chains took about a
// third of the attention forward's own time.
// - A row's max runs in LANES partial maxima side by side (vector code), then combines them. A max
//   is the same number in any order: x > m ? x : m never takes a NaN, and where it keeps -0 for
//   +0 or back, x - max and so e^(x - max) are the same bits either way (e^±0 = 1).
// - A sum's order is its bits, so each row's sum stays one chain along j from 0; what changes is
//   that SOFTMAX_ROWS rows' chains run side by side, so the core always has a step to start.
constexpr int SOFTMAX_ROWS = 8;

template <typename F>
F row_max(const F* row, int n) {  // row (n): the max of its non-NaN entries, -inf if none
    constexpr int LANES = VECTOR_BYTES / sizeof(F);
    F part[LANES];
    for (int l = 0; l < LANES; l++) part[l] = -INFINITY;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) part[l] = row[j + l] > part[l] ? row[j + l] : part[l];
    for (; j < n; j++) part[0] = row[j] > part[0] ? row[j] : part[0];
    F m = part[0];
    for (int l = 1; l < LANES; l++) m = part[l] > m ? part[l] : m;
    return m;
}

// A_i,: = softmax(S_i,:) in place for rows i0 .. i0+rows of att (T,T), rows <= SOFTMAX_ROWS;
// a causal row i over keys j <= i, its other entries 0
template <typename F>
void softmax_rows(F* att, int T, int i0, int rows, bool causal) {
    F sums[SOFTMAX_ROWS] = {};
    int lasts[SOFTMAX_ROWS];
    for (int r = 0; r < rows; r++) {
        F* row = att + (size_t)(i0 + r) * T;
        lasts[r] = causal ? i0 + r : T - 1;
        const F smax = row_max(row, lasts[r] + 1);
        for (int j = 0; j <= lasts[r]; j++) row[j] = vexp(row[j] - smax);
    }
    for (int j = 0; j < T; j++)  // the rows' chains side by side, each along j
        for (int r = 0; r < rows; r++)
            if (j <= lasts[r]) sums[r] += att[(size_t)(i0 + r) * T + j];
    for (int r = 0; r < rows; r++) {
        F* row = att + (size_t)(i0 + r) * T;
        for (int j = 0; j < T; j++) row[j] = j <= lasts[r] ? row[j] / sums[r] : F(0);
    }
}

// dS_i,: = A_i,: (dA_i,: - sum_j A_ij dA_ij), in place in ds (T,T) for rows i0 .. i0+rows
template <typename F>
void softmax_backward_rows(F* ds, const F* att, int T, int i0, int rows) {
    F weighted[SOFTMAX_ROWS] = {};
    for (int j = 0; j < T; j++)  // the rows' chains side by side, each along j
        for (int r = 0; r < rows; r++) {
            const size_t e = (size_t)(i0 + r) * T + j;
            weighted[r] += att[e] * ds[e];
        }
    for (int r = 0; r < rows; r++) {
        const size_t row = (size_t)(i0 + r) * T;
        for (int j = 0; j < T; j++) ds[row + j] = att[row + j] * (ds[row + j] - weighted[r]);
    }
}

// Views of one (b, h) block of qkv (B,T,3·NH·HS) as matrices (StridedMatrix: element (r,c) at
// r·row_stride + c·col_stride): part 0, 1, 2 = q, k, v as (T, HS), or transposed (HS, T).
template <typename F>
StridedMatrix<F> head_matrix(const F* qkv, AttentionShape s, int part, int b, int h, bool transposed = false) {
    const size_t token_stride = (size_t)3 * s.NH * s.HS;
    const F* first = head_vector(qkv, s, part, b, 0, h);
    return transposed ? StridedMatrix<F>{first, 1, token_stride} : StridedMatrix<F>{first, token_stride, 1};
}

template <typename F>
void attention_forward_cpu_fast(F* out, F* att, const F* qkv, const F* mask, F* mask_term, AttentionShape s) {
    // shapes as in attention_forward_cpu
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
                    std::fill(y_bh + (size_t)i * OUT_ROW, y_bh + (size_t)i * OUT_ROW + HS, F(0));
                }
                for (int i0 = 0; i0 < T; i0 += SOFTMAX_ROWS)
                    softmax_rows(att_bh, T, i0, std::min(SOFTMAX_ROWS, T - i0), s.causal);
                gemm_accumulate_serial<F>(y_bh, OUT_ROW, {att_bh, (size_t)T, 1}, head_matrix(qkv, s, 2, b, h), T, HS, T,
                                          panels);
            }
    }
}

template <typename F>
void attention_backward_cpu_fast(F* dqkv, F* dmask, F* dscores, const F* dout, const F* qkv, const F* att,
                                 const F* mask, AttentionShape s) {
    // shapes as in attention_backward_cpu
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
                    for (int i0 = 0; i0 < T; i0 += SOFTMAX_ROWS)
                        softmax_backward_rows(ds_bh, att_bh, T, i0, std::min(SOFTMAX_ROWS, T - i0));
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
