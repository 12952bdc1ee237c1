// layers/embedding.cuh: what turns token ids into the first residual stream, in two forms:
//   token embedding (the default): a learned row of wte per token, plus a learned row of wpe
//   per position;
//   scalar embedding (--encoding scalar): a token that stands for a number is that number
//   times one learned vector wval.
// Each as one block: the math in a few comment lines; <layer>_forward_cpu / _backward_cpu
// (plain loops, templated on the float type so the tests can run them in double); kernel1,
// the naive port of the CPU loop; and <layer>_forward / _backward(dev, ...), which the model
// calls and which picks the device. Every backward accumulates (+=) into its gradients.
// Kernel 2 of both backwards (Kernels::fast_layers), at the end, sums over the batch without a
// serial walk: the position gradient as column sums, the token gradient over each token's rows.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>
#include "layers/column_sums.cuh"  // column_sums_gpu, column_scratch, warp_column_sum, COLUMN_GROUP_ROWS
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels

// ----------------------------------------------------------------------------
// Embedding: a token id looks up its row of wte, and position t adds row t of wpe.
//   out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
// backward: dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += sum_b dout[b,t,:]

template <typename F>
void embedding_forward_cpu(F* out, const int* tokens, const F* wte, const F* wpe, int B, int T, int C) {
    // out (B,T,C), tokens (B,T), wte (V,C), wpe (T,C)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int bt = 0; bt < B * T; bt++) {
        const F* tok_row = wte + (size_t)tokens[bt] * C;
        const F* pos_row = wpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) out[(size_t)bt * C + c] = tok_row[c] + pos_row[c];
    }
}

// One channel c of the embedding gradients, walking all positions in order: the CPU and the
// GPU give each channel to one thread, so there are no races and the summation order is fixed.
template <typename F>
__host__ __device__ inline void embedding_channel_backward(F* dwte, F* dwpe, const F* dout, const int* tokens,
                                                           int B, int T, int C, int c) {
    for (int bt = 0; bt < B * T; bt++) {
        F g = dout[(size_t)bt * C + c];
        dwte[(size_t)tokens[bt] * C + c] += g;
        dwpe[(size_t)(bt % T) * C + c] += g;
    }
}

template <typename F>
void embedding_backward_cpu(F* dwte, F* dwpe, const F* dout, const int* tokens, int B, int T, int C) {
    // dwte (V,C), dwpe (T,C), dout (B,T,C), tokens (B,T)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int c = 0; c < C; c++) embedding_channel_backward(dwte, dwpe, dout, tokens, B, T, C, c);
}

__global__ void embedding_forward_kernel1(float* out, const int* tokens, const float* wte, const float* wpe,
                                          int B, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B*T*C
    if (idx >= (size_t)B * T * C) return;
    int c = (int)(idx % C), bt = (int)(idx / C);
    out[idx] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
}

// Only C threads, each walking all B·T rows in turn: the serial walk that kernel 2 removes.
__global__ void embedding_backward_kernel1(float* dwte, float* dwpe, const float* dout, const int* tokens,
                                           int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) embedding_channel_backward(dwte, dwpe, dout, tokens, B, T, C, c);
}

inline void embedding_forward(Device dev, float* out, const int* tokens, const float* wte, const float* wpe,
                              int B, int T, int C) {
    if (dev == DEVICE_CPU) return embedding_forward_cpu(out, tokens, wte, wpe, B, T, C);
    launch_kernel<embedding_forward_kernel1>(pointwise_cost((size_t)B * T * C, 2, 1),
                                             ceil_div((size_t)B * T * C, BLOCK), BLOCK, 0, out, tokens, wte, wpe, B, T,
                                             C);
}

// ----------------------------------------------------------------------------
// Scalar embedding (--encoding scalar): a token that stands for a number (value[v] != 0, e.g.
// a bit ±1) is that number times one learned vector wval; a token without a value (CLS) keeps
// its row of wte. A bit's embedding is then linear in its value, so the query-key product of
// two bits has a term in x_i·x_j (up to the LayerNorm between them).
//   out[b,t,:] = (value[v] != 0 ? value[v] * wval[:] : wte[v,:]) + wpe[t,:],  v = tokens[b,t]
// backward: value[v] != 0: dwval[:] += value[v] * dout[b,t,:];  else dwte[v,:] += dout[b,t,:]
//           dwpe[t,:] += sum_b dout[b,t,:]      (wte rows of valued tokens get no gradient)
// value (V) is a float table: host memory on the CPU, device memory on the GPU.

