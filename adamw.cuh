// adamw.cuh: AdamW (Loshchilov & Hutter), decoupled weight decay, elementwise.
//   m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
//   mhat = m / (1 - b1^t)          vhat = v / (1 - b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
// The model calls it once per parameter tensor, so the mask can have its own weight decay.
#pragma once
#include "common.cuh"

struct AdamWSettings {
    float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

template <typename F>
void adamw_cpu(F* params, F* m, F* v, const F* grads, size_t n, AdamWSettings s, float wd, int t) {
    // params, m, v, grads (n); t is the 1-based step count
    F c1 = F(1) - std::pow(F(s.beta1), F(t)), c2 = F(1) - std::pow(F(s.beta2), F(t));
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        F g = grads[i];
        m[i] = F(s.beta1) * m[i] + F(1 - s.beta1) * g;
        v[i] = F(s.beta2) * v[i] + F(1 - s.beta2) * g * g;
        F mhat = m[i] / c1, vhat = v[i] / c2;
        params[i] -= F(s.lr) * (mhat / (std::sqrt(vhat) + F(s.eps)) + F(wd) * params[i]);
    }
}

__global__ void adamw_kernel1(float* params, float* m, float* v, const float* grads, size_t n,
                              AdamWSettings s, float wd, float c1, float c2) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = grads[i];
    m[i] = s.beta1 * m[i] + (1 - s.beta1) * g;
    v[i] = s.beta2 * v[i] + (1 - s.beta2) * g * g;
    float mhat = m[i] / c1, vhat = v[i] / c2;
    params[i] -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + wd * params[i]);
}

inline void adamw_update(Device dev, float* params, float* m, float* v, const float* grads, size_t n,
                         AdamWSettings s, float wd, int t) {
    if (dev == DEVICE_CPU) return adamw_cpu(params, m, v, grads, n, s, wd, t);
    // the bias corrections are computed on the host in float, as adamw_cpu<float> does
    float c1 = 1.0f - std::pow(s.beta1, (float)t), c2 = 1.0f - std::pow(s.beta2, (float)t);
    adamw_kernel1<<<ceil_div((int)n, 256), 256>>>(params, m, v, grads, n, s, wd, c1, c2);
    cudaCheck(cudaGetLastError());
}
