// recipe/ema.cuh: an exponential moving average of the weights (EMA; timm's ModelEma, with which
// the Vision Transformer recipe evaluates). It starts as the parameters at step 0 and follows
// them after every optimizer step:
//   ema = D · ema + (1 - D) · params        D: the decay (--ema; timm's 0.9999)
// elementwise over the flat parameter buffer (the params' layout, layers/config.h), one launch,
// part of the training step (run/step.cuh), so that a captured step (--cuda-graph) replays it.
// Checkpoints hold it as "ema.<name>" (run/checkpoint.h); each evaluation also evaluates it
// (run/evaluate.cuh, evaluate_run).
#pragma once
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

struct WeightAverage {
    float decay = 0;           // D; 0: off, and no operation of this file runs
    float* weights = nullptr;  // (num_params) on dev
};

// Turns the average on at decay `decay`, starting from params (num_params floats on dev)
inline void weight_average_start(WeightAverage& ema, Device dev, const float* params, size_t num_params, float decay) {
    ema.decay = decay;
    if (decay == 0) return;
    ema.weights = buffer_alloc(dev, num_params);
    buffer_copy(ema.weights, dev, params, dev, num_params);
}

inline void weight_average_free(Device dev, WeightAverage& ema) {
    if (ema.weights) buffer_free(dev, ema.weights);
    ema.weights = nullptr;
}

template <typename F>
void ema_update_cpu(F* ema, const F* params, size_t n, F decay) {  // ema, params (n)
    const F rest = F(1) - decay;
    for (size_t i = 0; i < n; i++) ema[i] = decay * ema[i] + rest * params[i];
}

__global__ void ema_update_kernel1(float* __restrict__ ema, const float* __restrict__ params, size_t n, float decay,
                                   float rest) {
    // ema, params (n); rest = 1 - decay
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ema[i] = decay * ema[i] + rest * params[i];
}

// One step of the average after an optimizer step: params (num_params floats on dev); nothing
// when the average is off
inline void ema_update(Device dev, WeightAverage& ema, const float* params, size_t num_params) {
    if (ema.decay == 0) return;
    if (dev == DEVICE_CPU) return ema_update_cpu(ema.weights, params, num_params, ema.decay);
    launch_kernel<ema_update_kernel1>(pointwise_cost(num_params, 2, 1, 3), ceil_div(num_params, BLOCK), BLOCK, 0,
                                      ema.weights, params, num_params, ema.decay, 1.0f - ema.decay);
}
