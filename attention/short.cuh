// attention/short.cuh: attention kernel version 4, for short sequences (T <= 64: the Boolean
// tasks, arithmetic, a patch-4 ViT on 28x28 images): one block holds a whole head, (b, h), in
// shared memory, forward and backward, and the backward sums its part of the mask gradient as
// it goes. It starts from version 3 (attention/flash.cuh: tiles in shared memory, dM in batch
// groups); attention/versions.cuh lists it. The math is attention.cuh's, line for line.
//
// What it teaches. Version 3 cuts a head into tiles because a long sequence does not fit in a
// block; at T <= 64 it does: q, k, v (and in the backward dy) are T·HS floats each and A is
// T·T, a few to a few tens of KB. So a block owns one (b, h) and stages all of it once:
//   - the forward is one launch (after the mask term): scores, softmax and y for every row of
//     the head, with no online softmax (a warp holds a row's T <= 64 scores, two a lane), and
//     A written to att once, row by row as it is made (version 3 writes the raw scores, then
//     normalises them in place);
//   - the backward is one launch for dq, dk and dv where version 3 has two (rows, then columns,
//     with dS through global memory between them): A and then dS stay in shared memory, so a
//     warp per query row (dA, dS, dq) and a warp per key column (dv, dk) read the same copy;
//   - the first stage of dM is folded into that launch. A block walks the SHORT_GROUP_ROWS
//     batch rows of its group for one head, one (b, h) at a time, and each thread adds the dS
//     of its mask entries into registers, batch row after batch row: version 3's stage-1
//     kernel, with dS never read back from global memory. Stage 2 (a warp per mask entry) adds
//     the groups' partial sums, its lanes over the (group, head) terms in order, then a fixed
//     shuffle tree. No atomics and a fixed order: the same bits at every run.
// What it costs: a block's group rows run one after another, so the backward has B·NH/4 blocks
// (B·NH without a mask) where version 3 has B·NH·ceil(T/16); and the shared memory grows with
// T·HS and T², which bounds the shapes (short_shared_bytes, below): T <= 64, HS <= 128, and the whole head within
// the 48 KB a launch may ask (at T 64, HS <= 31; at T 50, HS <= 48; at T 16, HS <= 128).
// The forward makes the CPU loop's sums in the CPU loop's order: on the CUDA emulation (the host
// compiler, -ffp-contract=off, glibc's exp and log1p) its very bits; on a GPU, where nvcc fuses
// a·b + c (FMA) and the mask term's exp and log1p are the device's, within the GPU tests'
// tolerances. The backward sums in other orders (within rounding of the CPU, as the GPU tests
// allow). Not timed on a GPU.
#pragma once
#include "attention.cuh"        // AttentionShape, head_vector, head_mask, sigmoid_of_minus
#include "attention/flash.cuh"  // stage_tile
#include "attention/warp.cuh"   // ATTENTION_WARPS_PER_BLOCK
#include "cpu_fast/vexp.h"      // vexp
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

constexpr int SHORT_WARPS = ATTENTION_WARPS_PER_BLOCK;  // 4 warps, 128 threads a block
constexpr int SHORT_THREADS = SHORT_WARPS * WARP;
constexpr int SHORT_MAX_T = 64;    // a row's scores, two a lane, in registers
constexpr int SHORT_KEYS_PER_LANE = SHORT_MAX_T / WARP;
constexpr int SHORT_MAX_HS = 128;  // an output row, HS/32 <= 4 dims a lane
constexpr int SHORT_DIMS_PER_LANE = SHORT_MAX_HS / WARP;
constexpr int SHORT_MASK_SLOTS = SHORT_MAX_T * SHORT_MAX_T / SHORT_THREADS;  // a thread's mask entries: 32
constexpr int SHORT_GROUP_ROWS = 4;  // batch rows a backward block walks, summing their dS for dM

// The row stride of the tile that lanes read across rows (k_j[d] for 32 keys j at once): odd, so
// the 32 lanes fall on 32 banks. Version 3 pads to HS + 1, which is odd for the even HS it meets;
// HS | 1 is odd for every HS (31 stays 31, where 32 would put every lane on one bank).
__host__ __device__ inline int short_odd_stride(int HS) { return HS | 1; }

