// attention.cuh: multi-head attention with a learnable additive mask, forward and backward: the
// method. docs/method.md derives it and says why the mask's prior persists.
//
// Per batch row b and head h, with q, k, v the head's slices of the qkv projection:
//   S_ij = q_i . k_j / sqrt(HS) + log σ(M_ij)            (T, T)  the mask term
//   A_ij = softmax_j(S_ij)      (causal: j > i is -inf before the softmax, so A_ij = 0)
//   y_i  = sum_j A_ij v_j                                 (HS)
// M is (T, T) shared by the heads, or (NH, T, T) one per head, or absent (no mask term).
// log σ(m) = min(m, 0) - log1p(exp(-|m|)) is stable for any m and always <= 0: the mask can
// only down-weight a key. Its derivative is σ(-m).
//
// What runs what you read: `--cpu-kernel 1` runs these CPU loops (the default, 2, runs their twins in
// cpu_fast/, with the same bits); a GPU runs kernel 1 below (`--attention-kernel 1`, its default). The
// forward, the backward and the mask gradient dM are row functions under their math that both call.
// On the CUDA emulation (emu/: the host compiler, -ffp-contract=off, glibc's exp and log1p) kernel 1
// gives the loops' very bits; on a GPU, nvcc fuses a·b + c into one rounding (FMA) and the device's exp
// and log1p are not glibc's: the two agree within the GPU tests' tolerances. Faster ones: attention/.
// One qkv row (3·NH·HS floats): all heads' q, then all k, then all v (head h's q at h·HS, its k at
// NH·HS + h·HS, its v at 2·NH·HS + h·HS). An output row (NH·HS) is the heads' y side by side.
#pragma once
#include "attention/costs.h"  // attention_cost, attention_mask_cost: what a launch costs, for --profile
#include "cpu_fast/vexp.h"     // vexp: the softmax's e^x, the same arithmetic on both devices
#include "gpu/profile.h"       // LaunchCost: a launch's bytes, FLOPs and longest walk
#include "layers/device.cuh"   // worth_threads: whether a CPU loop is worth its threads
#include "layers/launch.cuh"   // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

struct AttentionShape {
    int B, T, NH, HS;
    int mask_heads;  // 0: no mask, 1: one (T,T) mask shared by all heads, NH: one per head
    bool causal;
};

template <typename F>
__host__ __device__ inline F log_sigmoid(F m) { return (m < F(0) ? m : F(0)) - log1p(exp(-fabs(m))); }
template <typename F>
__host__ __device__ inline F sigmoid_of_minus(F m) { return F(1) / (F(1) + exp(m)); }  // σ(-m): log σ's slope
// The multiply-adds of Q K^T (or A V): whether the CPU loops are worth their threads (worth_threads)
inline size_t attention_work(AttentionShape s) { return (size_t)s.B * s.NH * s.T * s.T * s.HS; }

// The (T,T) mask that head h of a layer uses (nullptr when there is no mask).
template <typename F>
__host__ __device__ inline const F* head_mask(const F* mask, AttentionShape s, int h) {
    return s.mask_heads == 0 ? nullptr : mask + (s.mask_heads == 1 ? 0 : (size_t)h * s.T * s.T);
}

// Where head h's q, k and v of token t of batch row b sit in qkv (B,T,3·NH·HS); part 0: q, 1: k, 2: v
template <typename F>
__host__ __device__ inline const F* head_vector(const F* qkv, AttentionShape s, int part, int b, int t, int h) {
    return qkv + ((size_t)b * s.T + t) * 3 * s.NH * s.HS + part * s.NH * s.HS + h * s.HS;
}

// The (b, h, i) of row (or key column) r of the (B, NH, T) grid: its place in att and dscores.
struct RowIndex { int b, h, i; };
__device__ inline RowIndex row_index(int r, AttentionShape s) { return {r / (s.T * s.NH), r / s.T % s.NH, r % s.T}; }

// ----------------------------------------------------------------------------
// forward. First the mask term log σ(M), once per call (in every score it would run B·NH times),
// then per query row i:
//   S_ij = q_i . k_j / sqrt(HS) + log σ(M_ij)   for the keys j <= last (last = i when causal)
//   A_ij = exp(S_ij - max_k S_ik) / sum_k exp(S_ik - max_k S_ik),   0 beyond last
//   y_i  = sum_j A_ij v_j

