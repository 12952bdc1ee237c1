// attention/warp.cuh: attention kernel version 2, one warp per row. It starts from version 1
// (attention.cuh, whose indexing it reuses); attention/versions.cuh lists it.
//
// What it teaches. Kernel 1 gives each query row to one thread, which walks the T keys alone:
// a (B,NH,T) grid of lonely threads, each reading whole k and v vectors that its neighbours
// read too, with nothing shared. Here a warp (32 threads that run in lockstep) owns a row:
//   - scores: lane l takes keys l, l+32, l+64, ...; each lane's dot product q·k_j is serial
//     along d, as in the row function;
//   - the softmax's max and sum over the row are warp reductions: each lane holds a partial
//     result, and five butterfly steps of __shfl_xor_sync (offsets 16, 8, 4, 2, 1) leave the
//     max (or sum) of all 32 in every lane, in registers, with no shared memory and no atomics.
//     The butterfly adds in the same order at every run, so the result is bit-reproducible
//     (though not the bits of the CPU's left-to-right sum: the GPU tests allow 1e-4 + 1e-3·|x|);
//   - y_i = sum_j A_ij v_j: lanes change roles and take the HS output dims (lane l: d = l, l+32,
//     ...), each summing over j in order; reading v_j[d] for consecutive d, the 32 lanes read
//     one contiguous piece of memory (a coalesced load).
// Backward does the same per query row (dA, dS and dq) and per key column (dk and dv, lanes
// over d). The mask gradient keeps kernel 1's one thread per mask entry (version 3 is where it
// changes).
#pragma once
#include "attention.cuh"      // AttentionShape, head_vector, head_mask, row_index, version 1's dM
#include "cpu_fast/vexp.h"    // vexp
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

constexpr int ATTENTION_WARPS_PER_BLOCK = 4;  // one warp per row, four rows a block
// the block of versions 2 and 3: their kernels' __launch_bounds__ and their launchers use it
constexpr int ATTENTION_THREADS = ATTENTION_WARPS_PER_BLOCK * WARP;

// ----------------------------------------------------------------------------
// forward

__global__ void __launch_bounds__(ATTENTION_THREADS)
attention_forward_kernel2(float* __restrict__ out, float* __restrict__ att, const float* __restrict__ qkv,
                          const float* __restrict__ mask_term, AttentionShape s) {
    // out (B,T,NH·HS), att (B,NH,T,T), qkv (B,T,3·NH·HS), mask_term log σ(M) (mask_heads,T,T) or nullptr
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (row >= s.B * s.NH * s.T) return;  // the whole warp returns: a row is a warp's
    const RowIndex r = row_index(row, s);
    const int last = s.causal ? r.i : s.T - 1;  // the last key this query may see
    const float scale = 1.0f / sqrtf((float)s.HS);
    const float* q = head_vector(qkv, s, 0, r.b, r.i, r.h);
    const float* mask_row = s.mask_heads ? head_mask(mask_term, s, r.h) + (size_t)r.i * s.T : nullptr;
    float* att_row = att + (size_t)row * s.T;

    // S_ij = q_i·k_j / sqrt(HS) + log σ(M_ij), lanes over keys; each lane keeps its max
    float lane_max = -INFINITY;
    for (int j = lane; j <= last; j += WARP) {
        const float* k = head_vector(qkv, s, 1, r.b, j, r.h);
        float dot = 0;
        for (int d = 0; d < s.HS; d++) dot += q[d] * k[d];
        const float score = dot * scale + (mask_row ? mask_row[j] : 0.0f);
        att_row[j] = score;
        lane_max = fmaxf(lane_max, score);
    }
    const float row_max = warp_max(lane_max);
    // A_ij = exp(S_ij - max) / sum: each lane exponentiates the scores it wrote
    float lane_sum = 0;
    for (int j = lane; j <= last; j += WARP) {
        const float e = vexp(att_row[j] - row_max);
        att_row[j] = e;
        lane_sum += e;
    }
    const float row_sum = warp_sum(lane_sum);
    for (int j = lane; j < s.T; j += WARP) att_row[j] = j <= last ? att_row[j] / row_sum : 0.0f;
    __syncwarp();  // A_i,: was written by all lanes; below every lane reads all of it

    // y_i[d] = sum_j A_ij v_j[d], lanes over d
    float* y = out + ((size_t)r.b * s.T + r.i) * s.NH * s.HS + r.h * s.HS;
    for (int d = lane; d < s.HS; d += WARP) {
        float acc = 0;
        for (int j = 0; j <= last; j++) acc += att_row[j] * head_vector(qkv, s, 2, r.b, j, r.h)[d];
        y[d] = acc;
    }
}

// ----------------------------------------------------------------------------
// backward: per query row dA, dS and dq; per key column dk and dv

