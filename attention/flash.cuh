// attention/flash.cuh: attention kernel version 3, flash-style: tiles in shared memory and an
// online softmax, and a mask gradient summed in parallel over the batch in a fixed order. It
// starts from version 2 (attention/warp.cuh: a warp per row, warp reductions); attention/versions.cuh
// lists it.
//
// What the forward teaches. In versions 1 and 2 every query row reads all T key and value
// vectors from global memory, so each k_j and v_j is read T times per (b, h). Here a block of
// 4 warps owns a tile of 16 query rows (4 per warp) and walks the keys in tiles of 32: the 128
// threads copy the tile's k and v into shared memory once, and all 16 rows read them from
// there. A row never holds all its scores at once; it keeps three things, updated tile by tile
// (the online softmax):
//   m  the largest score so far;   l  the sum of exp(S_ij - m) so far;
//   acc[d] = sum_j exp(S_ij - m) v_j[d] so far.
// A new tile with largest score m_tile moves m to m' = max(m, m_tile), and rescales what was
// summed against the old m by exp(m - m'):
//   l' = l·exp(m - m') + sum_tile exp(S_ij - m'),   acc' = acc·exp(m - m') + sum_tile exp(S_ij - m') v_j
// After the last tile, y_i = acc / l (the softmax's denominator divided out once). The mask
// term log σ(M_ij) is read per tile with the scores. Two details carry their own lesson:
//   - the k tile's rows are HS + 1 floats apart in shared memory: lane l reads k_l[d] for the
//     same d as its neighbours, and with a stride of HS (a multiple of 32 banks) all 32 lanes
//     would hit one bank and wait in turn; the extra float puts each lane on its own bank;
//   - a causal block stops at the last key its last row may see.
// This model keeps A (B,NH,T,T) for its metrics (the prior mass is measured on it), so the
// forward also writes A. A row's final m and l are known only after its last tile, so in the
// tile pass each lane writes its key's raw score S_ij into A's row (32 lanes, 32 neighbouring
// floats: one coalesced store), and after the last tile the same lane reads its own entries
// back and normalises them in place, A_ij = exp(S_ij - m) / l (0 past a causal row's last key).
// k is read only through the staged tiles. Recomputing the scores for A would read every k_j
// from global memory again for every row, T²·HS floats per (b, h), the 32 lanes of a load
// 3·NH·HS floats apart (32 sectors of 32 bytes, where 32 neighbouring floats take 4), and redo
// the Q K^T product; the round trip through A moves 2·T² floats, coalesced: HS/2 times fewer.
//
// What the backward teaches. The same tiles: the rows kernel stages v and k tiles for 16 query
// rows (dA, dS, dq), the columns kernel stages q, dy, dS and A tiles for 16 key columns (dk,
// dv). FlashAttention's backward recomputes A from q, k and the row's log-sum-exp, because it
// never stores A; this model stores A anyway (above), so reading it costs less than the second
// Q K^T product that recomputing it would. Then the mask gradient,
//   dM_ij = sum_b (sum_h when shared) dS_bhij σ(-M_ij),
// a sum over the batch. Kernel 1 gives each mask entry one thread that walks all B (·NH) terms
// alone: for T = 16 that is 256 threads, too few to fill a GPU. Here the batch is cut into
// groups of MASK_GROUP_ROWS rows: stage 1 gives every (group, entry) a thread that sums its
// group's terms in order; stage 2 gives every entry a thread that adds the groups' partial sums
// in group order. No atomics, and the order of every addition is fixed, so the result is the
// same bits at every run (with atomicAdd the order, and so the rounding, would depend on thread
// timing, as FlexAttention's bias gradient does).
#pragma once
#include "attention.cuh"        // AttentionShape, head_vector, head_mask, sigmoid_of_minus
#include "attention/warp.cuh"   // ATTENTION_WARPS_PER_BLOCK, ATTENTION_THREADS, attention_backward_qkv_gpu2
#include "cpu_fast/vexp.h"      // vexp
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

