// layers/layernorm.cuh: LayerNorm, forward and backward, CPU loops and CUDA kernel1; kernel 2
// (Kernels::fast_layers) gives a row to a warp, and sums the parameter gradients over row groups
// (layers/column_sums.cuh). The CPU runs the loops' fast twin (cpu_fast/layernorm.h, the same bits).
// Every backward accumulates (+=) into its gradients; model_zero_grad clears them.
#pragma once
#include "cpu_fast/layernorm.h"    // layernorm_forward_cpu_fast, layernorm_backward_cpu_fast
#include "layers/column_sums.cuh"  // column_scratch, column_partials_sum: kernel 2 of the parameter gradients
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels

// LayerNorm over the last dim, eps 1e-5, per row n:
//   mean = sum_c x_c / C,  rstd = 1 / sqrt(sum_c (x_c - mean)^2 / C + eps)
//   xhat = (x - mean) * rstd,  out = xhat * weight + bias
// backward: dbias += dout, dweight += dout * xhat, g = dout * weight,
//   dx += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))

constexpr float LN_EPS = 1e-5f;

// One row's forward, one row's input gradient, and one channel's parameter gradients: shared
// by the CPU loops and kernel1, so both devices run the same code: the same bits on the CUDA
// emulation; on a GPU, where nvcc fuses a·b + c into one rounding (FMA), within the GPU tests'
// tolerances.
template <typename F>
__host__ __device__ inline void layernorm_row_forward(F* out, F* mean, F* rstd, const F* x, const F* weight,
                                                      const F* bias, int C) {
    // out (C), x (C): one row; mean, rstd: that row's scalars
    F m = 0;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    F v = 0;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    v /= C;
    F s = F(1) / F(sqrt(v + F(LN_EPS)));  // F(): float math on the host too, as on the GPU
    for (int c = 0; c < C; c++) out[c] = (x[c] - m) * s * weight[c] + bias[c];
    *mean = m;
    *rstd = s;
}

template <typename F>
__host__ __device__ inline void layernorm_row_backward(F* dx, const F* g, const F* x, const F* weight, F mean,
                                                       F rstd, int C) {
    // dx, g = dout, x: one row (C)
    F g_mean = 0, gx_mean = 0;
    for (int c = 0; c < C; c++) {
        F xhat = (x[c] - mean) * rstd;
        g_mean += g[c] * weight[c];
        gx_mean += g[c] * weight[c] * xhat;
    }
    g_mean /= C;
    gx_mean /= C;
    for (int c = 0; c < C; c++) {
        F xhat = (x[c] - mean) * rstd;
        dx[c] += rstd * (g[c] * weight[c] - g_mean - xhat * gx_mean);
    }
}

template <typename F>
__host__ __device__ inline void layernorm_channel_backward(F* dweight, F* dbias, const F* dout, const F* inp,
                                                           const F* mean, const F* rstd, int N, int C, int c) {
    // channel c's dweight and dbias: a sum over the rows, in order (deterministic)
    F dw = 0, db = 0;
    for (int n = 0; n < N; n++) {
        F xhat = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
        db += dout[(size_t)n * C + c];
        dw += dout[(size_t)n * C + c] * xhat;
    }
    dweight[c] += dw;
    dbias[c] += db;
}

// The CPU loops: the row and channel functions, as kernel 1 runs them.
template <typename F>
void layernorm_forward_cpu(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N, int C) {
    // out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
    #pragma omp parallel for if (worth_threads((size_t)N * C * 4))
    for (int n = 0; n < N; n++)
        layernorm_row_forward(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
}

template <typename F>
void layernorm_backward_cpu(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                            const F* mean, const F* rstd, int N, int C) {
    // dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), mean/rstd (N)
    #pragma omp parallel for if (worth_threads((size_t)N * C * 4))
    for (int n = 0; n < N; n++)
        layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, mean[n],
                               rstd[n], C);
    #pragma omp parallel for if (worth_threads((size_t)N * C * 4))
    for (int c = 0; c < C; c++) layernorm_channel_backward(dweight, dbias, dout, inp, mean, rstd, N, C, c);
}