// The floats of a forward block: q (T,HS), k (T,odd stride), v (T,HS), A (T,T)
inline size_t short_forward_floats(int T, int HS) {
    return (size_t)T * (2 * HS + short_odd_stride(HS)) + (size_t)T * T;
}

// The dynamic shared memory version 4 asks, its backward's, the larger: q, k (T,HS), v (T,odd
// stride), dy (T,HS) and A, then dS, (T,T). versions.cuh refuses shapes where it passes 48 KB.
inline size_t short_shared_bytes(int T, int HS) {
    return sizeof(float) * ((size_t)T * (3 * HS + short_odd_stride(HS)) + (size_t)T * T);
}

// ----------------------------------------------------------------------------
// forward: block x = b·NH + h, a warp per query row i (rows warp, warp + 4, ...).
//   lanes over keys: S_ij = q_i·k_j / sqrt(HS) + log σ(M_ij), serial along d (k's rows an odd
//     number of floats apart, as in version 3, so the 32 lanes reading k_j[d] hit 32 banks);
//   the row's max by warp_max; the exps into the shared row; their sum, every lane along j in
//     order (the CPU's order: the same bits on the emulation); A_ij = exp / sum into shared
//     memory and att;
//   lanes over d: y_i[d] = sum_j A_ij v_j[d], along j in order, A_ij read once for 4 dims.

__global__ void __launch_bounds__(SHORT_THREADS)
attention_forward_kernel4(float* __restrict__ out, float* __restrict__ att, const float* __restrict__ qkv,
                          const float* __restrict__ mask_term, AttentionShape s) {
    // out (B,T,NH·HS), att (B,NH,T,T), qkv (B,T,3·NH·HS), mask_term log σ(M) (mask_heads,T,T) or nullptr
    DYNAMIC_SHARED(float, shared);
    const int T = s.T, HS = s.HS, KSTRIDE = short_odd_stride(HS);
    float* q = shared;              // (T, HS)
    float* k = q + T * HS;          // (T, KSTRIDE)
    float* v = k + T * KSTRIDE;     // (T, HS)
    float* a = v + T * HS;          // (T, T) A
    const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const size_t token_stride = (size_t)3 * s.NH * HS;  // from one token's q (k, v) to the next one's
    stage_tile(q, HS, head_vector(qkv, s, 0, b, 0, h), token_stride, T, T, HS);
    stage_tile(k, KSTRIDE, head_vector(qkv, s, 1, b, 0, h), token_stride, T, T, HS);
    stage_tile(v, HS, head_vector(qkv, s, 2, b, 0, h), token_stride, T, T, HS);
    __syncthreads();  // the head is in shared memory
    const float scale = 1.0f / sqrtf((float)HS);
    const float* mask_h = s.mask_heads ? head_mask(mask_term, s, h) : nullptr;  // (T,T) log σ(M) of head h
    float* att_bh = att + (size_t)bh * T * T;                                   // (T,T)

    for (int i = warp; i < T; i += SHORT_WARPS) {
        const int last = s.causal ? i : T - 1;  // the last key this query may see
        float* a_row = a + i * T;               // (T)
        float p[SHORT_KEYS_PER_LANE];           // p[c]: key j = lane + 32c, its score, then its exp
        float lane_max = -INFINITY;
        UNROLL  // p stays in registers
        for (int c = 0; c < SHORT_KEYS_PER_LANE; c++) {
            const int j = lane + WARP * c;
            p[c] = -INFINITY;
            if (j > last) continue;
            float dot = 0;
            for (int d = 0; d < HS; d++) dot += q[i * HS + d] * k[j * KSTRIDE + d];
            p[c] = dot * scale + (mask_h ? mask_h[(size_t)i * T + j] : 0.0f);
            lane_max = fmaxf(lane_max, p[c]);
        }
        const float row_max = warp_max(lane_max);  // finite: key 0 is always seen
        UNROLL
        for (int c = 0; c < SHORT_KEYS_PER_LANE; c++) {
            const int j = lane + WARP * c;
            p[c] = j <= last ? vexp(p[c] - row_max) : 0.0f;
            if (j < T) a_row[j] = p[c];
        }
        __syncwarp();  // the row's exps are written; every lane reads all of them
        float sum = 0;
        for (int j = 0; j <= last; j++) sum += a_row[j];
        __syncwarp();  // every lane has read the exps before they become A
        UNROLL
        for (int c = 0; c < SHORT_KEYS_PER_LANE; c++) {
            const int j = lane + WARP * c;
            if (j >= T) continue;
            const float a_ij = j <= last ? p[c] / sum : 0.0f;
            a_row[j] = a_ij;
            att_bh[(size_t)i * T + j] = a_ij;
        }
        __syncwarp();  // A_i,: is whole; every lane reads all of it
        float acc[SHORT_DIMS_PER_LANE] = {};  // y_i[lane + 32m]
        for (int j = 0; j <= last; j++) {
            const float a_ij = a_row[j];  // one address for the warp: a broadcast
            UNROLL
            for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                if (lane + WARP * m < HS) acc[m] += a_ij * v[j * HS + lane + WARP * m];
        }
        float* y = out + ((size_t)b * T + i) * s.NH * HS + h * HS;  // (HS)
        UNROLL
        for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
            if (lane + WARP * m < HS) y[lane + WARP * m] = acc[m];
    }
}