constexpr int FLASH_ROWS_PER_WARP = 4;
constexpr int FLASH_QUERY_TILE = ATTENTION_WARPS_PER_BLOCK * FLASH_ROWS_PER_WARP;  // 16 query rows a block
constexpr int FLASH_KEY_TILE = WARP;                                               // 32 keys a tile, one a lane
constexpr int FLASH_MAX_HS = 128;  // a lane holds HS/32 <= 4 output dims of each of its rows
constexpr int FLASH_DIMS_PER_LANE = FLASH_MAX_HS / WARP;
constexpr int MASK_GROUP_ROWS = 8;  // batch rows summed by one thread in stage 1 of the mask gradient
// The kernels below are launched with ATTENTION_THREADS (their __launch_bounds__), and each warp owns
// FLASH_ROWS_PER_WARP rows (columns) of the tile: the block's warps must cover the tile exactly.
static_assert(ATTENTION_THREADS / WARP * FLASH_ROWS_PER_WARP == FLASH_QUERY_TILE, "the warps cover the query tile");

// the shared memory of a block: the query tile (16,HS), the key tile (32,HS+1), the value tile (32,HS)
inline size_t flash_shared_bytes(int HS) {
    return sizeof(float) * ((size_t)FLASH_QUERY_TILE * HS + (size_t)FLASH_KEY_TILE * (2 * HS + 1));
}

// The block's threads copy `rows` vectors of HS floats into a shared tile (row r at r·tile_stride):
// vector r is first[r·stride ...] for r < valid, zeros after. Thread t takes floats t, t+128, ...,
// so neighbouring threads read neighbouring floats (coalesced).
__device__ inline void stage_tile(float* tile, int tile_stride, const float* first, size_t stride, int rows, int valid,
                                  int HS) {
    for (int e = threadIdx.x; e < rows * HS; e += blockDim.x) {
        const int r = e / HS, d = e % HS;
        tile[r * tile_stride + d] = r < valid ? first[r * stride + d] : 0.0f;
    }
}