__global__ void layernorm_forward_kernel1(float* out, float* mean, float* rstd, const float* inp,
                                          const float* weight, const float* bias, int N, int C) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per row
    if (n < N) layernorm_row_forward(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
}

__global__ void layernorm_backward_dinp_kernel1(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean, const float* rstd,
                                                int N, int C) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per row
    if (n < N)
        layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, mean[n],
                               rstd[n], C);
}

__global__ void layernorm_backward_params_kernel1(float* dweight, float* dbias, const float* dout,
                                                  const float* inp, const float* mean, const float* rstd,
                                                  int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per channel, rows in order
    if (c < C) layernorm_channel_backward(dweight, dbias, dout, inp, mean, rstd, N, C, c);
}

// kernel 2 (Kernels::fast_layers): a warp per row. Kernel 1's lone thread walks the C channels of its
// row three times; here 32 lanes share each walk (lane l: channels l, l+32, ...), and warp
// reductions (layers/launch.cuh) combine their sums: the row's mean and variance forward, the
// two means of the backward. A lane reads back only the channels it wrote, so no barrier is
// needed between the walks. The sums run in another order than kernel 1's: the bits differ
// within rounding.
__device__ inline void layernorm_row_forward_warp(float* out, float* mean, float* rstd, const float* x,
                                                  const float* weight, const float* bias, int C, int lane) {
    // out, x (C): one row; mean, rstd: its scalars (written by lane 0)
    float sum = 0;
    for (int c = lane; c < C; c += WARP) sum += x[c];
    const float m = warp_sum(sum) / C;
    float squares = 0;
    for (int c = lane; c < C; c += WARP) squares += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / sqrtf(warp_sum(squares) / C + LN_EPS);
    for (int c = lane; c < C; c += WARP) out[c] = (x[c] - m) * s * weight[c] + bias[c];
    if (lane == 0) {
        *mean = m;
        *rstd = s;
    }
}

constexpr int LN_WARPS_PER_BLOCK = 4;

__global__ void layernorm_forward_kernel2(float* out, float* mean, float* rstd, const float* inp,
                                          const float* weight, const float* bias, int N, int C) {
    const int n = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (n < N)  // the whole warp: a row is a warp's
        layernorm_row_forward_warp(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C,
                                   lane);
}

__global__ void layernorm_backward_dinp_kernel2(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean, const float* rstd,
                                                int N, int C) {
    // the row function's math: dx += rstd (g w - mean_c(g w) - xhat mean_c(g w xhat)), g = dout
    const int n = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (n >= N) return;
    const float *g = dout + (size_t)n * C, *x = inp + (size_t)n * C;
    float* dx = dinp + (size_t)n * C;
    float g_sum = 0, gx_sum = 0;
    for (int c = lane; c < C; c += WARP) {
        const float xhat = (x[c] - mean[n]) * rstd[n];
        g_sum += g[c] * weight[c];
        gx_sum += g[c] * weight[c] * xhat;
    }
    const float g_mean = warp_sum(g_sum) / C, gx_mean = warp_sum(gx_sum) / C;
    for (int c = lane; c < C; c += WARP) {
        const float xhat = (x[c] - mean[n]) * rstd[n];
        dx[c] += rstd[n] * (g[c] * weight[c] - g_mean - xhat * gx_mean);
    }
}

// kernel 2 (Kernels::fast_layers), stage 1 of layers/column_sums.cuh: thread (group g, channel c) sums
// the group's rows of dout·xhat and of dout into partials_w[g, c] and partials_b[g, c]
__global__ void layernorm_backward_params_partials_kernel2(float* partials_w, float* partials_b, const float* dout,
                                                           const float* inp, const float* mean, const float* rstd,
                                                           int N, int C) {
    // partials_w, partials_b (groups, C); dout, inp (N,C); mean, rstd (N)
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)column_groups(N) * C) return;
    const int c = idx % C, g = idx / C, n_end = group_end(g, N);
    float dw = 0, db = 0;
    for (int n = g * COLUMN_GROUP_ROWS; n < n_end; n++) {
        const float xhat = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
        db += dout[(size_t)n * C + c];
        dw += dout[(size_t)n * C + c] * xhat;
    }
    partials_w[idx] = dw;
    partials_b[idx] = db;
}

