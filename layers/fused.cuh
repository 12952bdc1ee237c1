// layers/fused.cuh: two layers in one kernel, where a training step runs them back to back.
// Each pair is one block: the math, the fused kernel, the launcher the model calls, and its
// backward (residual + LayerNorm has none of its own: see below). On the CPU, and on the GPU
// without Kernels::fast_layers (--fast-kernels), a launcher calls the two layers as they are;
// with it (GPU) it runs the fused kernel (kernel 2 of the pair), which reads its input once and
// launches once. A backward is the two layers' own, in reverse.
// The fused kernels compute the same per-element math as the separate ones; where a fused kernel
// also changes how a row is reduced (a warp instead of one thread), its comment says so, and the
// GPU tests hold it to the separate layers within the reduction tolerance.
//
// What fusing teaches: the layers of a transformer block are small and touch every activation
// once, so their time is the time to move the activations through memory, and launching a
// kernel costs a few microseconds on its own. Two layers fused read their input and write their
// output once, not twice, and launch once.
#pragma once
#include "layers/common.cuh"     // Device, Kernels, launch_kernel, WARP
#include "layers/layernorm.cuh"  // layernorm_forward, layernorm_backward, layernorm_row_forward_warp
#include "layers/matmul.cuh"     // matmul_forward, matmul_backward, matmul_forward_gpu
#include "layers/pointwise.cuh"  // residual_forward, gelu_*, gelu_value

// ----------------------------------------------------------------------------
// residual + LayerNorm: residual = a + b, then out = layernorm(residual) (mean and rstd kept for
// the backward), as the block does after attention: x2 = x + proj, ln2 = layernorm(x2).
// The fused kernel gives a row to a warp: lanes over the C channels add a and b and write the
// residual, then LayerNorm's kernel 2 row function (a warp per row, layers/layernorm.cuh)
// normalises it while it is fresh in the cache. LayerNorm's kernel1 sums a row in one thread,
// left to right; the warp sums 32 partial sums in a butterfly, so the bits differ within rounding.

__global__ void residual_layernorm_forward_kernel2(float* __restrict__ residual, float* __restrict__ out,
                                                   float* __restrict__ mean, float* __restrict__ rstd,
                                                   const float* __restrict__ a, const float* __restrict__ b,
                                                   const float* __restrict__ weight, const float* __restrict__ bias,
                                                   int N, int C) {
    // residual, out, a, b (N,C); mean, rstd (N); weight, bias (C)
    const int n = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (n >= N) return;  // the whole warp: a row is a warp's
    const size_t row = (size_t)n * C;
    for (int c = lane; c < C; c += WARP) residual[row + c] = a[row + c] + b[row + c];
    // the lane reads back only the channels it wrote (the same c = lane + 32k): no barrier
    layernorm_row_forward_warp(out + row, mean + n, rstd + n, residual + row, weight, bias, C, lane);
}

inline void residual_layernorm_forward(Device dev, const Kernels& kernels, float* residual, float* out, float* mean,
                                       float* rstd, const float* a, const float* b, const float* weight,
                                       const float* bias, int N, int C) {
    // residual, out, a, b (N,C); mean, rstd (N); weight, bias (C)
    if (dev == DEVICE_CPU || !kernels.fast_layers) {
        residual_forward(dev, residual, a, b, (size_t)N * C);
        return layernorm_forward(dev, kernels, out, mean, rstd, residual, weight, bias, N, C);
    }
    const int warps_per_block = 4;
    // --profile: a and b read, residual and out written; a lane walks its 32nd of the row four times
    const LaunchCost cost{4.0 * (4.0 * N * C + 2.0 * N + 2.0 * C), 7.0 * N * C, 4.0 * ceil_div(C, WARP)};
    launch_kernel<residual_layernorm_forward_kernel2>(cost, ceil_div(N, warps_per_block), warps_per_block * WARP, 0,
                                                      residual, out, mean, rstd, a, b, weight, bias, N, C);
}

// backward: none of its own. The residual's gradient is the block's one residual gradient, into
// which layernorm_backward adds its input gradient, and which a and b then share (model.cuh).

// ----------------------------------------------------------------------------
// matmul + bias + GELU: pre = inp W^T + bias, out = gelu(pre), the MLP's first layer (mlp_fc and
// mlp_gelu; the backward needs pre). cuBLAS computes inp W^T without the bias, and one kernel
// adds the bias and applies GELU in the same pass over pre, where the separate layers take two
// passes (add_bias_kernel1, gelu_forward_kernel1). Each element gets the very same operations
// in the same order, so the bits equal the separate kernels'.

__global__ void bias_gelu_forward_kernel2(float* __restrict__ pre, float* __restrict__ out,
                                          const float* __restrict__ bias, int N, int OC) {
    // pre (N,OC): inp W^T in, + bias out; out (N,OC) gelu(pre); bias (OC)
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * OC) return;
    const float x = pre[idx] + bias[idx % OC];
    pre[idx] = x;
    out[idx] = gelu_value(x);
}

inline void matmul_bias_gelu_forward(Device dev, const Kernels& kernels, float* pre, float* out, const float* inp,
                                     const float* weight, const float* bias, int N, int C, int OC) {
    // pre, out (N,OC); inp (N,C); weight (OC,C); bias (OC)
    if (dev == DEVICE_CPU || !kernels.fast_layers) {
        matmul_forward(dev, kernels, pre, inp, weight, bias, N, C, OC);
        return gelu_forward(dev, out, pre, (size_t)N * OC);
    }
    matmul_forward_gpu(kernels, pre, inp, weight, nullptr, N, C, OC);
    launch_kernel<bias_gelu_forward_kernel2>(pointwise_cost((size_t)N * OC, 2, 2, 11), ceil_div((size_t)N * OC, BLOCK),
                                             BLOCK, 0, pre, out, bias, N, OC);
}

// backward: in the forward pass this was out = gelu(pre), pre = inp W^T + bias; so
//   dpre += gelu'(pre) dout, then dinp, dweight, dbias from dpre (layers/matmul.cuh)
inline void matmul_bias_gelu_backward(Device dev, const Kernels& kernels, float* dinp, float* dweight, float* dbias,
                                      float* dpre, const float* dout, const float* pre, const float* inp,
                                      const float* weight, int N, int C, int OC) {
    // dinp, inp (N,C); dweight, weight (OC,C); dbias (OC); dpre, dout, pre (N,OC)
    gelu_backward(dev, dpre, pre, dout, (size_t)N * OC);
    matmul_backward(dev, kernels, dinp, dweight, dbias, dpre, inp, weight, N, C, OC);
}