__global__ void __launch_bounds__(ATTENTION_THREADS)
attention_forward_kernel3(float* __restrict__ out, float* __restrict__ att, const float* __restrict__ qkv,
                          const float* __restrict__ mask_term, AttentionShape s) {
    // out (B,T,NH·HS), att (B,NH,T,T), qkv (B,T,3·NH·HS), mask_term log σ(M) (mask_heads,T,T) or nullptr;
    // block x = (b·NH + h)·tiles + tile: the 16 query rows of tile `tile` of (b, h)
    DYNAMIC_SHARED(float, shared);
    const int HS = s.HS, T = s.T, KSTRIDE = HS + 1;
    float* q_tile = shared;                               // (16, HS)
    float* k_tile = q_tile + FLASH_QUERY_TILE * HS;       // (32, HS+1)
    float* v_tile = k_tile + FLASH_KEY_TILE * KSTRIDE;    // (32, HS)
    const int tiles = (T + FLASH_QUERY_TILE - 1) / FLASH_QUERY_TILE;
    const int bh = blockIdx.x / tiles, b = bh / s.NH, h = bh % s.NH;
    const int row0 = (blockIdx.x % tiles) * FLASH_QUERY_TILE;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const float scale = 1.0f / sqrtf((float)HS);
    const float* mask_h = s.mask_heads ? head_mask(mask_term, s, h) : nullptr;  // (T,T) log σ(M) of head h

    const size_t token_stride = (size_t)3 * s.NH * HS;  // from one token's q (k, v) to the next one's
    float* att_bh = att + (size_t)bh * T * T;           // (T,T): A of (b, h), its scores until the end
    stage_tile(q_tile, HS, head_vector(qkv, s, 0, b, row0, h), token_stride, FLASH_QUERY_TILE, T - row0, HS);
    float row_max[FLASH_ROWS_PER_WARP], row_sum[FLASH_ROWS_PER_WARP];
    float acc[FLASH_ROWS_PER_WARP][FLASH_DIMS_PER_LANE];  // acc[r][k]: dim d = lane + 32k of row r
    UNROLL  // acc, row_max and row_sum stay in registers
    for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
        row_max[r] = -INFINITY;
        row_sum[r] = 0;
        UNROLL
        for (int k = 0; k < FLASH_DIMS_PER_LANE; k++) acc[r][k] = 0;
    }
    // the last key any row of the block may see
    const int block_last = s.causal && row0 + FLASH_QUERY_TILE < T ? row0 + FLASH_QUERY_TILE - 1 : T - 1;

    for (int key0 = 0; key0 <= block_last; key0 += FLASH_KEY_TILE) {
        __syncthreads();  // every warp is done with the last tile (and the query tile is written)
        const int keys = block_last - key0 + 1;  // in this tile, if fewer than 32
        stage_tile(k_tile, KSTRIDE, head_vector(qkv, s, 1, b, key0, h), token_stride, FLASH_KEY_TILE, keys, HS);
        stage_tile(v_tile, HS, head_vector(qkv, s, 2, b, key0, h), token_stride, FLASH_KEY_TILE, keys, HS);
        __syncthreads();  // the tile is in shared memory
        UNROLL  // acc, row_max and row_sum stay in registers
        for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
            const int row = warp * FLASH_ROWS_PER_WARP + r, i = row0 + row;
            const int last = s.causal ? i : T - 1;
            if (i >= T || key0 > last) continue;  // the same for the whole warp
            // lane's key j = key0 + lane: its score, or -inf where the row may not see it; the
            // score is kept in A's row, to be normalised after the last tile
            const int j = key0 + lane;
            float score = -INFINITY;
            if (j <= last) {
                float dot = 0;
                for (int d = 0; d < HS; d++) dot += q_tile[row * HS + d] * k_tile[lane * KSTRIDE + d];
                score = dot * scale + (mask_h ? mask_h[(size_t)i * T + j] : 0.0f);
                att_bh[(size_t)i * T + j] = score;
            }
            const float new_max = fmaxf(row_max[r], warp_max(score));  // finite: key0 <= last
            const float p = j <= last ? vexp(score - new_max) : 0.0f;
            const float rescale = row_max[r] == -INFINITY ? 0.0f : vexp(row_max[r] - new_max);
            row_sum[r] = row_sum[r] * rescale + warp_sum(p);
            UNROLL
            for (int k = 0; k < FLASH_DIMS_PER_LANE; k++) acc[r][k] *= rescale;
            for (int jj = 0; jj < FLASH_KEY_TILE; jj++) {
                const float p_jj = __shfl_sync(0xFFFFFFFFu, p, jj);  // key key0 + jj's weight, from its lane
                UNROLL
                for (int k = 0; k < FLASH_DIMS_PER_LANE; k++) {
                    const int d = lane + WARP * k;
                    if (d < HS) acc[r][k] += p_jj * v_tile[jj * HS + d];
                }
            }
            row_max[r] = new_max;
        }
    }

    UNROLL  // acc, row_max and row_sum stay in registers
    for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
        const int row = warp * FLASH_ROWS_PER_WARP + r, i = row0 + row;
        if (i >= T) continue;
        float* y = out + ((size_t)b * T + i) * s.NH * HS + h * HS;
        UNROLL
        for (int k = 0; k < FLASH_DIMS_PER_LANE; k++)
            if (lane + WARP * k < HS) y[lane + WARP * k] = acc[r][k] / row_sum[r];
        // A_ij = exp(S_ij - m) / l in place over the scores the tile pass wrote: lane l wrote keys
        // l, l+32, ... of this row, the ones it reads back here; past the last key (causal), 0
        float* att_row = att_bh + (size_t)i * T;
        const int last = s.causal ? i : T - 1;
        for (int j = lane; j < T; j += WARP) att_row[j] = j <= last ? vexp(att_row[j] - row_max[r]) / row_sum[r] : 0.0f;
    }
}

