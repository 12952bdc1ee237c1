// recipe/drop_path.cuh: stochastic depth (drop-path; Huang et al. 2016, as timm's VisionTransformer
// applies it): in a training pass each of a block's two residual branches is, per example, dropped
// or kept and scaled up, so that its expectation is unchanged:
//   x_mid = x + f[l,0,b] · proj,   x_out = x_mid + f[l,1,b] · mlp_proj        (model.cuh)
//   f = keep / (1 - p_l),   keep ~ Bernoulli(1 - p_l),   p_l = R · l / (L - 1)
// the rate a linspace over depth from 0 (layer 0 is never dropped) to R (--drop-path) at the last
// layer, timm's drop_path_rate; one layer alone: p = 0. Evaluation drops nothing (the model's
// forward pass draws factors only when it trains: model_forward_state).
// The model calls it as timm's blocks call their DropPath module, at every branch of every pass:
// drop_path_forward scales a branch in place and drop_path_backward gives the branch's gradient,
// each doing nothing (the gradient passing as it is) when the pass drops no path.
// The factors are a pure function of (seed, step, layer, branch, row), drawn on the device at
// the start of each training forward pass from the step index the batch block holds
// (StepScalars::step, gpu/device_step.cuh): a captured step (--cuda-graph) replays with each
// step's own factors, a resumed run draws what the uninterrupted one drew, and the CPU draws the
// same bits with the same function.
#pragma once
#include <cstdint>
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/config.h"    // Config

// The drop-path state of a model
struct DropPath {
    float rate = 0;                 // R (--drop-path); 0: off, and no operation of this file runs
    uint64_t seed = 0;              // the run's seed
    bool applied = false;           // whether the last forward pass drew factors (a training pass, rate > 0)
    float* factors = nullptr;       // (L,2,rows) on dev: f of the last training forward pass on `rows` examples
    float* branch_grad = nullptr;   // (B,T,C) on dev: one branch's gradient, f · (the residual gradient)
};

// Turns drop-path on at rate `rate` for a model of config c with room for B rows (rate 0: off).
inline void drop_path_build(DropPath& d, Device dev, const Config& c, int B, float rate, uint64_t seed) {
    d.rate = rate;
    d.seed = seed;
    if (rate == 0) return;
    d.factors = buffer_alloc(dev, (size_t)c.L * 2 * B);
    d.branch_grad = buffer_alloc(dev, (size_t)B * c.T * c.C);
}

inline void drop_path_free(Device dev, DropPath& d) {
    if (d.factors) buffer_free(dev, d.factors);
    if (d.branch_grad) buffer_free(dev, d.branch_grad);
    d.factors = d.branch_grad = nullptr;
}

// Before a forward pass (the host's part, every time): whether it drops paths, as a training pass
// with the rate on does
inline void drop_path_set(DropPath& d, bool training) { d.applied = training && d.rate > 0; }

// The factors (rows) of layer l's branch k (0 attention's proj, 1 the MLP's mlp_proj), in a pass
// on `rows` examples
inline const float* drop_path_factors(const DropPath& d, int l, int k, int rows) {
    return d.factors + ((size_t)l * 2 + k) * rows;
}

// ----------------------------------------------------------------------------
// the factors: f[l,k,b] from (seed, step, l, k, b). splitmix64's step (tasks/task.h) is repeated
// here for the device; the draw's top 24 bits give u, uniform on [0, 1) in steps of 2^-24, and
// the branch is kept where u >= p_l, with probability 1 - p_l.

constexpr uint64_t DROP_PATH_STREAM = 0xD509A7B5u;  // keeps these draws apart from the data's (example_draw)

__host__ __device__ inline uint64_t drop_path_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// p_l: layer l's rate of L layers at the last layer's rate R
__host__ __device__ inline float drop_path_rate_of(float R, int l, int L) {
    return L > 1 ? R * (float)l / (float)(L - 1) : 0.0f;
}

