// layers.cuh: every layer of the transformer except attention, each as one block:
//   the math in a few comment lines; <layer>_forward_cpu / _backward_cpu (plain loops,
//   templated on the float type so the tests can run them in double); the CUDA kernels
//   (kernel1 is the naive port of the CPU loop); and <layer>_forward / _backward(dev, ...)
//   which the model calls and which picks the device.
// Every backward accumulates (+=) into its gradients; model_zero_grad clears them.
// Dims: B batch, T sequence, C width, N = rows (B*T or B), OC output channels.
// The matmul, the losses and the optimizer live in their own files, included here.
#pragma once
#include "common.cuh"
#include "matmul.cuh"
#include "loss.cuh"
#include "adamw.cuh"

constexpr int BLOCK = 256;  // threads per block for the simple one-thread-per-element kernels

// ----------------------------------------------------------------------------
// Embedding: a token id looks up its row of wte, and position t adds row t of wpe.
//   out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
// backward: dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += sum_b dout[b,t,:]

template <typename F>
void embedding_forward_cpu(F* out, const int* tokens, const F* wte, const F* wpe, int B, int T, int C) {
    // out (B,T,C), tokens (B,T), wte (V,C), wpe (T,C)
    #pragma omp parallel for
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
    #pragma omp parallel for
    for (int c = 0; c < C; c++) embedding_channel_backward(dwte, dwpe, dout, tokens, B, T, C, c);
}

__global__ void embedding_forward_kernel1(float* out, const int* tokens, const float* wte, const float* wpe,
                                          int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over B*T*C
    if (idx >= B * T * C) return;
    int c = idx % C, bt = idx / C;
    out[idx] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
}

// Only C threads, which is plenty for the small vocabularies here.
__global__ void embedding_backward_kernel1(float* dwte, float* dwpe, const float* dout, const int* tokens,
                                           int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) embedding_channel_backward(dwte, dwpe, dout, tokens, B, T, C, c);
}

inline void embedding_forward(Device dev, float* out, const int* tokens, const float* wte, const float* wpe,
                              int B, int T, int C) {
    if (dev == DEVICE_CPU) return embedding_forward_cpu(out, tokens, wte, wpe, B, T, C);
    embedding_forward_kernel1<<<ceil_div(B * T * C, BLOCK), BLOCK>>>(out, tokens, wte, wpe, B, T, C);
    cudaCheck(cudaGetLastError());
}

inline void embedding_backward(Device dev, float* dwte, float* dwpe, const float* dout, const int* tokens,
                               int B, int T, int C) {
    if (dev == DEVICE_CPU) return embedding_backward_cpu(dwte, dwpe, dout, tokens, B, T, C);
    embedding_backward_kernel1<<<ceil_div(C, 64), 64>>>(dwte, dwpe, dout, tokens, B, T, C);
    cudaCheck(cudaGetLastError());
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
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++)
            out[(size_t)bt * C + c] = scalar_embedding_element(tokens, value, wte, wval, wpe, T, C, bt, c);
}

template <typename F>
void scalar_embedding_backward_cpu(F* dwte, F* dwval, F* dwpe, const F* dout, const int* tokens,
                                   const float* value, int B, int T, int C) {
    // dwte (V,C), dwval (C), dwpe (T,C), dout (B,T,C), tokens (B,T), value (V)
    #pragma omp parallel for
    for (int c = 0; c < C; c++) scalar_embedding_channel_backward(dwte, dwval, dwpe, dout, tokens, value, B, T, C, c);
}

__global__ void scalar_embedding_forward_kernel1(float* out, const int* tokens, const float* value,
                                                 const float* wte, const float* wval, const float* wpe,
                                                 int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over B*T*C
    if (idx < B * T * C) out[idx] = scalar_embedding_element(tokens, value, wte, wval, wpe, T, C, idx / C, idx % C);
}

__global__ void scalar_embedding_backward_kernel1(float* dwte, float* dwval, float* dwpe, const float* dout,
                                                  const int* tokens, const float* value, int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per channel
    if (c < C) scalar_embedding_channel_backward(dwte, dwval, dwpe, dout, tokens, value, B, T, C, c);
}

inline void scalar_embedding_forward(Device dev, float* out, const int* tokens, const float* value,
                                     const float* wte, const float* wval, const float* wpe, int B, int T, int C) {
    if (dev == DEVICE_CPU) return scalar_embedding_forward_cpu(out, tokens, value, wte, wval, wpe, B, T, C);
    scalar_embedding_forward_kernel1<<<ceil_div(B * T * C, BLOCK), BLOCK>>>(out, tokens, value, wte, wval, wpe,
                                                                           B, T, C);
    cudaCheck(cudaGetLastError());
}

inline void scalar_embedding_backward(Device dev, float* dwte, float* dwval, float* dwpe, const float* dout,
                                      const int* tokens, const float* value, int B, int T, int C) {
    if (dev == DEVICE_CPU) return scalar_embedding_backward_cpu(dwte, dwval, dwpe, dout, tokens, value, B, T, C);
    scalar_embedding_backward_kernel1<<<ceil_div(C, 64), 64>>>(dwte, dwval, dwpe, dout, tokens, value, B, T, C);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
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
    layernorm_forward_kernel1<<<ceil_div(N, BLOCK), BLOCK>>>(out, mean, rstd, inp, weight, bias, N, C);
    cudaCheck(cudaGetLastError());
}

