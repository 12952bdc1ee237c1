// layers/patch_embedding.cuh: what turns an image into the first residual stream of a Vision
// Transformer, and the mean pooling a ViT's readout may read instead of CLS.
//   patchify:   the image cut into P x P squares, each flattened channel-first
//   (a linear layer, layers/matmul.cuh, maps each flattened patch to C: the patch embedding)
//   assemble:   CLS first, then the embedded patches, plus the position embedding
//   mean pool:  the mean of the patch tokens' final residual stream (--pool mean)
// The three steps patchify -> matmul -> assemble are exactly a Conv2d of kernel and stride P
// followed by flatten(2).transpose(1, 2) and torch.cat([cls, x]) + pos_embed, as in timm's
// VisionTransformer: patch.weight (C, channels·P·P) is the Conv2d weight (C, channels, P, P)
// reshaped, so either side loads the other's weights. Blocks as everywhere: the math, the CPU
// loops, kernel1 (the naive port), the dispatcher.
#pragma once
#include "layers/column_sums.cuh"  // column_sums_gpu: kernel 2 of dcls and dwpe
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels

// ----------------------------------------------------------------------------
// Patchify: patch p = (pr, pc) (row-major over the H/P x W/P grid), element k = (ch, i, j):
//   patches[b, p, ch·P·P + i·P + j] = pixels[b, ch, pr·P + i, pc·P + j]
// A permutation of the pixels: no parameters, and no backward (the pixels are the input).

__host__ __device__ inline size_t patch_source_index(size_t out_index, int channels, int H, int W, int P) {
    // the pixel that patches[out_index] copies, for patches (B, NP, channels·P·P)
    const int PP = P * P, K = channels * PP, cols = W / P, NP = (H / P) * cols;
    const int k = (int)(out_index % K);
    const size_t bp = out_index / K;
    const int p = (int)(bp % NP);
    const size_t b = bp / NP;
    const int ch = k / PP, i = (k % PP) / P, j = k % P;
    const int y = (p / cols) * P + i, x = (p % cols) * P + j;
    return ((b * channels + ch) * H + y) * W + x;
}

template <typename F>
void patchify_forward_cpu(F* patches, const F* pixels, int B, int channels, int H, int W, int P) {
    // patches (B, NP, channels·P·P), pixels (B, channels, H, W); NP = (H/P)·(W/P)
    const size_t n = (size_t)B * channels * (H / P) * P * (W / P) * P;
    #pragma omp parallel for if (worth_threads(n))
    for (size_t idx = 0; idx < n; idx++) patches[idx] = pixels[patch_source_index(idx, channels, H, W, P)];
}

__global__ void patchify_forward_kernel1(float* __restrict__ patches, const float* __restrict__ pixels, int B,
                                         int channels, int H, int W, int P) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B·NP·channels·P·P
    if (idx < (size_t)B * channels * (H / P) * P * (W / P) * P)
        patches[idx] = pixels[patch_source_index(idx, channels, H, W, P)];
}

inline void patchify_forward(Device dev, float* patches, const float* pixels, int B, int channels, int H, int W,
                             int P) {
    if (dev == DEVICE_CPU) return patchify_forward_cpu(patches, pixels, B, channels, H, W, P);
    const size_t n = (size_t)B * channels * (H / P) * P * (W / P) * P;
    launch_kernel<patchify_forward_kernel1>(pointwise_cost(n, 1, 1, 0), ceil_div(n, BLOCK), BLOCK, 0, patches, pixels,
                                            B, channels, H, W, P);
}

// ----------------------------------------------------------------------------
// Assemble: position 0 is the CLS token, position 1 + p the embedded patch p; all get wpe.
//   out[b, 0, :]   = cls[:] + wpe[0, :]
//   out[b, t, :]   = embedded[b, t - 1, :] + wpe[t, :]              t = 1 .. T-1 (T = NP + 1)
// backward: dcls[:] += sum_b dout[b, 0, :];  dwpe[t, :] += sum_b dout[b, t, :]
//           dembedded[b, t - 1, :] += dout[b, t, :]