// ----------------------------------------------------------------------------
// backward: the same tiles. The rows kernel gives a block 16 query rows of one (b, h), the
// columns kernel 16 key columns; each stages what its rows (columns) share in shared memory.

// the shared memory of the rows kernel: the dy tile (16,HS) and one v or k tile (32,HS+1)
inline size_t flash_rows_shared_bytes(int HS) {
    return sizeof(float) * ((size_t)FLASH_QUERY_TILE * HS + (size_t)FLASH_KEY_TILE * (HS + 1));
}

// Per query row i, two sweeps over the key tiles:
//   1. v tiles: dA_ij = dy_i·v_j (lane j), stored in dS's row; each lane sums A_ij dA_ij
//   2. k tiles: dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik), written; dq_i += sum_j dS_ij k_j / sqrt(HS)
// (the weighted sum must be complete before any dS_ij exists: hence two sweeps). A lane handles
// the same key j in both sweeps, so it reads back the dA it wrote itself.
__global__ void __launch_bounds__(ATTENTION_THREADS)
attention_backward_rows_kernel3(float* __restrict__ dqkv, float* __restrict__ dscores, const float* __restrict__ dout,
                                const float* __restrict__ qkv, const float* __restrict__ att, AttentionShape s) {
    // dqkv (B,T,3·NH·HS) dq added; dscores (B,NH,T,T) dS written; dout (B,T,NH·HS); att (B,NH,T,T)
    DYNAMIC_SHARED(float, shared);
    const int HS = s.HS, T = s.T, KSTRIDE = HS + 1;
    float* dy_tile = shared;                          // (16, HS)
    float* kv_tile = dy_tile + FLASH_QUERY_TILE * HS;  // (32, HS+1): v in sweep 1, k in sweep 2
    const int tiles = (T + FLASH_QUERY_TILE - 1) / FLASH_QUERY_TILE;
    const int bh = blockIdx.x / tiles, b = bh / s.NH, h = bh % s.NH;
    const int row0 = (blockIdx.x % tiles) * FLASH_QUERY_TILE;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const size_t block = (size_t)bh * T * T;  // (b, h)'s (T,T) in att and dscores
    const size_t token_stride = (size_t)3 * s.NH * HS, dy_stride = (size_t)s.NH * HS;
    const float* dy_first = dout + ((size_t)b * T + row0) * dy_stride + h * HS;  // dy of query row0, head h
    stage_tile(dy_tile, HS, dy_first, dy_stride, FLASH_QUERY_TILE, T - row0, HS);
    const int block_last = s.causal && row0 + FLASH_QUERY_TILE < T ? row0 + FLASH_QUERY_TILE - 1 : T - 1;

    float weighted[FLASH_ROWS_PER_WARP] = {};  // this lane's part of sum_j A_ij dA_ij
    for (int key0 = 0; key0 <= block_last; key0 += FLASH_KEY_TILE) {
        __syncthreads();
        const int keys = block_last - key0 + 1;
        stage_tile(kv_tile, KSTRIDE, head_vector(qkv, s, 2, b, key0, h), token_stride, FLASH_KEY_TILE, keys, HS);
        __syncthreads();
        UNROLL  // weighted stays in registers
        for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
            const int row = warp * FLASH_ROWS_PER_WARP + r, i = row0 + row, j = key0 + lane;
            if (i >= T || j > (s.causal ? i : T - 1)) continue;
            float da = 0;
            for (int d = 0; d < HS; d++) da += dy_tile[row * HS + d] * kv_tile[lane * KSTRIDE + d];
            dscores[block + (size_t)i * T + j] = da;
            weighted[r] += att[block + (size_t)i * T + j] * da;
        }
    }
    float row_weighted[FLASH_ROWS_PER_WARP];
    UNROLL
    for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) row_weighted[r] = warp_sum(weighted[r]);

    float acc[FLASH_ROWS_PER_WARP][FLASH_DIMS_PER_LANE] = {};  // dq_i[lane + 32k] / scale
    for (int key0 = 0; key0 <= block_last; key0 += FLASH_KEY_TILE) {
        __syncthreads();
        const int keys = block_last - key0 + 1;
        stage_tile(kv_tile, KSTRIDE, head_vector(qkv, s, 1, b, key0, h), token_stride, FLASH_KEY_TILE, keys, HS);
        __syncthreads();
        UNROLL  // acc and row_weighted stay in registers
        for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
            const int row = warp * FLASH_ROWS_PER_WARP + r, i = row0 + row, last = s.causal ? i : T - 1;
            if (i >= T || key0 > last) continue;  // the same for the whole warp
            const int j = key0 + lane;
            float ds = 0;
            if (j <= last) {
                float* ds_ij = dscores + block + (size_t)i * T + j;
                ds = att[block + (size_t)i * T + j] * (*ds_ij - row_weighted[r]);
                *ds_ij = ds;
            }
            for (int jj = 0; jj < FLASH_KEY_TILE; jj++) {
                const float ds_jj = __shfl_sync(0xFFFFFFFFu, ds, jj);
                UNROLL
                for (int k = 0; k < FLASH_DIMS_PER_LANE; k++) {
                    const int d = lane + WARP * k;
                    if (d < HS) acc[r][k] += ds_jj * kv_tile[jj * KSTRIDE + d];
                }
            }
        }
    }
    const float scale = 1.0f / sqrtf((float)HS);
    UNROLL
    for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
        const int i = row0 + warp * FLASH_ROWS_PER_WARP + r;
        if (i >= T) continue;
        float* dq = dqkv + (head_vector(qkv, s, 0, b, i, h) - qkv);
        UNROLL
        for (int k = 0; k < FLASH_DIMS_PER_LANE; k++)
            if (lane + WARP * k < HS) dq[lane + WARP * k] += acc[r][k] * scale;
        for (int j = (s.causal ? i : T - 1) + 1 + lane; j < T; j += WARP) dscores[block + (size_t)i * T + j] = 0.0f;
    }
}

