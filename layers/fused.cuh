// layers/fused.cuh: two layers in one kernel, where a training step runs them back to back.
// Each pair is one block: the math, the fused kernel, the launcher the model calls, and its
// backward (residual + LayerNorm has none of its own: see below). On the CPU, and on the GPU
// without Kernels::fast_layers (--fast-kernels), a launcher calls the two layers as they are;
// with it (GPU) it runs the fused kernel (kernel 2 of the pair), which reads its input once and
// launches once. A backward is the two layers' own, in reverse.
// Matmul version 2 (Kernels::matmul, --matmul-kernel 2; layers/matmul_lt.cuh) fuses the MLP's
// layers into cuBLASLt's GEMMs instead: bias + GELU into the first layer's product, and (mlp_backward)
// the GELU's backward and the bias gradient into the second layer's dinp product.
// The fused kernels compute the same per-element math as the separate ones; where a fused kernel
// also changes how a row is reduced (a warp instead of one thread), its comment says so, and the
// GPU tests hold it to the separate layers within the reduction tolerance.
//
// What fusing teaches: the layers of a transformer block are small and touch every activation
// once, so their time is the time to move the activations through memory, and launching a
// kernel costs a few microseconds on its own. Two layers fused read their input and write their
// output once, not twice, and launch once.
#pragma once
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels
#include "layers/layernorm.cuh"  // layernorm_forward, layernorm_backward, layernorm_row_forward_warp
#include "layers/matmul.cuh"     // matmul_forward, matmul_backward, matmul_forward_gpu, lt_matmul
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
// Matmul version 2: one cublasLtMatmul with the GELU_AUX_BIAS epilogue writes both: out = gelu(pre)
// as D and pre as the aux matrix (leading dimension OC, which cuBLASLt wants a multiple of 8; else,
// or where it has no algorithm, the path below runs, its matmul at version 2). Its GELU is
// cuBLASLt's own: the documentation names it GELU without a formula; the frameworks that fuse it
// take it for the tanh form (PyTorch's addmm, where it cannot use the epilogue, applies
// gelu(approximate="tanh") in its place), the function gelu_value computes, in other operations,
// so the bits differ from version 1's. The GPU tests allow out the matmul's 1e-4 + 1e-3·|cpu|,
// which an erf GELU (up to 4.7e-4 away, near x = -2.7) would miss.

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
    if (dev == DEVICE_GPU && kernels.matmul == 2 && OC % 8 == 0 &&
        lt_matmul(kernels, "pre = inp W^T + b, out = gelu(pre)", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLAS_OP_T,
                  CUBLAS_OP_N, OC, N, C, weight, C, inp, C, 0.0f, out, OC, bias, pre, OC))
        return;
    if (dev == DEVICE_CPU || !kernels.fast_layers) {
        matmul_forward(dev, kernels, pre, inp, weight, bias, N, C, OC);
        return gelu_forward(dev, out, pre, (size_t)N * OC);
    }
    matmul_forward_gpu(kernels, pre, inp, weight, nullptr, N, C, OC);
    launch_kernel<bias_gelu_forward_kernel2>(pointwise_cost((size_t)N * OC, 2, 2, 11), ceil_div((size_t)N * OC, BLOCK),
                                             BLOCK, 0, pre, out, bias, N, OC);
}

// backward: in the forward pass this was out = gelu(pre), pre = inp W^T + bias; so
//   dpre += gelu'(pre) dout, then dinp, dweight, dbias from dpre (layers/matmul.cuh; at matmul
// version 2 dbias comes with dweight's product, BGRADB). The GELU's backward cannot join a GEMM
// here: cuBLASLt's DGELU epilogue applies to a product's output, and dout is the output of the
// next layer's product; mlp_backward, below, fuses the two.
inline void matmul_bias_gelu_backward(Device dev, const Kernels& kernels, float* dinp, float* dweight, float* dbias,
                                      float* dpre, const float* dout, const float* pre, const float* inp,
                                      const float* weight, int N, int C, int OC) {
    // dinp, inp (N,C); dweight, weight (OC,C); dbias (OC); dpre, dout, pre (N,OC)
    gelu_backward(dev, dpre, pre, dout, (size_t)N * OC);
    matmul_backward(dev, kernels, dinp, dweight, dbias, dpre, inp, weight, N, C, OC);
}

// ----------------------------------------------------------------------------
// The MLP's backward, both layers at once. In the forward pass this was
//   pre = inp Wfc^T + bfc,  g = gelu(pre),  proj = g Wproj^T + bproj
// so, a layer a line, the second layer first (layers/matmul.cuh, layers/pointwise.cuh):
//   dWproj += dproj^T g,  dbproj += sum_n dproj,  dg += dproj Wproj
//   dpre += gelu'(pre) dg
//   dinp += dpre Wfc,  dWfc += dpre^T inp,  dbfc += sum_n dpre
// On the CPU and at matmul version 1 those are the two layers' backwards as they are. Version 2
// (GPU) fuses the middle line into the GEMM before it: cuBLASLt's DGELU_BGRAD epilogue multiplies
// dproj Wproj by gelu'(pre) as it writes it, into dpre, and sums dbfc on the way (matmul_lt.cuh
// says why D's rows are the hidden channels): no pass over dg, none over dpre for dbfc. That GEMM
// writes dpre (beta 0) and never writes dg, so it gives the lines' result when both hold zeros at
// the call, as the model's do (model_zero_grad clears them; nothing else adds into them); dg still
// holds zeros after it. MLP not a multiple of 8 (the aux matrix's leading dimension), or no
// cuBLASLt algorithm: the two layers' backwards.
inline void mlp_backward(Device dev, const Kernels& kernels, float* dinp, float* dfcw, float* dfcb, float* dpre,
                         float* dg, float* dprojw, float* dprojb, const float* dproj, const float* inp,
                         const float* pre, const float* g, const float* fcw, const float* projw, int N, int C,
                         int MLP) {
    // dinp, inp, dproj (N,C); dfcw, fcw (MLP,C); dfcb (MLP); dpre, dg, pre, g (N,MLP); dprojw, projw (C,MLP);
    // dprojb (C)
    const bool fused = dev == DEVICE_GPU && kernels.matmul == 2 && MLP % 8 == 0 &&
                       MLP <= MATMUL_LT_BIAS_GRADIENT_FLOATS &&
                       lt_matmul(kernels, "dpre = gelu'(pre) dproj Wproj, dbfc = sum_n dpre",
                                 CUBLASLT_EPILOGUE_DGELU_BGRAD, CUBLAS_OP_N, CUBLAS_OP_N, MLP, N, C, projw, MLP, dproj,
                                 C, 0.0f, dpre, MLP, matmul_lt().bias_gradient, pre, MLP);
    if (!fused) {
        matmul_backward(dev, kernels, dg, dprojw, dprojb, dproj, g, projw, N, MLP, C);
        return matmul_bias_gelu_backward(dev, kernels, dinp, dfcw, dfcb, dpre, dg, pre, inp, fcw, N, C, MLP);
    }
    add_bias_gradient(dfcb, MLP);
    matmul_backward(dev, kernels, nullptr, dprojw, dprojb, dproj, g, projw, N, MLP, C);
    matmul_backward(dev, kernels, dinp, dfcw, nullptr, dpre, inp, fcw, N, C, MLP);
}