template <typename F>
__host__ __device__ inline F assemble_element(const F* embedded, const F* cls, const F* wpe, int T, int C,
                                              size_t bt, int c) {
    // out[bt, c] of the forward above
    const int t = (int)(bt % T);
    const size_t b = bt / T;
    const F token = t == 0 ? cls[c] : embedded[(b * (T - 1) + t - 1) * C + c];
    return token + wpe[(size_t)t * C + c];
}

// One channel c of dcls and dwpe, all examples in order: one thread per channel on both
// devices, so the sums over the batch have a fixed order and need no atomics.
template <typename F>
__host__ __device__ inline void assemble_channel_backward(F* dcls, F* dwpe, const F* dout, int B, int T, int C,
                                                          int c) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const F g = dout[((size_t)b * T + t) * C + c];
            if (t == 0) dcls[c] += g;
            dwpe[(size_t)t * C + c] += g;
        }
}

template <typename F>
void assemble_forward_cpu(F* out, const F* embedded, const F* cls, const F* wpe, int B, int T, int C) {
    // out (B,T,C), embedded (B,T-1,C), cls (C), wpe (T,C)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) out[(size_t)bt * C + c] = assemble_element(embedded, cls, wpe, T, C, bt, c);
}

template <typename F>
void assemble_backward_cpu(F* dembedded, F* dcls, F* dwpe, const F* dout, int B, int T, int C) {
    // dembedded (B,T-1,C), dcls (C), dwpe (T,C), dout (B,T,C)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int c = 0; c < C; c++) assemble_channel_backward(dcls, dwpe, dout, B, T, C, c);
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            for (int c = 0; c < C; c++)
                dembedded[((size_t)b * (T - 1) + t - 1) * C + c] += dout[((size_t)b * T + t) * C + c];
}

__global__ void assemble_forward_kernel1(float* __restrict__ out, const float* __restrict__ embedded,
                                         const float* __restrict__ cls, const float* __restrict__ wpe, int B, int T,
                                         int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B·T·C
    if (idx < (size_t)B * T * C) out[idx] = assemble_element(embedded, cls, wpe, T, C, idx / C, (int)(idx % C));
}

__global__ void assemble_channel_backward_kernel1(float* __restrict__ dcls, float* __restrict__ dwpe,
                                                  const float* __restrict__ dout, int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per channel
    if (c < C) assemble_channel_backward(dcls, dwpe, dout, B, T, C, c);
}

__global__ void assemble_patches_backward_kernel1(float* __restrict__ dembedded, const float* __restrict__ dout, int B,
                                                  int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B·(T-1)·C, one per element of dembedded
    if (idx >= (size_t)B * (T - 1) * C) return;
    const size_t row = idx / C, b = row / (T - 1);
    const int c = (int)(idx % C), t = (int)(row % (T - 1)) + 1;
    dembedded[idx] += dout[(b * T + t) * C + c];
}

inline void assemble_forward(Device dev, float* out, const float* embedded, const float* cls, const float* wpe,
                             int B, int T, int C) {
    if (dev == DEVICE_CPU) return assemble_forward_cpu(out, embedded, cls, wpe, B, T, C);
    launch_kernel<assemble_forward_kernel1>(pointwise_cost((size_t)B * T * C, 2, 1), ceil_div((size_t)B * T * C, BLOCK),
                                            BLOCK, 0, out, embedded, cls, wpe, B, T, C);
}

