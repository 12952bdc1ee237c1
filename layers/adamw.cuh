// layers/adamw.cuh: Adam with weight decay, elementwise, in the two forms in use:
//   AdamW (Loshchilov & Hutter; the default): the decay is decoupled from the gradient
//       g = grad                               p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
//   Adam with L2 (torch.optim.Adam's weight_decay, as GOTU's code trains): the decay is
//   added to the gradient and so is rescaled by Adam like any gradient
//       g = grad + wd * p                      p -= lr * mhat / (sqrt(vhat) + eps)
// and in both:
//   m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
//   mhat = m / (1 - b1^t)          vhat = v / (1 - b2^t)
// The model calls it once for all its parameters, on the flat buffers, with the weight decay and
// a factor on the learning rate given by group (AdamWGroups: the mask has its own of both,
// --mask-wd and --mask-lr-scale; a frozen mask is in no group, untouched).
#pragma once
#include <stdexcept>
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

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

// Ranges of a flat parameter buffer, each with its weight decay and its learning rate's factor
// (the range steps at lr_scale x lr; at 1, lr itself: x·1 is x exactly); an element in no range is
// not updated. Passed to the kernel by value (a few hundred bytes of its parameters).
struct AdamWGroup {
    size_t begin, end;  // elements [begin, end)
    float weight_decay;
    float lr_scale;
};
constexpr int ADAMW_MAX_GROUPS = 16;
struct AdamWGroups {
    int count = 0;
    AdamWGroup group[ADAMW_MAX_GROUPS];
    // adds [begin, end) with decay wd at lr_scale x lr, merged into the last range when it continues it
    // with the same two
    void add(size_t begin, size_t end, float wd, float lr_scale = 1.0f) {
        AdamWGroup* last = count > 0 ? &group[count - 1] : nullptr;
        if (last && last->end == begin && last->weight_decay == wd && last->lr_scale == lr_scale) {
            last->end = end;
            return;
        }
        if (count == ADAMW_MAX_GROUPS) throw std::logic_error("AdamWGroups: more than ADAMW_MAX_GROUPS ranges");
        group[count++] = {begin, end, wd, lr_scale};
    }
    size_t span() const { return count == 0 ? 0 : group[count - 1].end; }  // ranges are added in order
};

// the bias corrections 1 - b^t, computed on the host in float on both devices
inline float adamw_correction(float beta, int t) { return 1.0f - std::pow(beta, (float)t); }

// What changes from one step to the next, as the GPU kernel reads it: from device memory, so
// that a captured graph replays the launch with each step's values (a value passed as a kernel
// argument would be the capture's forever).
struct AdamWStep {
    float lr;      // this step's learning rate
    float c1, c2;  // the bias corrections 1 - b1^t, 1 - b2^t
};

// the step's scalars for settings s at the 1-based step t, at learning rate s.lr
inline AdamWStep adamw_step(const AdamWSettings& s, int t) {
    return {s.lr, adamw_correction(s.beta1, t), adamw_correction(s.beta2, t)};
}

// one thread per element of the span; it finds its range (a few, the same for nearby threads)
__global__ void adamw_kernel1(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                              const float* __restrict__ grads, AdamWGroups groups, AdamWSettings s,
                              const AdamWStep* __restrict__ step) {
    // params, m, v, grads: the flat buffers, groups.span() elements; step: one, on the device
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int g = 0; g < groups.count; g++) {
        const AdamWGroup& range = groups.group[g];
        if (i < range.begin || i >= range.end) continue;
        s.lr = step->lr * range.lr_scale;
        return adamw_element(params[i], m[i], v[i], grads[i], s, range.weight_decay, step->c1, step->c2);
    }
}

// One step on every range of groups on the GPU, in one launch, the step's scalars read from
// the device (the training step: run/step.cuh uploads them with the batch).
inline void adamw_update_groups_gpu(float* params, float* m, float* v, const float* grads, const AdamWGroups& groups,
                                    AdamWSettings s, const AdamWStep* step) {
    const size_t n = groups.span();
    if (n == 0) return;
    const LaunchCost cost{4.0 * 7 * n, 16.0 * n, 1};  // reads p, m, v, g; writes p, m, v
    launch_kernel<adamw_kernel1>(cost, ceil_div(n, BLOCK), BLOCK, 0, params, m, v, grads, groups, s, step);
}

// One step on every range of groups at the 1-based step t, learning rate s.lr: the CPU range by
// range; the GPU after a blocking upload of the step's scalars (outside the training step: the
// QK init's fit, the tests).
inline void adamw_update_groups(Device dev, float* params, float* m, float* v, const float* grads,
                                const AdamWGroups& groups, AdamWSettings s, int t) {
    if (dev == DEVICE_CPU) {
        for (int g = 0; g < groups.count; g++) {
            const AdamWGroup& r = groups.group[g];
            AdamWSettings at_range = s;
            at_range.lr = s.lr * r.lr_scale;
            adamw_cpu(params + r.begin, m + r.begin, v + r.begin, grads + r.begin, r.end - r.begin, at_range,
                      r.weight_decay, t);
        }
        return;
    }
    static AdamWStep* on_device = nullptr;  // one for the process, allocated on first use
    if (!on_device) cudaCheck(cudaMalloc(&on_device, sizeof(AdamWStep)));
    const AdamWStep step = adamw_step(s, t);
    device_copy(on_device, &step, sizeof step, cudaMemcpyHostToDevice);
    adamw_update_groups_gpu(params, m, v, grads, groups, s, on_device);
}

// One step on n parameters with weight decay wd
inline void adamw_update(Device dev, float* params, float* m, float* v, const float* grads, size_t n,
                         AdamWSettings s, float wd, int t) {
    AdamWGroups all;
    all.add(0, n, wd);
    adamw_update_groups(dev, params, m, v, grads, all, s, t);
}