__global__ void __launch_bounds__(ATTENTION_THREADS)
attention_backward_rows_kernel2(float* __restrict__ dqkv, float* __restrict__ dscores, const float* __restrict__ dout,
                                const float* __restrict__ qkv, const float* __restrict__ att, AttentionShape s) {
    // dscores (B,NH,T,T): dS written (or, dout = nullptr, given); the rest as in kernel 1
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (row >= s.B * s.NH * s.T) return;
    const RowIndex r = row_index(row, s);
    float* ds_row = dscores + (size_t)row * s.T;
    if (dout) {
        // dA_ij = dy_i·v_j (lanes over keys), then dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik)
        const float* dy = dout + ((size_t)r.b * s.T + r.i) * s.NH * s.HS + r.h * s.HS;
        const float* att_row = att + (size_t)row * s.T;
        float lane_weighted = 0;
        for (int j = lane; j < s.T; j += WARP) {
            const float* v = head_vector(qkv, s, 2, r.b, j, r.h);
            float da = 0;
            for (int d = 0; d < s.HS; d++) da += dy[d] * v[d];
            ds_row[j] = da;
            lane_weighted += att_row[j] * da;
        }
        const float weighted = warp_sum(lane_weighted);
        for (int j = lane; j < s.T; j += WARP) ds_row[j] = att_row[j] * (ds_row[j] - weighted);
        __syncwarp();  // dS_i,: is read by every lane below
    }
    // dq_i[d] += sum_j dS_ij k_j[d] / sqrt(HS), lanes over d
    const float scale = 1.0f / sqrtf((float)s.HS);
    float* dq = dqkv + (head_vector(qkv, s, 0, r.b, r.i, r.h) - qkv);
    for (int d = lane; d < s.HS; d += WARP) {
        float acc = 0;
        for (int j = 0; j < s.T; j++) acc += ds_row[j] * scale * head_vector(qkv, s, 1, r.b, j, r.h)[d];
        dq[d] += acc;
    }
}

__global__ void __launch_bounds__(ATTENTION_THREADS)
attention_backward_columns_kernel2(float* __restrict__ dqkv, const float* __restrict__ dscores,
                                   const float* __restrict__ dout, const float* __restrict__ qkv,
                                   const float* __restrict__ att, AttentionShape s) {
    // one warp per key column (b, h, j), lanes over d:
    //   dk_j[d] += sum_i dS_ij q_i[d] / sqrt(HS);   dv_j[d] += sum_i A_ij dy_i[d]   (dout given)
    const int column = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (column >= s.B * s.NH * s.T) return;
    const RowIndex c = row_index(column, s);  // c.i is the key j
    const int T = s.T, HS = s.HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t block = ((size_t)c.b * s.NH + c.h) * T * T;  // this (b, h)'s (T,T) in att and dscores
    float* dk = dqkv + (head_vector(qkv, s, 1, c.b, c.i, c.h) - qkv);
    float* dv = dqkv + (head_vector(qkv, s, 2, c.b, c.i, c.h) - qkv);
    for (int d = lane; d < HS; d += WARP) {
        float dk_acc = 0, dv_acc = 0;
        for (int i = 0; i < T; i++) {
            dk_acc += dscores[block + (size_t)i * T + c.i] * scale * head_vector(qkv, s, 0, c.b, i, c.h)[d];
            if (!dout) continue;
            dv_acc += att[block + (size_t)i * T + c.i] * dout[((size_t)c.b * T + i) * s.NH * HS + c.h * HS + d];
        }
        dk[d] += dk_acc;
        if (dout) dv[d] += dv_acc;
    }
}

// --profile's walk of a lane: its keys' dot products (T/32 keys of HS dims), then its dims of
// y or dq (HS/32 dims over T keys)
inline double warp_row_walk(AttentionShape s) {
    return (double)ceil_div(s.T, WARP) * s.HS + (double)ceil_div(s.HS, WARP) * s.T;
}

inline void attention_forward_gpu2(float* out, float* att, const float* qkv, const float* mask_term,
                                   AttentionShape s) {
    launch_kernel<attention_forward_kernel2>(attention_cost(s, 1, 2, warp_row_walk(s)),
                                             ceil_div((size_t)s.B * s.NH * s.T, ATTENTION_WARPS_PER_BLOCK),
                                             ATTENTION_THREADS, 0, out, att, qkv, mask_term, s);
}

// dq, dk, dv (and dS)
inline void attention_backward_qkv_gpu2(float* dqkv, float* dscores, const float* dout, const float* qkv,
                                        const float* att, AttentionShape s) {
    const unsigned blocks = ceil_div((size_t)s.B * s.NH * s.T, ATTENTION_WARPS_PER_BLOCK);
    const LaunchCost cost = attention_cost(s, 2, 2, warp_row_walk(s));
    launch_kernel<attention_backward_rows_kernel2>(cost, blocks, ATTENTION_THREADS, 0, dqkv, dscores, dout, qkv, att,
                                                   s);
    launch_kernel<attention_backward_columns_kernel2>(cost, blocks, ATTENTION_THREADS, 0, dqkv, dscores, dout, qkv,
                                                      att, s);
}

// dq, dk, dv, then dM with kernel 1's one thread per mask entry
inline void attention_backward_gpu2(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                    const float* att, const float* mask, AttentionShape s) {
    attention_backward_qkv_gpu2(dqkv, dscores, dout, qkv, att, s);
    attention_mask_backward_gpu1(dmask, dscores, mask, s);
}
