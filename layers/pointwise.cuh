// layers/pointwise.cuh: the layers that touch each element on its own, or copy one: GELU, the
// residual add, and the position pick that feeds the regression and classification readouts.
// Each as one block: the math, the CPU loop, kernel1, and the launcher the model calls.
// Every backward accumulates (+=) into its gradients; model_zero_grad clears them.
#pragma once
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "cpu_fast/vexp.h"  // vexp: e^x the CPU vectorises

// GELU, tanh form:  out = 0.5 x (1 + tanh(u)),  u = k (x + 0.044715 x^3),  k = sqrt(2/pi)
// computed as out = x σ(2u), the same function (0.5 (1 + tanh(u)) = σ(2u)) with one exp in
// place of a tanh, which costs several times more on a CPU, and no cancellation in 1 + tanh;
// the exp is vexp (cpu_fast/vexp.h), so the CPU loops run as vector code.
// backward: dx += dout * (σ(2u) + x σ(2u) (1 - σ(2u)) 2k (1 + 3 * 0.044715 x^2))

constexpr double GELU_K = 0.7978845608028654;  // sqrt(2/pi)

template <typename F>
__host__ __device__ inline F gelu_sigmoid(F x) {  // σ(2u)
    return F(1) / (F(1) + vexp(F(-2 * GELU_K) * (x + F(0.044715) * x * x * x)));
}

template <typename F>
__host__ __device__ inline F gelu_value(F x) {
    return x * gelu_sigmoid(x);
}

template <typename F>
__host__ __device__ inline F gelu_slope(F x) {
    F s = gelu_sigmoid(x);
    return s + x * s * (F(1) - s) * F(2 * GELU_K) * (F(1) + F(3 * 0.044715) * x * x);
}

template <typename F>
void gelu_forward_cpu(F* out, const F* inp, size_t n) {  // out, inp (n)
    #pragma omp parallel for if (worth_threads(n * 16))
    for (size_t i = 0; i < n; i++) out[i] = gelu_value(inp[i]);
}

template <typename F>
void gelu_backward_cpu(F* dinp, const F* inp, const F* dout, size_t n) {  // dinp, inp, dout (n)
    #pragma omp parallel for if (worth_threads(n * 16))
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * gelu_slope(inp[i]);
}

__global__ void gelu_forward_kernel1(float* __restrict__ out, const float* __restrict__ inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gelu_value(inp[i]);
}

__global__ void gelu_backward_kernel1(float* __restrict__ dinp, const float* __restrict__ inp,
                                      const float* __restrict__ dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dinp[i] += dout[i] * gelu_slope(inp[i]);
}

inline void gelu_forward(Device dev, float* out, const float* inp, size_t n) {
    if (dev == DEVICE_CPU) return gelu_forward_cpu(out, inp, n);
    launch_kernel<gelu_forward_kernel1>(pointwise_cost(n, 1, 1, 10), ceil_div(n, BLOCK), BLOCK, 0, out, inp, n);
}

inline void gelu_backward(Device dev, float* dinp, const float* inp, const float* dout, size_t n) {
    if (dev == DEVICE_CPU) return gelu_backward_cpu(dinp, inp, dout, n);
    launch_kernel<gelu_backward_kernel1>(pointwise_cost(n, 3, 1, 12), ceil_div(n, BLOCK), BLOCK, 0, dinp, inp, dout, n);
}

// ----------------------------------------------------------------------------
// Residual: out = a + b.   backward: da += dout, db += dout
// The sum passes its gradient on unchanged, so the model keeps no copies of it: one residual
// gradient that every block reads and adds into in place (block_gradients, model.cuh).

template <typename F>
void residual_forward_cpu(F* out, const F* a, const F* b, size_t n) {  // out, a, b (n)
    #pragma omp parallel for if (worth_threads(n))
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

__global__ void residual_forward_kernel1(float* __restrict__ out, const float* __restrict__ a,
                                         const float* __restrict__ b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

inline void residual_forward(Device dev, float* out, const float* a, const float* b, size_t n) {
    if (dev == DEVICE_CPU) return residual_forward_cpu(out, a, b, n);
    launch_kernel<residual_forward_kernel1>(pointwise_cost(n, 2, 1), ceil_div(n, BLOCK), BLOCK, 0, out, a, b, n);
}

// ----------------------------------------------------------------------------
// Summary pick: the regression and classification readouts read one position of each row,
// `pos`: 0 (CLS) for bidirectional attention; the last position for causal attention, the
// only one that sees the whole sequence (position 0 sees only itself there).
//   out[b,:] = inp[b,pos,:]        backward: dinp[b,pos,:] += dout[b,:]

template <typename F>
void pick_position_forward_cpu(F* out, const F* inp, int B, int T, int C, int pos) {  // out (B,C), inp (B,T,C)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) out[(size_t)b * C + c] = inp[((size_t)b * T + pos) * C + c];
}

template <typename F>
void pick_position_backward_cpu(F* dinp, const F* dout, int B, int T, int C, int pos) {  // dinp (B,T,C), dout (B,C)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) dinp[((size_t)b * T + pos) * C + c] += dout[(size_t)b * C + c];
}

__global__ void pick_position_forward_kernel1(float* __restrict__ out, const float* __restrict__ inp, int B, int T,
                                              int C, int pos) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B*C
    if (idx >= (size_t)B * C) return;
    size_t b = idx / C, c = idx % C;
    out[idx] = inp[(b * T + pos) * C + c];
}

__global__ void pick_position_backward_kernel1(float* __restrict__ dinp, const float* __restrict__ dout, int B, int T,
                                               int C, int pos) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over B*C
    if (idx >= (size_t)B * C) return;
    size_t b = idx / C, c = idx % C;
    dinp[(b * T + pos) * C + c] += dout[idx];
}

inline void pick_position_forward(Device dev, float* out, const float* inp, int B, int T, int C, int pos) {
    if (dev == DEVICE_CPU) return pick_position_forward_cpu(out, inp, B, T, C, pos);
    launch_kernel<pick_position_forward_kernel1>(pointwise_cost((size_t)B * C, 1, 1), ceil_div((size_t)B * C, BLOCK),
                                                 BLOCK, 0, out, inp, B, T, C, pos);
}

inline void pick_position_backward(Device dev, float* dinp, const float* dout, int B, int T, int C, int pos) {
    if (dev == DEVICE_CPU) return pick_position_backward_cpu(dinp, dout, B, T, C, pos);
    launch_kernel<pick_position_backward_kernel1>(pointwise_cost((size_t)B * C, 2, 1), ceil_div((size_t)B * C, BLOCK),
                                                  BLOCK, 0, dinp, dout, B, T, C, pos);
}