// the shared memory of the columns kernel: q and dy tiles (32,HS), dS and A tiles (32,16+1)
inline size_t flash_columns_shared_bytes(int HS) {
    return sizeof(float) * (2 * (size_t)FLASH_KEY_TILE * HS + 2 * (size_t)FLASH_KEY_TILE * (FLASH_QUERY_TILE + 1));
}

// Per key column j, one sweep over tiles of 32 query rows (from j on, when causal: A and dS are
// zero above the diagonal): dk_j += sum_i dS_ij q_i / sqrt(HS), dv_j += sum_i A_ij dy_i, lanes
// over d. The block's 16 columns of dS and A for the tile's 32 rows are staged in shared memory
// row by row (16 neighbours in memory: coalesced), and then read by every lane of a warp at
// once (one address: a broadcast).
__global__ void __launch_bounds__(ATTENTION_THREADS)
attention_backward_columns_kernel3(float* __restrict__ dqkv, const float* __restrict__ dscores,
                                   const float* __restrict__ dout, const float* __restrict__ qkv,
                                   const float* __restrict__ att, AttentionShape s) {
    // dqkv (B,T,3·NH·HS) dk and dv added; the rest as in the rows kernel
    DYNAMIC_SHARED(float, shared);
    const int HS = s.HS, T = s.T, CSTRIDE = FLASH_QUERY_TILE + 1;
    float* q_tile = shared;                             // (32, HS)
    float* dy_tile = q_tile + FLASH_KEY_TILE * HS;      // (32, HS)
    float* ds_tile = dy_tile + FLASH_KEY_TILE * HS;     // (32, 16+1)
    float* att_tile = ds_tile + FLASH_KEY_TILE * CSTRIDE;  // (32, 16+1)
    const int tiles = (T + FLASH_QUERY_TILE - 1) / FLASH_QUERY_TILE;
    const int bh = blockIdx.x / tiles, b = bh / s.NH, h = bh % s.NH;
    const int col0 = (blockIdx.x % tiles) * FLASH_QUERY_TILE;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const size_t block = (size_t)bh * T * T;
    float dk_acc[FLASH_ROWS_PER_WARP][FLASH_DIMS_PER_LANE] = {}, dv_acc[FLASH_ROWS_PER_WARP][FLASH_DIMS_PER_LANE] = {};
    for (int query0 = s.causal ? col0 : 0; query0 < T; query0 += FLASH_KEY_TILE) {
        __syncthreads();
        const int queries = T - query0;  // in this tile, if fewer than 32
        stage_tile(q_tile, HS, head_vector(qkv, s, 0, b, query0, h), (size_t)3 * s.NH * HS, FLASH_KEY_TILE, queries,
                   HS);
        stage_tile(dy_tile, HS, dout + ((size_t)b * T + query0) * s.NH * HS + h * HS, (size_t)s.NH * HS,
                   FLASH_KEY_TILE, queries, HS);
        for (int e = threadIdx.x; e < FLASH_KEY_TILE * FLASH_QUERY_TILE; e += blockDim.x) {
            const int ii = e / FLASH_QUERY_TILE, c = e % FLASH_QUERY_TILE, i = query0 + ii, j = col0 + c;
            const bool inside = i < T && j < T;
            ds_tile[ii * CSTRIDE + c] = inside ? dscores[block + (size_t)i * T + j] : 0.0f;
            att_tile[ii * CSTRIDE + c] = inside ? att[block + (size_t)i * T + j] : 0.0f;
        }
        __syncthreads();
        UNROLL  // dk_acc and dv_acc stay in registers
        for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
            const int c = warp * FLASH_ROWS_PER_WARP + r;
            if (col0 + c >= T) continue;
            for (int ii = 0; ii < FLASH_KEY_TILE; ii++) {
                const float ds = ds_tile[ii * CSTRIDE + c], a = att_tile[ii * CSTRIDE + c];
                UNROLL
                for (int k = 0; k < FLASH_DIMS_PER_LANE; k++) {
                    const int d = lane + WARP * k;
                    if (d >= HS) continue;
                    dk_acc[r][k] += ds * q_tile[ii * HS + d];
                    dv_acc[r][k] += a * dy_tile[ii * HS + d];
                }
            }
        }
    }
    const float scale = 1.0f / sqrtf((float)HS);
    UNROLL
    for (int r = 0; r < FLASH_ROWS_PER_WARP; r++) {
        const int j = col0 + warp * FLASH_ROWS_PER_WARP + r;
        if (j >= T) continue;
        float* dk = dqkv + (head_vector(qkv, s, 1, b, j, h) - qkv);
        float* dv = dqkv + (head_vector(qkv, s, 2, b, j, h) - qkv);
        UNROLL
        for (int k = 0; k < FLASH_DIMS_PER_LANE; k++) {
            const int d = lane + WARP * k;
            if (d >= HS) continue;
            dk[d] += dk_acc[r][k] * scale;
            dv[d] += dv_acc[r][k];
        }
    }
}