template <typename F>
__host__ __device__ inline F scalar_embedding_element(const int* tokens, const float* value, const F* wte,
                                                      const F* wval, const F* wpe, int T, int C, int bt, int c) {
    // out[bt, c] of the forward above
    int v = tokens[bt];
    F token_part = value[v] != 0.0f ? F(value[v]) * wval[c] : wte[(size_t)v * C + c];
    return token_part + wpe[(size_t)(bt % T) * C + c];
}

// One channel c of the gradients, all positions in order (one thread per channel, as above:
// no races, a fixed summation order).
template <typename F>
__host__ __device__ inline void scalar_embedding_channel_backward(F* dwte, F* dwval, F* dwpe, const F* dout,
                                                                  const int* tokens, const float* value,
                                                                  int B, int T, int C, int c) {
    F dv = 0;
    for (int bt = 0; bt < B * T; bt++) {
        F g = dout[(size_t)bt * C + c];
        int v = tokens[bt];
        if (value[v] != 0.0f) dv += F(value[v]) * g;
        else dwte[(size_t)v * C + c] += g;
        dwpe[(size_t)(bt % T) * C + c] += g;
    }
    dwval[c] += dv;
}

template <typename F>
void scalar_embedding_forward_cpu(F* out, const int* tokens, const float* value, const F* wte, const F* wval,
                                  const F* wpe, int B, int T, int C) {
    // out (B,T,C), tokens (B,T), value (V), wte (V,C), wval (C), wpe (T,C)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++)
            out[(size_t)bt * C + c] = scalar_embedding_element(tokens, value, wte, wval, wpe, T, C, bt, c);
}

template <typename F>
void scalar_embedding_backward_cpu(F* dwte, F* dwval, F* dwpe, const F* dout, const int* tokens,
                                   const float* value, int B, int T, int C) {
    // dwte (V,C), dwval (C), dwpe (T,C), dout (B,T,C), tokens (B,T), value (V)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int c = 0; c < C; c++) scalar_embedding_channel_backward(dwte, dwval, dwpe, dout, tokens, value, B, T, C, c);
}

__global__ void scalar_embedding_forward_kernel1(float* out, const int* tokens, const float* value,
                                                 const float* wte, const float* wval, const float* wpe,
                                                 int B, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B*T*C
    if (idx < (size_t)B * T * C)
        out[idx] = scalar_embedding_element(tokens, value, wte, wval, wpe, T, C, (int)(idx / C), (int)(idx % C));
}

__global__ void scalar_embedding_backward_kernel1(float* dwte, float* dwval, float* dwpe, const float* dout,
                                                  const int* tokens, const float* value, int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per channel
    if (c < C) scalar_embedding_channel_backward(dwte, dwval, dwpe, dout, tokens, value, B, T, C, c);
}

inline void scalar_embedding_forward(Device dev, float* out, const int* tokens, const float* value,
                                     const float* wte, const float* wval, const float* wpe, int B, int T, int C) {
    if (dev == DEVICE_CPU) return scalar_embedding_forward_cpu(out, tokens, value, wte, wval, wpe, B, T, C);
    launch_kernel<scalar_embedding_forward_kernel1>(pointwise_cost((size_t)B * T * C, 2, 1),
                                                    ceil_div((size_t)B * T * C, BLOCK), BLOCK, 0, out, tokens, value,
                                                    wte, wval, wpe, B, T, C);
}

// ----------------------------------------------------------------------------
// Kernel 2 of both backwards (Kernels::fast_layers): the sums over the batch without a thread
// that walks every row (layers/column_sums.cuh teaches the pattern).
//   dwpe[t,:] += sum_b dout[b,t,:]: the column sums of dout read as a (B, T·C) matrix.
//   dwte[v,:] += the sum of dout over the rows where token v stands. The host, which has the
//     tokens, lists each token's rows (TokenRows, in row order) and cuts each list into chunks
//     of COLUMN_GROUP_ROWS rows. Stage 1: a thread per (chunk, channel) sums its chunk's rows;
//     stage 2: a warp per (token, channel) adds the token's chunks (warp_column_sum). The same
//     fixed order at every run, no atomics.
// The scalar embedding's dwval[c] is then sum_v value[v]·S_v[c], S_v the token's row sum, over
// the valued tokens in list order: a warp per channel walks the batch's distinct tokens.