template <typename F>
void mask_term_cpu(F* mask_term, const F* mask, int count) {  // mask_term, mask (mask_heads,T,T): count entries
    for (int m = 0; m < count; m++) mask_term[m] = log_sigmoid(mask[m]);
}

__global__ void mask_term_kernel1(float* __restrict__ mask_term, const float* __restrict__ mask, int count) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per mask entry
    if (m < count) mask_term[m] = log_sigmoid(mask[m]);
}

// S_ij for j <= last into att_row: one dot product per key, summed along d in order.
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

// A_ij from the scores in att_row[0..last], in place; 0 beyond last.
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

// One query row of one head: its scores, their softmax, and its output.
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

// The CPU loop: the row function for every (b, h, i).
template <typename F>
void attention_forward_cpu(F* out, F* att, const F* qkv, const F* mask, F* mask_term, AttentionShape s) {
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

// GPU kernel 1: the same row function, one thread per (b, h, i).
__global__ void attention_forward_kernel1(float* __restrict__ out, float* __restrict__ att,
                                          const float* __restrict__ qkv, const float* __restrict__ mask_term,
                                          AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= s.B * s.NH * s.T) return;
    const RowIndex r = row_index(idx, s);
    attention_row_forward(out + ((size_t)r.b * s.T + r.i) * s.NH * s.HS + r.h * s.HS,
                          att + (size_t)idx * s.T, qkv, mask_term, s, r.b, r.h, r.i);
}

// ----------------------------------------------------------------------------
// backward, each line the derivative of a forward line ("in the forward pass this was ..."):
//   y_i = sum_j A_ij v_j       ->  dA_ij = dy_i . v_j ;       dv_j += sum_i A_ij dy_i
//   A_i,: = softmax(S_i,:)     ->  dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik)
//   S_ij = q_i . k_j / sqrt(HS) ->  dq_i += sum_j dS_ij k_j / sqrt(HS) ; dk_j += sum_i dS_ij q_i / sqrt(HS)
// In two passes, so that no two threads add into the same number: per query row i (dA, dS, dq),
// then per key column j (dk, dv). dS is one (B, NH, T, T) buffer, dscores, where row i of dA waits
// until the softmax's backward turns it into dS. With dout = nullptr, dscores holds dS already (a
// loss on the scores, qk-opt's): the row pass then only computes dq, and dv is not touched.

// dS_i,: from dA_i,:, in place (0 where A is 0: causal)
template <typename F>
__host__ __device__ inline void attention_row_softmax_backward(F* dscores_row, const F* att_row, int T) {
    F weighted = 0;
    for (int j = 0; j < T; j++) weighted += att_row[j] * dscores_row[j];
    for (int j = 0; j < T; j++) dscores_row[j] = att_row[j] * (dscores_row[j] - weighted);
}

// dq_i += sum_j dS_ij k_j / sqrt(HS)
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

// The row pass for query i: dA_i,: (in dscores_row), dS_i,: (written over it, not accumulated:
// dS is scratch) and dq_i.
template <typename F>
__host__ __device__ inline void attention_row_backward(F* dqkv, F* dscores_row, const F* dout, const F* qkv,
                                                       const F* att_row, AttentionShape s, int b, int h, int i) {
    if (dout) {
        const F* dy = dout + ((size_t)b * s.T + i) * s.NH * s.HS + h * s.HS;
        for (int j = 0; j < s.T; j++) {  // dA_ij = dy_i . v_j
            const F* v = head_vector(qkv, s, 2, b, j, h);
            F da = 0;
            for (int d = 0; d < s.HS; d++) da += dy[d] * v[d];
            dscores_row[j] = da;
        }
        attention_row_softmax_backward(dscores_row, att_row, s.T);
    }
    attention_row_dquery(dqkv, dscores_row, qkv, s, b, h, i);
}

// The column pass for key j: dk_j += sum_i dS_ij q_i / sqrt(HS) and dv_j += sum_i A_ij dy_i.
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