// ----------------------------------------------------------------------------
// backward: block x = g·NH + h walks batch rows b = g·group_rows, ... (group_rows of them, fewer
// in the last group), one (b, h) at a time, in four phases with a barrier between each:
//   1. stage q, k, v, dy and A (dout = nullptr: dS from dscores, and no v, dy, A);
//   2. dv_j += sum_i A_ij dy_i: a warp per key column j, lanes over d;
//   3. dA_ij = dy_i·v_j (lanes over keys; v's rows an odd stride apart, for the banks), the
//      weighted sum sum_k A_ik dA_ik along k in order, and dS_ij = A_ij (dA_ij - that) written
//      over A_ij: a warp per query row i, which alone reads row i of A here (phase 2, which
//      reads A's columns, is over);
//   4. dq_i += sum_j dS_ij k_j / sqrt(HS) (a warp per row), dk_j += sum_i dS_ij q_i / sqrt(HS) (a
//      warp per column), lanes over d; then each thread copies its mask entries' dS to dscores
//      (when it made them) and adds them to its registers, partial[r] for entry e = thread + 128r.
// A causal head skips the terms that are zero: A_ij = dS_ij = 0 for j > i (a given dS is summed
// whole). After the last row the thread writes its partial sums over the dS of the group's first
// row, dscores[g·group_rows, h]: entries only this thread wrote. Stage 2 reads them there.