// The rows (b·T + t) of a batch grouped by token, built on the host for each batch, in one int
// array of a fixed layout (so that a kernel's pointers into it are the same for every batch,
// and a captured graph can replay them), held on the host and on the device:
//   counts (2): the batch's chunks and distinct tokens, which the kernels read;
//   rows (BT): the row indices, token by token (tokens in increasing id), each token's in order;
//   chunk_start (max_chunks + 1): chunk k is rows[chunk_start[k] ... chunk_start[k + 1]);
//   tokens (max_distinct): the distinct tokens; token_chunk (max_distinct + 1): token u's chunks are
//   token_chunk[u] ... token_chunk[u + 1].
// A token of n rows has ceil(n / COLUMN_GROUP_ROWS) chunks, so a batch has at most
// min(V, BT) + BT / COLUMN_GROUP_ROWS of them (rounded up): the launches cover that many.
struct TokenRows {
    int BT = 0, V = 0;
    int chunks = 0, distinct = 0;  // the last batch's, on the host too (for --profile's costs)
    std::vector<int> host;         // token_rows_capacity(BT, V) ints
    int* device = nullptr;         // as many, allocated by the model
    int max_distinct() const { return std::min(V, BT); }
    int max_chunks() const { return std::min(BT, max_distinct() + (BT + COLUMN_GROUP_ROWS - 1) / COLUMN_GROUP_ROWS); }
    size_t chunk_start_at() const { return 2 + (size_t)BT; }
    size_t tokens_at() const { return chunk_start_at() + max_chunks() + 1; }
    size_t token_chunk_at() const { return tokens_at() + max_distinct(); }
    const int* counts() const { return device; }
    const int* rows() const { return device + 2; }
    const int* chunk_start() const { return device + chunk_start_at(); }
    const int* tokens() const { return device + tokens_at(); }
    const int* token_chunk() const { return device + token_chunk_at(); }
};

// the ints of a TokenRows array for BT rows of tokens below V
inline size_t token_rows_capacity(int BT, int V) {
    TokenRows shape;
    shape.BT = BT, shape.V = V;
    return shape.token_chunk_at() + shape.max_distinct() + 1;
}

// Lists the rows of tokens (BT, ids below V) by token (a counting sort) into r.host; the caller
// uploads r.host to r.device (the model with its batch, in one copy).
inline void token_rows_build(TokenRows& r, const int* tokens, int BT, int V) {
    std::vector<int> count(V + 1, 0);  // count[v + 1]: the rows of token v; then their start
    for (int i = 0; i < BT; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            throw std::logic_error("token_rows_build: token " + std::to_string(tokens[i]) + " is not below V");
        count[tokens[i] + 1]++;
    }
    r.BT = BT, r.V = V;
    r.host.assign(token_rows_capacity(BT, V), 0);
    int* chunk_start = &r.host[r.chunk_start_at()];
    int* distinct = &r.host[r.tokens_at()];
    int* token_chunk = &r.host[r.token_chunk_at()];
    int chunks = 0, tokens_seen = 0;
    for (int v = 0; v < V; v++) {
        const int n = count[v + 1];
        count[v + 1] += count[v];
        if (n == 0) continue;
        distinct[tokens_seen] = v;
        token_chunk[tokens_seen++] = chunks;
        for (int first = count[v]; first < count[v] + n; first += COLUMN_GROUP_ROWS) chunk_start[chunks++] = first;
    }
    chunk_start[chunks] = BT;
    token_chunk[tokens_seen] = chunks;
    int* rows = &r.host[2];
    for (int i = 0; i < BT; i++) rows[count[tokens[i]]++] = i;  // row order within each token
    r.chunks = r.host[0] = chunks;
    r.distinct = r.host[1] = tokens_seen;
}

// stage 1: thread (chunk k, channel c) sums dout over the chunk's rows
__global__ void token_partials_kernel2(float* __restrict__ partials, const float* __restrict__ dout,
                                       const int* __restrict__ counts, const int* __restrict__ rows,
                                       const int* __restrict__ chunk_start, int C) {
    // partials (chunks, C), dout (BT, C), counts (2: chunks, distinct), rows (BT), chunk_start (chunks + 1)
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)counts[0] * C) return;
    const int c = idx % C, k = idx / C;
    float sum = 0;
    for (int r = chunk_start[k]; r < chunk_start[k + 1]; r++) sum += dout[(size_t)rows[r] * C + c];
    partials[idx] = sum;
}

// stage 2: warp (token u, channel c) adds the token's chunks into dwte[tokens[u], c]
__global__ void token_gradient_kernel2(float* __restrict__ dwte, const float* __restrict__ partials,
                                       const int* __restrict__ counts, const int* __restrict__ tokens,
                                       const int* __restrict__ token_chunk, int C) {
    // dwte (V, C), partials (chunks, C), counts (2: chunks, distinct), tokens (distinct), token_chunk (distinct + 1)
    const size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP;
    if (w >= (size_t)counts[1] * C) return;  // the whole warp
    const int u = w / C, c = w % C;
    const float sum = warp_column_sum(partials, token_chunk[u], token_chunk[u + 1], C, c, lane);
    if (lane == 0) dwte[(size_t)tokens[u] * C + c] += sum;
}