inline void layernorm_backward(Device dev, float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean, const float* rstd,
                               int N, int C) {
    if (dev == DEVICE_CPU) return layernorm_backward_cpu(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    layernorm_backward_dinp_kernel1<<<ceil_div(N, BLOCK), BLOCK>>>(dinp, dout, inp, weight, mean, rstd, N, C);
    cudaCheck(cudaGetLastError());
    layernorm_backward_params_kernel1<<<ceil_div(C, 64), 64>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// GELU, tanh form:  out = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2/pi)
// backward: dx += dout * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)),  t = tanh(...)

constexpr double GELU_K = 0.7978845608028654;  // sqrt(2/pi)

template <typename F>
__host__ __device__ inline F gelu_value(F x) {
    F t = tanh(F(GELU_K) * (x + F(0.044715) * x * x * x));
    return F(0.5) * x * (F(1) + t);
}

template <typename F>
__host__ __device__ inline F gelu_slope(F x) {
    F t = tanh(F(GELU_K) * (x + F(0.044715) * x * x * x));
    return F(0.5) * (F(1) + t) + F(0.5) * x * (F(1) - t * t) * F(GELU_K) * (F(1) + F(3 * 0.044715) * x * x);
}

template <typename F>
void gelu_forward_cpu(F* out, const F* inp, size_t n) {  // out, inp (n)
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) out[i] = gelu_value(inp[i]);
}

template <typename F>
void gelu_backward_cpu(F* dinp, const F* inp, const F* dout, size_t n) {  // dinp, inp, dout (n)
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * gelu_slope(inp[i]);
}

__global__ void gelu_forward_kernel1(float* out, const float* inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gelu_value(inp[i]);
}

__global__ void gelu_backward_kernel1(float* dinp, const float* inp, const float* dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dinp[i] += dout[i] * gelu_slope(inp[i]);
}

inline void gelu_forward(Device dev, float* out, const float* inp, size_t n) {
    if (dev == DEVICE_CPU) return gelu_forward_cpu(out, inp, n);
    gelu_forward_kernel1<<<ceil_div((int)n, BLOCK), BLOCK>>>(out, inp, n);
    cudaCheck(cudaGetLastError());
}

inline void gelu_backward(Device dev, float* dinp, const float* inp, const float* dout, size_t n) {
    if (dev == DEVICE_CPU) return gelu_backward_cpu(dinp, inp, dout, n);
    gelu_backward_kernel1<<<ceil_div((int)n, BLOCK), BLOCK>>>(dinp, inp, dout, n);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// Residual: out = a + b.   backward: da += dout, db += dout

template <typename F>
void residual_forward_cpu(F* out, const F* a, const F* b, size_t n) {  // out, a, b (n)
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

template <typename F>
void residual_backward_cpu(F* da, F* db, const F* dout, size_t n) {  // da, db, dout (n)
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}

__global__ void residual_forward_kernel1(float* out, const float* a, const float* b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel1(float* da, float* db, const float* dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { da[i] += dout[i]; db[i] += dout[i]; }
}

inline void residual_forward(Device dev, float* out, const float* a, const float* b, size_t n) {
    if (dev == DEVICE_CPU) return residual_forward_cpu(out, a, b, n);
    residual_forward_kernel1<<<ceil_div((int)n, BLOCK), BLOCK>>>(out, a, b, n);
    cudaCheck(cudaGetLastError());
}

inline void residual_backward(Device dev, float* da, float* db, const float* dout, size_t n) {
    if (dev == DEVICE_CPU) return residual_backward_cpu(da, db, dout, n);
    residual_backward_kernel1<<<ceil_div((int)n, BLOCK), BLOCK>>>(da, db, dout, n);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// Summary pick: the regression and classification heads read one position of each row,
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

__global__ void pick_position_forward_kernel1(float* out, const float* inp, int B, int T, int C, int pos) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over B*C
    if (idx >= B * C) return;
    int b = idx / C, c = idx % C;
    out[idx] = inp[((size_t)b * T + pos) * C + c];
}

__global__ void pick_position_backward_kernel1(float* dinp, const float* dout, int B, int T, int C, int pos) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over B*C
    if (idx >= B * C) return;
    int b = idx / C, c = idx % C;
    dinp[((size_t)b * T + pos) * C + c] += dout[idx];
}

inline void pick_position_forward(Device dev, float* out, const float* inp, int B, int T, int C, int pos) {
    if (dev == DEVICE_CPU) return pick_position_forward_cpu(out, inp, B, T, C, pos);
    pick_position_forward_kernel1<<<ceil_div(B * C, BLOCK), BLOCK>>>(out, inp, B, T, C, pos);
    cudaCheck(cudaGetLastError());
}

inline void pick_position_backward(Device dev, float* dinp, const float* dout, int B, int T, int C, int pos) {
    if (dev == DEVICE_CPU) return pick_position_backward_cpu(dinp, dout, B, T, C, pos);
    pick_position_backward_kernel1<<<ceil_div(B * C, BLOCK), BLOCK>>>(dinp, dout, B, T, C, pos);
    cudaCheck(cudaGetLastError());
}
