// layers/embedding.cuh: what turns token ids into the first residual stream, in two forms:
//   token embedding (the default): a learned row of wte per token, plus a learned row of wpe
//   per position;
//   scalar embedding (--encoding scalar): a token that stands for a number is that number
//   times one learned vector wval.
// Each as one block: the math in a few comment lines; <layer>_forward_cpu / _backward_cpu
// (plain loops, templated on the float type so the tests can run them in double); kernel1,
// the naive port of the CPU loop; and <layer>_forward / _backward(dev, ...), which the model
// calls and which picks the device. Every backward accumulates (+=) into its gradients.
#pragma once
#include "layers/common.cuh"  // Device, ceil_div, cudaCheck, BLOCK

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

// Only C threads, which is plenty for the small vocabularies here.
__global__ void embedding_backward_kernel1(float* dwte, float* dwpe, const float* dout, const int* tokens,
                                           int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) embedding_channel_backward(dwte, dwpe, dout, tokens, B, T, C, c);
}

inline void embedding_forward(Device dev, float* out, const int* tokens, const float* wte, const float* wpe,
                              int B, int T, int C) {
    if (dev == DEVICE_CPU) return embedding_forward_cpu(out, tokens, wte, wpe, B, T, C);
    launch_kernel<embedding_forward_kernel1>(ceil_div((size_t)B * T * C, BLOCK), BLOCK, 0, out, tokens, wte, wpe, B, T,
                                             C);
}

inline void embedding_backward(Device dev, float* dwte, float* dwpe, const float* dout, const int* tokens,
                               int B, int T, int C) {
    if (dev == DEVICE_CPU) return embedding_backward_cpu(dwte, dwpe, dout, tokens, B, T, C);
    launch_kernel<embedding_backward_kernel1>(ceil_div(C, 64), 64, 0, dwte, dwpe, dout, tokens, B, T, C);
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
    launch_kernel<scalar_embedding_forward_kernel1>(ceil_div((size_t)B * T * C, BLOCK), BLOCK, 0, out, tokens, value,
                                                    wte, wval, wpe, B, T, C);
}

inline void scalar_embedding_backward(Device dev, float* dwte, float* dwval, float* dwpe, const float* dout,
                                      const int* tokens, const float* value, int B, int T, int C) {
    if (dev == DEVICE_CPU) return scalar_embedding_backward_cpu(dwte, dwval, dwpe, dout, tokens, value, B, T, C);
    launch_kernel<scalar_embedding_backward_kernel1>(ceil_div(C, 64), 64, 0, dwte, dwval, dwpe, dout, tokens, value, B,
                                                     T, C);
}
