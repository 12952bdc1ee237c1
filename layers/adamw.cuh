// layers/adamw.cuh: Adam with weight decay, elementwise, in the two forms in use:
//   AdamW (Loshchilov & Hutter; the default): the decay is decoupled from the gradient
//       g = grad                               p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
//   Adam with L2 (torch.optim.Adam's weight_decay, as GOTU's code trains): the decay is
//   added to the gradient and so is rescaled by Adam like any gradient
//       g = grad + wd * p                      p -= lr * mhat / (sqrt(vhat) + eps)
// and in both:
//   m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
//   mhat = m / (1 - b1^t)          vhat = v / (1 - b2^t)
// The model calls it once per parameter tensor, so the mask can have its own weight decay.
#pragma once
#include "layers/common.cuh"  // Device, ceil_div, BLOCK, cudaCheck

struct AdamWSettings {
    float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    bool decoupled = true;  // true: AdamW; false: Adam with L2 in the gradient
};

template <typename F>
__host__ __device__ inline void adamw_element(F& p, F& m, F& v, F grad, AdamWSettings s, float wd, F c1, F c2) {
    F g = s.decoupled ? grad : grad + F(wd) * p;
    m = F(s.beta1) * m + F(1 - s.beta1) * g;
    v = F(s.beta2) * v + F(1 - s.beta2) * g * g;
    F mhat = m / c1, vhat = v / c2;
    p -= F(s.lr) * (mhat / (sqrt(vhat) + F(s.eps)) + (s.decoupled ? F(wd) * p : F(0)));
}

template <typename F>
void adamw_cpu(F* params, F* m, F* v, const F* grads, size_t n, AdamWSettings s, float wd, int t) {
    // params, m, v, grads (n); t is the 1-based step count
    F c1 = F(1) - std::pow(F(s.beta1), F(t)), c2 = F(1) - std::pow(F(s.beta2), F(t));
    #pragma omp parallel for if (worth_threads(n * 16))
    for (size_t i = 0; i < n; i++) adamw_element(params[i], m[i], v[i], grads[i], s, wd, c1, c2);
}

__global__ void adamw_kernel1(float* params, float* m, float* v, const float* grads, size_t n,
                              AdamWSettings s, float wd, float c1, float c2) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) adamw_element(params[i], m[i], v[i], grads[i], s, wd, c1, c2);
}

inline void adamw_update(Device dev, float* params, float* m, float* v, const float* grads, size_t n,
                         AdamWSettings s, float wd, int t) {
    if (dev == DEVICE_CPU) return adamw_cpu(params, m, v, grads, n, s, wd, t);
    // the bias corrections are computed on the host in float, as adamw_cpu<float> does
    float c1 = 1.0f - std::pow(s.beta1, (float)t), c2 = 1.0f - std::pow(s.beta2, (float)t);
    launch_kernel<adamw_kernel1>(ceil_div(n, BLOCK), BLOCK, 0, params, m, v, grads, n, s, wd, c1, c2);
}
