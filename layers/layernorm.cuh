// layers/layernorm.cuh: LayerNorm, forward and backward, CPU loops and CUDA kernel1.
// Every backward accumulates (+=) into its gradients; model_zero_grad clears them.
#pragma once
#include "layers/common.cuh"  // Device, ceil_div, cudaCheck, BLOCK

// LayerNorm over the last dim, eps 1e-5, per row n:
//   mean = sum_c x_c / C,  rstd = 1 / sqrt(sum_c (x_c - mean)^2 / C + eps)
//   xhat = (x - mean) * rstd,  out = xhat * weight + bias
// backward: dbias += dout, dweight += dout * xhat, g = dout * weight,
//   dx += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))

constexpr float LN_EPS = 1e-5f;

// One row's forward, one row's input gradient, and one channel's parameter gradients: shared
// by the CPU loops and kernel1, so both devices compute the very same thing.
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

template <typename F>
void layernorm_forward_cpu(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N, int C) {
    // out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
    #pragma omp parallel for
    for (int n = 0; n < N; n++)
        layernorm_row_forward(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
}

template <typename F>
void layernorm_backward_cpu(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                            const F* mean, const F* rstd, int N, int C) {
    // dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), mean/rstd (N)
    #pragma omp parallel for
    for (int n = 0; n < N; n++)
        layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, mean[n],
                               rstd[n], C);
    #pragma omp parallel for
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

inline void layernorm_forward(Device dev, float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int N, int C) {
    if (dev == DEVICE_CPU) return layernorm_forward_cpu(out, mean, rstd, inp, weight, bias, N, C);
    launch_kernel<layernorm_forward_kernel1>(ceil_div(N, BLOCK), BLOCK, 0, out, mean, rstd, inp, weight, bias, N, C);
}

inline void layernorm_backward(Device dev, float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean, const float* rstd,
                               int N, int C) {
    if (dev == DEVICE_CPU) return layernorm_backward_cpu(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    launch_kernel<layernorm_backward_dinp_kernel1>(ceil_div(N, BLOCK), BLOCK, 0, dinp, dout, inp, weight, mean, rstd, N,
                                                   C);
    launch_kernel<layernorm_backward_params_kernel1>(ceil_div(C, 64), 64, 0, dweight, dbias, dout, inp, mean, rstd, N,
                                                     C);
}
