// layers/layernorm.cuh: LayerNorm, forward and backward, CPU loops and CUDA kernel1; kernel 2
// (--fast-kernels) gives a row to a warp, and sums the parameter gradients over row groups
// (layers/column_sums.cuh).
// Every backward accumulates (+=) into its gradients; model_zero_grad clears them.
#pragma once
#include <vector>
#include "layers/column_sums.cuh"  // column_scratch, column_partials_sum: kernel 2 of the parameter gradients
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

// The CPU reference: the row and channel functions, as the GPU runs them.
template <typename F>
void layernorm_forward_cpu_reference(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N,
                                     int C) {
    // out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
    #pragma omp parallel for if (worth_threads((size_t)N * C * 4))
    for (int n = 0; n < N; n++)
        layernorm_row_forward(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
}

template <typename F>
void layernorm_backward_cpu_reference(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                                      const F* mean, const F* rstd, int N, int C) {
    // dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), mean/rstd (N)
    #pragma omp parallel for if (worth_threads((size_t)N * C * 4))
    for (int n = 0; n < N; n++)
        layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, mean[n],
                               rstd[n], C);
    #pragma omp parallel for if (worth_threads((size_t)N * C * 4))
    for (int c = 0; c < C; c++) layernorm_channel_backward(dweight, dbias, dout, inp, mean, rstd, N, C, c);
}

// The CPU fast path. A row's sums (its mean, its variance, the two means of the backward) are
// chains along c, which one row at a time leaves the vector lanes idle. Here LN_LANES rows run
// side by side, one per lane, from a transposed copy of their block, (C, LN_LANES): each lane
// sums its own row along c in the reference's order, so the bits are the reference's
// (tests/test_fast_paths.cu). The parameter gradients sum over rows in order with the lanes
// across channels.
constexpr int LN_LANES = 16;

// rows n0 .. n0+LN_LANES of x (N,C) into block (C, LN_LANES), rows past N as 0
template <typename F>
void transpose_rows(F* block, const F* x, int N, int C, int n0) {
    for (int c = 0; c < C; c++)
        for (int l = 0; l < LN_LANES; l++)
            block[(size_t)c * LN_LANES + l] = n0 + l < N ? x[(size_t)(n0 + l) * C + c] : F(0);
}

template <typename F>
void layernorm_forward_cpu(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N, int C) {
    // shapes as in layernorm_forward_cpu_reference
    #pragma omp parallel if (worth_threads((size_t)N * C * 4))
    {
        std::vector<F> x_t((size_t)C * LN_LANES);  // this thread's block of rows, transposed
        #pragma omp for
        for (int n0 = 0; n0 < N; n0 += LN_LANES) {
            transpose_rows(x_t.data(), inp, N, C, n0);
            F m[LN_LANES] = {}, v[LN_LANES] = {};
            for (int c = 0; c < C; c++)
                for (int l = 0; l < LN_LANES; l++) m[l] += x_t[(size_t)c * LN_LANES + l];
            for (int l = 0; l < LN_LANES; l++) m[l] /= C;
            for (int c = 0; c < C; c++)
                for (int l = 0; l < LN_LANES; l++) {
                    F d = x_t[(size_t)c * LN_LANES + l] - m[l];
                    v[l] += d * d;
                }
            for (int l = 0; l < LN_LANES && n0 + l < N; l++) {
                const int n = n0 + l;
                const F s = F(1) / F(sqrt(v[l] / C + F(LN_EPS)));
                const F* x = inp + (size_t)n * C;
                for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (x[c] - m[l]) * s * weight[c] + bias[c];
                mean[n] = m[l];
                rstd[n] = s;
            }
        }
    }
}