inline void layernorm_backward_params_gpu(const Kernels& kernels, float* dweight, float* dbias, const float* dout,
                                          const float* inp, const float* mean, const float* rstd, int N, int C) {
    const double reads = 4.0 * (2.0 * N * C + 2.0 * N), flops = 5.0 * N * C;  // dout, inp, mean, rstd
    if (!kernels.fast_layers) {  // a thread per channel walks the N rows: --profile marks it
        const LaunchCost cost{reads + 4.0 * 4 * C, flops, (double)N};
        return launch_kernel<layernorm_backward_params_kernel1>(cost, ceil_div(C, 64), 64, 0, dweight, dbias, dout, inp,
                                                                mean, rstd, N, C);
    }
    const int groups = column_groups(N);
    float* partials_w = column_scratch(2 * (size_t)groups * C);
    float* partials_b = partials_w + (size_t)groups * C;
    const LaunchCost cost{reads + 4.0 * 2 * groups * C, flops, COLUMN_GROUP_ROWS};
    launch_kernel<layernorm_backward_params_partials_kernel2>(cost, ceil_div((size_t)groups * C, BLOCK), BLOCK, 0,
                                                              partials_w, partials_b, dout, inp, mean, rstd, N, C);
    column_partials_sum(dweight, partials_w, groups, C);
    column_partials_sum(dbias, partials_b, groups, C);
}

// --profile's costs: the forward reads a row and writes it, mean and rstd; the backward reads
// dout, inp and dinp and writes dinp. A row's thread (kernel 1) walks its C channels three
// times forward, twice backward; a warp's lane (kernel 2) a 32nd of that.
inline LaunchCost layernorm_cost(bool backward, bool warp_per_row, int N, int C) {
    const double row_walks = backward ? 2 : 3;
    return {4.0 * ((backward ? 3.0 : 2.0) * N * C + 2.0 * N + 2.0 * C), (backward ? 8.0 : 6.0) * N * C,
            row_walks * (warp_per_row ? (C + WARP - 1) / WARP : C)};
}

inline void layernorm_forward(Device dev, const Kernels& kernels, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, int N, int C) {
    if (dev == DEVICE_CPU)
        return kernels.cpu == 1 ? layernorm_forward_cpu(out, mean, rstd, inp, weight, bias, N, C)
                                : layernorm_forward_cpu_fast(out, mean, rstd, inp, weight, bias, N, C, LN_EPS);
    const LaunchCost cost = layernorm_cost(false, kernels.fast_layers, N, C);
    if (kernels.fast_layers)
        launch_kernel<layernorm_forward_kernel2>(cost, ceil_div(N, LN_WARPS_PER_BLOCK), LN_WARPS_PER_BLOCK * WARP, 0,
                                                 out, mean, rstd, inp, weight, bias, N, C);
    else
        launch_kernel<layernorm_forward_kernel1>(cost, ceil_div(N, BLOCK), BLOCK, 0, out, mean, rstd, inp, weight,
                                                 bias, N, C);
}

inline void layernorm_backward(Device dev, const Kernels& kernels, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight, const float* mean,
                               const float* rstd, int N, int C) {
    if (dev == DEVICE_CPU)
        return kernels.cpu == 1
                   ? layernorm_backward_cpu(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
                   : layernorm_backward_cpu_fast(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    const LaunchCost cost = layernorm_cost(true, kernels.fast_layers, N, C);
    if (kernels.fast_layers)
        launch_kernel<layernorm_backward_dinp_kernel2>(cost, ceil_div(N, LN_WARPS_PER_BLOCK), LN_WARPS_PER_BLOCK * WARP,
                                                       0, dinp, dout, inp, weight, mean, rstd, N, C);
    else
        launch_kernel<layernorm_backward_dinp_kernel1>(cost, ceil_div(N, BLOCK), BLOCK, 0, dinp, dout, inp, weight,
                                                       mean, rstd, N, C);
    layernorm_backward_params_gpu(kernels, dweight, dbias, dout, inp, mean, rstd, N, C);
}