// ----------------------------------------------------------------------------
// the mask gradient: in the forward pass this was S_ij += log σ(M_ij), so
//   dM_ij += σ(-M_ij) · sum over b (and over h when the mask is shared) of dS_bhij
// one mask entry at a time, its terms added in a fixed order (b, then h): no atomics, so the same
// bits at every run. At M = +c the slope σ(-c) ≈ e^-c; at M = -c the terms carry A_ij ≈ 0: why
// the prior stays (docs/method.md).
template <typename F>
__host__ __device__ inline void attention_mask_entry_backward(F* dmask, const F* dscores, const F* mask,
                                                              AttentionShape s, int m) {  // m: (mask_heads,T,T)
    const int TT = s.T * s.T, ij = m % TT, mh = m / TT;
    const int h_first = s.mask_heads == 1 ? 0 : mh, h_last = s.mask_heads == 1 ? s.NH - 1 : mh;
    F sum = 0;
    for (int b = 0; b < s.B; b++)
        for (int h = h_first; h <= h_last; h++) sum += dscores[((size_t)b * s.NH + h) * TT + ij];
    dmask[m] += sum * sigmoid_of_minus(mask[m]);
}

// The CPU loop: the row, column and mask-entry functions, as GPU kernel 1 runs them.
template <typename F>
void attention_backward_cpu(F* dqkv, F* dmask, F* dscores, const F* dout, const F* qkv, const F* att, const F* mask,
                            AttentionShape s) {
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

// GPU kernel 1: one thread per query row, per key column, per mask entry.
__global__ void attention_backward_rows_kernel1(float* __restrict__ dqkv, float* __restrict__ dscores,
                                                const float* __restrict__ dout, const float* __restrict__ qkv,
                                                const float* __restrict__ att, AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // (b, h, i)
    if (idx >= s.B * s.NH * s.T) return;
    const RowIndex r = row_index(idx, s);
    attention_row_backward(dqkv, dscores + (size_t)idx * s.T, dout, qkv, att + (size_t)idx * s.T, s, r.b, r.h, r.i);
}

__global__ void attention_backward_columns_kernel1(float* __restrict__ dqkv, const float* __restrict__ dscores,
                                                   const float* __restrict__ dout, const float* __restrict__ qkv,
                                                   const float* __restrict__ att, AttentionShape s) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // (b, h, j)
    if (idx >= s.B * s.NH * s.T) return;
    const RowIndex c = row_index(idx, s);  // c.i is the key j
    attention_column_backward(dqkv, dscores, dout, qkv, att, s, c.b, c.h, c.i);
}

__global__ void attention_backward_mask_kernel1(float* __restrict__ dmask, const float* __restrict__ dscores,
                                                const float* __restrict__ mask, AttentionShape s) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;  // one mask entry
    if (m < s.mask_heads * s.T * s.T) attention_mask_entry_backward(dmask, dscores, mask, s, m);
}

// Kernel 1's launchers, with every GPU version's signatures (versions.cuh); log σ(M) is mask_term_kernel1's
inline void attention_forward_gpu1(float* out, float* att, const float* qkv, const float* mask_term, AttentionShape s) {
    const LaunchCost cost = attention_cost(s, 1, 2, 2.0 * s.T * s.HS);  // a row: T scores, then y over T keys
    launch_kernel<attention_forward_kernel1>(cost, ceil_div((size_t)s.B * s.NH * s.T, 128), 128, 0, out, att, qkv,
                                             mask_term, s);
}

inline void attention_mask_backward_gpu1(float* dmask, const float* dscores, const float* mask, AttentionShape s) {
    if (s.mask_heads == 0) return;
    const LaunchCost cost = attention_mask_cost(s, (double)s.B * s.NH / s.mask_heads);  // an entry: every b (and h)
    launch_kernel<attention_backward_mask_kernel1>(cost, ceil_div((size_t)s.mask_heads * s.T * s.T, 128), 128, 0,
                                                   dmask, dscores, mask, s);
}

inline void attention_backward_gpu1(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                    const float* att, const float* mask, AttentionShape s) {
    const unsigned blocks = ceil_div((size_t)s.B * s.NH * s.T, 128);
    const LaunchCost cost = attention_cost(s, 2, 2, 2.0 * s.T * s.HS);  // a row (column): two passes over T·HS
    launch_kernel<attention_backward_rows_kernel1>(cost, blocks, 128, 0, dqkv, dscores, dout, qkv, att, s);
    launch_kernel<attention_backward_columns_kernel1>(cost, blocks, 128, 0, dqkv, dscores, dout, qkv, att, s);
    attention_mask_backward_gpu1(dmask, dscores, mask, s);
}