template <typename F>
void layernorm_backward_cpu(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                            const F* mean, const F* rstd, int N, int C) {
    // shapes as in layernorm_backward_cpu_reference
    #pragma omp parallel if (worth_threads((size_t)N * C * 4))
    {
        std::vector<F> x_t((size_t)C * LN_LANES), g_t((size_t)C * LN_LANES);  // this thread's blocks
        #pragma omp for
        for (int n0 = 0; n0 < N; n0 += LN_LANES) {
            transpose_rows(x_t.data(), inp, N, C, n0);
            transpose_rows(g_t.data(), dout, N, C, n0);
            F m[LN_LANES], s[LN_LANES], g_mean[LN_LANES] = {}, gx_mean[LN_LANES] = {};
            for (int l = 0; l < LN_LANES; l++) {
                m[l] = n0 + l < N ? mean[n0 + l] : F(0);
                s[l] = n0 + l < N ? rstd[n0 + l] : F(0);
            }
            for (int c = 0; c < C; c++)
                for (int l = 0; l < LN_LANES; l++) {
                    const size_t e = (size_t)c * LN_LANES + l;
                    F xhat = (x_t[e] - m[l]) * s[l];
                    g_mean[l] += g_t[e] * weight[c];
                    gx_mean[l] += g_t[e] * weight[c] * xhat;
                }
            for (int l = 0; l < LN_LANES && n0 + l < N; l++) {
                const int n = n0 + l;
                const F gm = g_mean[l] / C, gxm = gx_mean[l] / C;
                const F* x = inp + (size_t)n * C;
                const F* g = dout + (size_t)n * C;
                for (int c = 0; c < C; c++) {
                    F xhat = (x[c] - m[l]) * s[l];
                    dinp[(size_t)n * C + c] += s[l] * (g[c] * weight[c] - gm - xhat * gxm);
                }
            }
        }
    }
    std::vector<F> dw(C, F(0)), db(C, F(0));  // each channel's sums over n, in order, added once
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const F g = dout[(size_t)n * C + c];
            F xhat = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
            db[c] += g;
            dw[c] += g * xhat;
        }
    for (int c = 0; c < C; c++) {
        dweight[c] += dw[c];
        dbias[c] += db[c];
    }
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

// kernel 2 (--fast-kernels): a warp per row. Kernel 1's lone thread walks the C channels of its
// row three times; here 32 lanes share each walk (lane l: channels l, l+32, ...), and warp
// reductions (layers/common.cuh) combine their sums: the row's mean and variance forward, the
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

// kernel 2 (--fast-kernels), stage 1 of layers/column_sums.cuh: thread (group g, channel c) sums
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

inline void layernorm_backward_params_gpu(float* dweight, float* dbias, const float* dout, const float* inp,
                                          const float* mean, const float* rstd, int N, int C) {
    if (!fast_kernels())
        return launch_kernel<layernorm_backward_params_kernel1>(ceil_div(C, 64), 64, 0, dweight, dbias, dout, inp,
                                                                mean, rstd, N, C);
    const int groups = column_groups(N);
    float* partials_w = column_scratch(2 * (size_t)groups * C);
    float* partials_b = partials_w + (size_t)groups * C;
    launch_kernel<layernorm_backward_params_partials_kernel2>(ceil_div((size_t)groups * C, BLOCK), BLOCK, 0,
                                                              partials_w, partials_b, dout, inp, mean, rstd, N, C);
    column_partials_sum(dweight, partials_w, groups, C);
    column_partials_sum(dbias, partials_b, groups, C);
}

inline void layernorm_forward(Device dev, float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int N, int C) {
    if (dev == DEVICE_CPU)
        return CPU_REFERENCE ? layernorm_forward_cpu_reference(out, mean, rstd, inp, weight, bias, N, C)
                             : layernorm_forward_cpu(out, mean, rstd, inp, weight, bias, N, C);
    if (fast_kernels())
        launch_kernel<layernorm_forward_kernel2>(ceil_div(N, LN_WARPS_PER_BLOCK), LN_WARPS_PER_BLOCK * WARP, 0, out,
                                                 mean, rstd, inp, weight, bias, N, C);
    else
        launch_kernel<layernorm_forward_kernel1>(ceil_div(N, BLOCK), BLOCK, 0, out, mean, rstd, inp, weight, bias, N,
                                                 C);
}

inline void layernorm_backward(Device dev, float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean, const float* rstd,
                               int N, int C) {
    if (dev == DEVICE_CPU)
        return CPU_REFERENCE
                   ? layernorm_backward_cpu_reference(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
                   : layernorm_backward_cpu(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    if (fast_kernels())
        launch_kernel<layernorm_backward_dinp_kernel2>(ceil_div(N, LN_WARPS_PER_BLOCK), LN_WARPS_PER_BLOCK * WARP, 0,
                                                       dinp, dout, inp, weight, mean, rstd, N, C);
    else
        launch_kernel<layernorm_backward_dinp_kernel1>(ceil_div(N, BLOCK), BLOCK, 0, dinp, dout, inp, weight, mean,
                                                       rstd, N, C);
    layernorm_backward_params_gpu(dweight, dbias, dout, inp, mean, rstd, N, C);
}