__global__ void __launch_bounds__(SHORT_THREADS)
attention_backward_kernel4(float* __restrict__ dqkv, float* __restrict__ dscores, const float* __restrict__ dout,
                           const float* __restrict__ qkv, const float* __restrict__ att, AttentionShape s,
                           int group_rows) {
    // dqkv (B,T,3·NH·HS) dq, dk, dv added; dscores (B,NH,T,T) dS written (or, dout = nullptr,
    // given), then the groups' partial sums of dS (with a mask); dout (B,T,NH·HS) or nullptr;
    // qkv (B,T,3·NH·HS); att (B,NH,T,T)
    DYNAMIC_SHARED(float, shared);
    const int T = s.T, HS = s.HS, VSTRIDE = short_odd_stride(HS), TT = T * T;
    float* q = shared;            // (T, HS)
    float* k = q + T * HS;        // (T, HS)
    float* v = k + T * HS;        // (T, VSTRIDE)
    float* dy = v + T * VSTRIDE;  // (T, HS)
    float* ds = dy + T * HS;      // (T, T): A, then dS over it
    const int g = blockIdx.x / s.NH, h = blockIdx.x % s.NH;
    const int b_first = g * group_rows, b_end = b_first + group_rows < s.B ? b_first + group_rows : s.B;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const size_t token_stride = (size_t)3 * s.NH * HS, dy_stride = (size_t)s.NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    float partial[SHORT_MASK_SLOTS] = {};  // sum over the group's rows so far of dS at entry thread + 128r

    for (int b = b_first; b < b_end; b++) {
        const size_t block = ((size_t)b * s.NH + h) * TT;  // (b, h)'s (T,T) in att and dscores
        __syncthreads();  // 1. the last row's phases are done with the shared memory
        stage_tile(q, HS, head_vector(qkv, s, 0, b, 0, h), token_stride, T, T, HS);
        stage_tile(k, HS, head_vector(qkv, s, 1, b, 0, h), token_stride, T, T, HS);
        if (dout) {
            stage_tile(v, VSTRIDE, head_vector(qkv, s, 2, b, 0, h), token_stride, T, T, HS);
            stage_tile(dy, HS, dout + (size_t)b * T * dy_stride + h * HS, dy_stride, T, T, HS);
            for (int e = threadIdx.x; e < TT; e += SHORT_THREADS) ds[e] = att[block + e];
        } else {
            for (int e = threadIdx.x; e < TT; e += SHORT_THREADS) ds[e] = dscores[block + e];
        }
        __syncthreads();

        if (dout) {
            for (int j = warp; j < T; j += SHORT_WARPS) {  // 2. dv_j
                float acc[SHORT_DIMS_PER_LANE] = {};
                for (int i = s.causal ? j : 0; i < T; i++) {
                    const float a_ij = ds[i * T + j];  // a broadcast
                    UNROLL
                    for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                        if (lane + WARP * m < HS) acc[m] += a_ij * dy[i * HS + lane + WARP * m];
                }
                float* dv = dqkv + (head_vector(qkv, s, 2, b, j, h) - qkv);
                UNROLL
                for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                    if (lane + WARP * m < HS) dv[lane + WARP * m] += acc[m];
            }
            __syncthreads();  // A's columns are read: phase 3 overwrites A with dS
            for (int i = warp; i < T; i += SHORT_WARPS) {  // 3. dA_i,:, dS_i,:
                float* ds_row = ds + i * T;  // (T): A_i,: in, dS_i,: out
                float da[SHORT_KEYS_PER_LANE];  // key j = lane + 32c
                UNROLL
                for (int c = 0; c < SHORT_KEYS_PER_LANE; c++) {
                    const int j = lane + WARP * c;
                    da[c] = 0;
                    if (j < T)
                        for (int d = 0; d < HS; d++) da[c] += dy[i * HS + d] * v[j * VSTRIDE + d];
                }
                float weighted = 0;  // sum_j A_ij dA_ij, every lane along j in order
                UNROLL
                for (int c = 0; c < SHORT_KEYS_PER_LANE; c++)
                    for (int jj = 0; jj < WARP && WARP * c + jj < T; jj++)  // the same bounds in every lane
                        weighted += ds_row[WARP * c + jj] * __shfl_sync(0xFFFFFFFFu, da[c], jj);
                __syncwarp();  // every lane has read the row's A before it becomes dS
                UNROLL
                for (int c = 0; c < SHORT_KEYS_PER_LANE; c++) {
                    const int j = lane + WARP * c;
                    if (j < T) ds_row[j] = ds_row[j] * (da[c] - weighted);
                }
            }
            __syncthreads();  // dS is whole
        }

        const bool zero_above = s.causal && dout;  // dS_ij = 0 for j > i (a given dS may be anything)
        for (int i = warp; i < T; i += SHORT_WARPS) {  // 4. dq_i
            float acc[SHORT_DIMS_PER_LANE] = {};
            const int last = zero_above ? i : T - 1;
            for (int j = 0; j <= last; j++) {
                const float ds_ij = ds[i * T + j] * scale;
                UNROLL
                for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                    if (lane + WARP * m < HS) acc[m] += ds_ij * k[j * HS + lane + WARP * m];
            }
            float* dq = dqkv + (head_vector(qkv, s, 0, b, i, h) - qkv);
            UNROLL
            for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                if (lane + WARP * m < HS) dq[lane + WARP * m] += acc[m];
        }
        for (int j = warp; j < T; j += SHORT_WARPS) {  // 4. dk_j
            float acc[SHORT_DIMS_PER_LANE] = {};
            for (int i = zero_above ? j : 0; i < T; i++) {
                const float ds_ij = ds[i * T + j] * scale;
                UNROLL
                for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                    if (lane + WARP * m < HS) acc[m] += ds_ij * q[i * HS + lane + WARP * m];
            }
            float* dk = dqkv + (head_vector(qkv, s, 1, b, j, h) - qkv);
            UNROLL
            for (int m = 0; m < SHORT_DIMS_PER_LANE; m++)
                if (lane + WARP * m < HS) dk[lane + WARP * m] += acc[m];
        }
        UNROLL  // partial stays in registers
        for (int r = 0; r < SHORT_MASK_SLOTS; r++) {  // 4. dS out (made here), and into the partial sums
            const int e = threadIdx.x + SHORT_THREADS * r;
            if (e >= TT) continue;
            if (dout) dscores[block + e] = ds[e];
            partial[r] += ds[e];
        }
    }
    if (s.mask_heads == 0) return;
    const size_t first = ((size_t)b_first * s.NH + h) * TT;  // the group's first row, head h
    UNROLL
    for (int r = 0; r < SHORT_MASK_SLOTS; r++) {
        const int e = threadIdx.x + SHORT_THREADS * r;
        if (e < TT) dscores[first + e] = partial[r];
    }
}