// stage 1: thread (group g, mask entry m) sums dS over its group's batch rows (and the heads of a
// shared mask), in order, and writes the sum in place over dS[first row of the group, first head
// of m, ij]: an entry that only this thread reads, and reads before it writes.
__global__ void attention_mask_partials_kernel3(float* dscores, AttentionShape s) {
    // dscores (B,NH,T,T): dS in; group g's partial sums out, at b = g·MASK_GROUP_ROWS
    const int count = s.mask_heads * s.T * s.T, groups = (s.B + MASK_GROUP_ROWS - 1) / MASK_GROUP_ROWS;
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)count * groups) return;
    const int m = idx % count, g = idx / count, TT = s.T * s.T, ij = m % TT, mh = m / TT;
    const int h_first = s.mask_heads == 1 ? 0 : mh, h_last = s.mask_heads == 1 ? s.NH - 1 : mh;
    const int b_first = g * MASK_GROUP_ROWS, b_end = b_first + MASK_GROUP_ROWS < s.B ? b_first + MASK_GROUP_ROWS : s.B;
    float sum = 0;
    for (int b = b_first; b < b_end; b++)
        for (int h = h_first; h <= h_last; h++) sum += dscores[((size_t)b * s.NH + h) * TT + ij];
    dscores[((size_t)b_first * s.NH + h_first) * TT + ij] = sum;
}