// The GPU's dcls and dwpe: kernel 1, a thread per channel walking the B·T rows (--profile marks
// it serial); or (Kernels::fast_layers) kernel 2, the column sums of dout read as (B, T·C) into
// dwpe, and of its CLS rows, (B, C) a row T·C apart, into dcls (layers/column_sums.cuh)
inline void assemble_backward(Device dev, const Kernels& kernels, float* dembedded, float* dcls, float* dwpe,
                              const float* dout, int B, int T, int C) {
    if (dev == DEVICE_CPU) return assemble_backward_cpu(dembedded, dcls, dwpe, dout, B, T, C);
    if (kernels.fast_layers) {
        column_sums_gpu(dwpe, dout, B, T * C);
        column_sums_gpu(dcls, dout, B, C, T * C);
    } else {
        const double BTC = (double)B * T * C;
        const LaunchCost cost{4.0 * (BTC + 2.0 * T * C + 2.0 * C), 2 * BTC, (double)B * T};
        launch_kernel<assemble_channel_backward_kernel1>(cost, ceil_div(C, 64), 64, 0, dcls, dwpe, dout, B, T, C);
    }
    launch_kernel<assemble_patches_backward_kernel1>(pointwise_cost((size_t)B * (T - 1) * C, 2, 1),
                                                     ceil_div((size_t)B * (T - 1) * C, BLOCK), BLOCK, 0, dembedded,
                                                     dout, B, T, C);
}

// ----------------------------------------------------------------------------
// Mean pooling over the patch tokens (position 0, CLS, is left out):
//   out[b, :] = (1 / (T-1)) sum_{t=1}^{T-1} x[b, t, :]
// backward: dx[b, t, :] += dout[b, :] / (T-1)   for t >= 1

template <typename F>
__host__ __device__ inline F mean_pool_element(const F* x, int T, int C, int b, int c) {
    F sum = 0;
    for (int t = 1; t < T; t++) sum += x[((size_t)b * T + t) * C + c];  // in order: reproducible
    return sum / F(T - 1);
}

template <typename F>
void mean_pool_forward_cpu(F* out, const F* x, int B, int T, int C) {  // out (B,C), x (B,T,C)
    #pragma omp parallel for if (worth_threads((size_t)B * T * C))
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) out[(size_t)b * C + c] = mean_pool_element(x, T, C, b, c);
}

template <typename F>
void mean_pool_backward_cpu(F* dx, const F* dout, int B, int T, int C) {  // dx (B,T,C), dout (B,C)
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            for (int c = 0; c < C; c++) dx[((size_t)b * T + t) * C + c] += dout[(size_t)b * C + c] / F(T - 1);
}

__global__ void mean_pool_forward_kernel1(float* __restrict__ out, const float* __restrict__ x, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over B·C
    if (idx < B * C) out[idx] = mean_pool_element(x, T, C, idx / C, idx % C);
}

__global__ void mean_pool_backward_kernel1(float* __restrict__ dx, const float* __restrict__ dout, int B, int T,
                                           int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B·T·C
    if (idx >= (size_t)B * T * C) return;
    const int t = (int)(idx / C % T);
    if (t > 0) dx[idx] += dout[idx / ((size_t)T * C) * C + idx % C] / (float)(T - 1);
}

inline void mean_pool_forward(Device dev, float* out, const float* x, int B, int T, int C) {
    if (dev == DEVICE_CPU) return mean_pool_forward_cpu(out, x, B, T, C);
    const double BTC = (double)B * T * C;
    const LaunchCost cost{4.0 * (BTC + (double)B * C), BTC, (double)T};  // a thread per (b, c) walks T
    launch_kernel<mean_pool_forward_kernel1>(cost, ceil_div(B * C, BLOCK), BLOCK, 0, out, x, B, T, C);
}

inline void mean_pool_backward(Device dev, float* dx, const float* dout, int B, int T, int C) {
    if (dev == DEVICE_CPU) return mean_pool_backward_cpu(dx, dout, B, T, C);
    launch_kernel<mean_pool_backward_kernel1>(pointwise_cost((size_t)B * T * C, 2, 1),
                                              ceil_div((size_t)B * T * C, BLOCK), BLOCK, 0, dx, dout, B, T, C);
}