// stage 2: dM_m += (sum over the groups g and the heads h of the entry of the partial sums at
// dscores[g·group_rows, h]) σ(-M_m), a warp per mask entry: lane l adds the terms t = l, l+32, ...
// of the list (g, then h) in order, then warp_sum's fixed butterfly adds the lanes (the column
// sums' stage 2, layers/column_sums.cuh)
__global__ void attention_mask_sum_kernel4(float* __restrict__ dmask, const float* __restrict__ dscores,
                                           const float* __restrict__ mask, AttentionShape s, int group_rows) {
    // dmask, mask (mask_heads,T,T); dscores (B,NH,T,T) holding the partial sums
    const int TT = s.T * s.T, count = s.mask_heads * TT, groups = (s.B + group_rows - 1) / group_rows;
    const int m = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (m >= count) return;  // the whole warp: m is the warp's
    const int ij = m % TT, h_first = s.mask_heads == 1 ? 0 : m / TT, heads = s.mask_heads == 1 ? s.NH : 1;
    float sum = 0;
    for (int t = lane; t < groups * heads; t += WARP) {
        const int g = t / heads, h = h_first + t % heads;
        sum += dscores[((size_t)g * group_rows * s.NH + h) * TT + ij];
    }
    sum = warp_sum(sum);
    if (lane == 0) dmask[m] += sum * sigmoid_of_minus(mask[m]);
}

// Version 4's launchers, with the signatures of every GPU version (attention/versions.cuh, which
// refuses the shapes they cannot hold before they are called).
inline void attention_forward_gpu4(float* out, float* att, const float* qkv, const float* mask_term,
                                   AttentionShape s) {
    // --profile's walk of a lane: per row of its warp, its keys' dot products, the row's sum and y
    const double walk =
        (double)ceil_div(s.T, SHORT_WARPS) * (SHORT_KEYS_PER_LANE * s.HS + (1 + SHORT_DIMS_PER_LANE) * s.T);
    launch_kernel<attention_forward_kernel4>(attention_cost(s, 1, 2, walk), (unsigned)(s.B * s.NH), SHORT_THREADS,
                                             sizeof(float) * short_forward_floats(s.T, s.HS), out, att, qkv,
                                             mask_term, s);
}

// dq, dk, dv and dM in two launches. Without a mask there is nothing to sum: a block per (b, h).
inline void attention_backward_gpu4(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                    const float* att, const float* mask, AttentionShape s) {
    const int group_rows = s.mask_heads ? SHORT_GROUP_ROWS : 1;
    const unsigned blocks = ceil_div(s.B, group_rows) * s.NH;
    // --profile's walk of a lane: per batch row of its group and row (column) of its warp, dv, dA
    // and dS, dq and dk
    const double walk = (double)group_rows * ceil_div(s.T, SHORT_WARPS) *
                        (3.0 * SHORT_DIMS_PER_LANE * s.T + SHORT_KEYS_PER_LANE * s.HS + s.T);
    launch_kernel<attention_backward_kernel4>(attention_cost(s, 2, 4, walk), blocks, SHORT_THREADS,
                                              short_shared_bytes(s.T, s.HS), dqkv, dscores, dout, qkv, att, s,
                                              group_rows);
    if (s.mask_heads == 0) return;
    const size_t count = (size_t)s.mask_heads * s.T * s.T;
    const double terms = (double)ceil_div(s.B, group_rows) * s.NH / s.mask_heads;  // of one mask entry
    launch_kernel<attention_mask_sum_kernel4>(attention_mask_cost(s, std::ceil(terms / WARP)),
                                              ceil_div(count, BLOCK / WARP), BLOCK, 0, dmask, dscores, mask, s,
                                              group_rows);
}