__host__ __device__ inline float drop_path_factor(uint64_t seed, int64_t step, int l, int branch, int row, float R,
                                                  int L) {
    const float p = drop_path_rate_of(R, l, L);
    uint64_t h = drop_path_mix(seed ^ DROP_PATH_STREAM);
    h = drop_path_mix(h ^ (uint64_t)step);
    h = drop_path_mix(h ^ (uint64_t)(2 * l + branch));
    h = drop_path_mix(h ^ (uint64_t)row);
    const float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

__global__ void drop_path_factors_kernel1(float* __restrict__ factors, const int64_t* __restrict__ step,
                                          uint64_t seed, float R, int L, int rows) {
    // factors (L,2,rows), step (1)
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= L * 2 * rows) return;
    factors[i] = drop_path_factor(seed, *step, i / (2 * rows), i / rows % 2, i % rows, R, L);
}

// At the start of a forward pass that drops paths (the device's part): draws its factors for
// `rows` examples of a model of L layers at the step *step (on dev: the batch block's
// StepScalars::step). Nothing in any other pass.
inline void drop_path_draw(Device dev, const DropPath& d, const int64_t* step, int L, int rows) {
    if (!d.applied) return;
    const int n = L * 2 * rows;
    if (dev == DEVICE_CPU) {
        for (int i = 0; i < n; i++)
            d.factors[i] = drop_path_factor(d.seed, *step, i / (2 * rows), i / rows % 2, i % rows, d.rate, L);
        return;
    }
    launch_kernel<drop_path_factors_kernel1>(pointwise_cost(n, 0, 1, 40), ceil_div(n, BLOCK), BLOCK, 0, d.factors,
                                             step, d.seed, d.rate, L, rows);
}

// ----------------------------------------------------------------------------
// The branch scaled: out[b,i] = f[b] · branch[b,i] over rows b of `per_example` floats (T·C);
// out may be branch itself (in place).   backward: dbranch[b,i] = f[b] · dout[b,i], the same
// scaling of the gradient, which writes dbranch (=, not +=): the branch's gradient is a buffer of
// its own (DropPath::branch_grad), while dout, the one residual gradient, stays as it is.

template <typename F>
void drop_path_scale_cpu(F* out, const F* branch, const F* factor, int B, size_t per_example) {
    // out, branch (B,per_example); factor (B)
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < per_example; i++) out[b * per_example + i] = factor[b] * branch[b * per_example + i];
}

__global__ void drop_path_scale_kernel1(float* out, const float* branch, const float* __restrict__ factor, int B,
                                        size_t per_example) {
    // out, branch (B,per_example), which may be the same memory; factor (B)
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)B * per_example) out[i] = factor[i / per_example] * branch[i];
}

inline void drop_path_scale(Device dev, float* out, const float* branch, const float* factor, int B,
                            size_t per_example) {
    if (dev == DEVICE_CPU) return drop_path_scale_cpu(out, branch, factor, B, per_example);
    const size_t n = (size_t)B * per_example;
    launch_kernel<drop_path_scale_kernel1>(pointwise_cost(n, 2, 1), ceil_div(n, BLOCK), BLOCK, 0, out, branch, factor,
                                           B, per_example);
}

// Layer l's branch k, (B,per_example) on dev, scaled in place by its factors; nothing when the
// pass drops no path
inline void drop_path_forward(Device dev, const DropPath& d, int l, int k, float* branch, int B,
                              size_t per_example) {
    if (!d.applied) return;
    drop_path_scale(dev, branch, branch, drop_path_factors(d, l, k, B), B, per_example);
}

// The gradient of layer l's branch k from dout (B,per_example), the residual gradient it was added
// into: f · dout in DropPath::branch_grad (dout, the one residual gradient, stays as it is), or
// dout itself when the pass dropped no path
inline const float* drop_path_backward(Device dev, const DropPath& d, int l, int k, const float* dout, int B,
                                       size_t per_example) {
    if (!d.applied) return dout;
    drop_path_scale(dev, d.branch_grad, dout, drop_path_factors(d, l, k, B), B, per_example);
    return d.branch_grad;
}