// stage 2 of the scalar embedding: warp c walks the distinct tokens in order; a valued token's
// sum goes into dwval[c] times its value, another's into its row of dwte
__global__ void scalar_token_gradient_kernel2(float* __restrict__ dwte, float* __restrict__ dwval,
                                              const float* __restrict__ partials, const int* __restrict__ counts,
                                              const int* __restrict__ tokens, const int* __restrict__ token_chunk,
                                              const float* __restrict__ value, int C) {
    // dwte (V, C), dwval (C), partials (chunks, C), counts (2: chunks, distinct), tokens (distinct),
    // token_chunk (distinct + 1), value (V)
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (c >= C) return;  // the whole warp
    float dv = 0;
    for (int u = 0; u < counts[1]; u++) {
        const int v = tokens[u];
        const float sum = warp_column_sum(partials, token_chunk[u], token_chunk[u + 1], C, c, lane);
        if (value[v] != 0.0f) dv += value[v] * sum;
        else if (lane == 0) dwte[(size_t)v * C + c] += sum;
    }
    if (lane == 0) dwval[c] += dv;
}

// stage 1 for either embedding: the chunk sums of dout, in the column scratch
// (its launch covers max_chunks, so that it is the same launch for every batch)
inline float* token_partials_gpu(const TokenRows& by_token, const float* dout, int C) {
    float* partials = column_scratch((size_t)by_token.max_chunks() * C);
    const double rows = by_token.BT, chunks = by_token.chunks;
    const LaunchCost cost{4.0 * (rows * C + 2 * rows + chunks * C), rows * C, COLUMN_GROUP_ROWS};  // + rows, starts
    launch_kernel<token_partials_kernel2>(cost, ceil_div((size_t)by_token.max_chunks() * C, BLOCK), BLOCK, 0, partials,
                                          dout, by_token.counts(), by_token.rows(), by_token.chunk_start(), C);
    return partials;
}

// kernel 1 of either backward for --profile: a thread per channel walks all B·T rows
inline LaunchCost embedding_kernel1_cost(int B, int T, int C) {
    const double BTC = (double)B * T * C;
    return {4.0 * (BTC + 2.0 * B * T + 4.0 * T * C), 2 * BTC, (double)B * T};
}

// by_token: the batch's TokenRows (kernel 2 on the GPU; unused otherwise)
inline void embedding_backward(Device dev, const Kernels& kernels, float* dwte, float* dwpe, const float* dout,
                               const int* tokens, const TokenRows& by_token, int B, int T, int C) {
    if (dev == DEVICE_CPU) return embedding_backward_cpu(dwte, dwpe, dout, tokens, B, T, C);
    if (!kernels.fast_layers)
        return launch_kernel<embedding_backward_kernel1>(embedding_kernel1_cost(B, T, C), ceil_div(C, 64), 64, 0, dwte,
                                                         dwpe, dout, tokens, B, T, C);
    column_sums_gpu(dwpe, dout, B, T * C);
    const float* partials = token_partials_gpu(by_token, dout, C);
    const size_t warps = (size_t)by_token.max_distinct() * C;  // the bound, as for stage 1
    launch_kernel<token_gradient_kernel2>(column_partials_sum_cost(by_token.chunks, C),
                                          ceil_div(warps, COLUMN_WARPS_PER_BLOCK), BLOCK, 0, dwte, partials,
                                          by_token.counts(), by_token.tokens(), by_token.token_chunk(), C);
}

inline void scalar_embedding_backward(Device dev, const Kernels& kernels, float* dwte, float* dwval, float* dwpe,
                                      const float* dout, const int* tokens, const float* value,
                                      const TokenRows& by_token, int B, int T, int C) {
    if (dev == DEVICE_CPU) return scalar_embedding_backward_cpu(dwte, dwval, dwpe, dout, tokens, value, B, T, C);
    if (!kernels.fast_layers)
        return launch_kernel<scalar_embedding_backward_kernel1>(embedding_kernel1_cost(B, T, C), ceil_div(C, 64), 64, 0,
                                                                dwte, dwval, dwpe, dout, tokens, value, B, T, C);
    column_sums_gpu(dwpe, dout, B, T * C);
    const float* partials = token_partials_gpu(by_token, dout, C);
    LaunchCost cost = column_partials_sum_cost(by_token.chunks, C);
    cost.walk = by_token.distinct + (double)by_token.chunks / WARP;  // a lane: each token, then its chunks
    launch_kernel<scalar_token_gradient_kernel2>(cost, ceil_div(C, COLUMN_WARPS_PER_BLOCK), BLOCK, 0, dwte, dwval,
                                                 partials, by_token.counts(), by_token.tokens(), by_token.token_chunk(),
                                                 value, C);
}