// stage 2: dM_m += (sum over groups, in order, of the partial sums) σ(-M_m)
__global__ void attention_mask_sum_kernel3(float* __restrict__ dmask, const float* __restrict__ dscores,
                                           const float* __restrict__ mask, AttentionShape s) {
    const int count = s.mask_heads * s.T * s.T, groups = (s.B + MASK_GROUP_ROWS - 1) / MASK_GROUP_ROWS;
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= count) return;
    const int TT = s.T * s.T, ij = m % TT, h_first = s.mask_heads == 1 ? 0 : m / TT;
    float sum = 0;
    for (int g = 0; g < groups; g++) sum += dscores[((size_t)g * MASK_GROUP_ROWS * s.NH + h_first) * TT + ij];
    dmask[m] += sum * sigmoid_of_minus(mask[m]);
}

// --profile's walk of a lane: per key tile, for each of its warp's 4 rows, a dot product of HS
// dims and the tile's 32 keys over its up to 4 dims of the output
inline double flash_walk(AttentionShape s) {
    return (double)ceil_div(s.T, FLASH_KEY_TILE) * FLASH_ROWS_PER_WARP * (s.HS + FLASH_KEY_TILE * FLASH_DIMS_PER_LANE);
}

inline void attention_forward_gpu3(float* out, float* att, const float* qkv, const float* mask_term,
                                   AttentionShape s) {
    const unsigned tiles = ceil_div(s.T, FLASH_QUERY_TILE);
    launch_kernel<attention_forward_kernel3>(attention_cost(s, 1, 2, flash_walk(s)), tiles * s.B * s.NH,
                                             ATTENTION_THREADS, flash_shared_bytes(s.HS), out, att, qkv, mask_term, s);
}

// dM from dS (which it overwrites: dS is scratch)
inline void attention_mask_backward_gpu3(float* dmask, float* dscores, const float* mask, AttentionShape s) {
    const size_t count = (size_t)s.mask_heads * s.T * s.T, groups = ceil_div(s.B, MASK_GROUP_ROWS);
    const double heads = (double)s.NH / s.mask_heads;  // the heads of one mask entry
    launch_kernel<attention_mask_partials_kernel3>(attention_mask_cost(s, MASK_GROUP_ROWS * heads),
                                                   ceil_div(count * groups, BLOCK), BLOCK, 0, dscores, s);
    launch_kernel<attention_mask_sum_kernel3>(attention_mask_cost(s, (double)groups), ceil_div(count, BLOCK), BLOCK,
                                              0, dmask, dscores, mask, s);
}

// dq, dk, dv and dM. With dS given (dout = nullptr: the qk-opt fit, once a run) version 2's kernels.
inline void attention_backward_gpu3(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                    const float* att, const float* mask, AttentionShape s) {
    if (!dout) attention_backward_qkv_gpu2(dqkv, dscores, dout, qkv, att, s);
    else {
        const unsigned blocks = ceil_div(s.T, FLASH_QUERY_TILE) * s.B * s.NH;
        const LaunchCost cost = attention_cost(s, 2, 2, 2 * flash_walk(s));
        launch_kernel<attention_backward_rows_kernel3>(cost, blocks, ATTENTION_THREADS, flash_rows_shared_bytes(s.HS),
                                                       dqkv, dscores, dout, qkv, att, s);
        launch_kernel<attention_backward_columns_kernel3>(cost, blocks, ATTENTION_THREADS,
                                                          flash_columns_shared_bytes(s.HS), dqkv, dscores, dout, qkv,
                                                          att, s);
    }
    if (s.mask_heads) attention_mask_backward_gpu3(dmask, dscores, mask, s);
}
