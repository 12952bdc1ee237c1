// layers/loss.cuh: the losses at the top of the model: MSE or logistic for the regression readout,
// cross-entropy for classes and next tokens, and readout_loss_forward / _backward, the calls the
// model makes, which pick one by the readout. Each writes one loss per row; the model averages
// them in a fixed order (loss_mean, gpu/device_step.cuh), so the loss is reproducible.
// Targets are floats: a value (MSE), a ±1 label (logistic), a class id (cross-entropy; a mixed
// batch adds a second class and a weight per row).
#pragma once
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/config.h"       // Config, ReadoutType, LossType
#include "layers/kernels.h"      // Kernels

// ----------------------------------------------------------------------------
// Mean squared error on a scalar prediction per row:
//   losses[n] = (pred[n] - y[n])^2,   L = sum_n losses[n] / N
// backward: dpred[n] += 2 (pred[n] - y[n]) / N

template <typename F>
void mse_forward_cpu(F* losses, const F* pred, const float* targets, int N) {  // losses, pred, targets (N)
    for (int n = 0; n < N; n++) losses[n] = (pred[n] - F(targets[n])) * (pred[n] - F(targets[n]));
}

template <typename F>
void mse_backward_cpu(F* dpred, const F* pred, const float* targets, int N) {  // dpred, pred, targets (N)
    for (int n = 0; n < N; n++) dpred[n] += F(2) * (pred[n] - F(targets[n])) / F(N);
}

__global__ void mse_forward_kernel1(float* __restrict__ losses, const float* __restrict__ pred,
                                    const float* __restrict__ targets, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N) losses[n] = (pred[n] - targets[n]) * (pred[n] - targets[n]);
}

__global__ void mse_backward_kernel1(float* __restrict__ dpred, const float* __restrict__ pred,
                                     const float* __restrict__ targets, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N) dpred[n] += 2.0f * (pred[n] - targets[n]) / (float)N;
}

inline void mse_forward(Device dev, float* losses, const float* pred, const float* targets, int N) {
    if (dev == DEVICE_CPU) return mse_forward_cpu(losses, pred, targets, N);
    launch_kernel<mse_forward_kernel1>(pointwise_cost(N, 2, 1, 2), ceil_div(N, BLOCK), BLOCK, 0, losses, pred, targets,
                                       N);
}

inline void mse_backward(Device dev, float* dpred, const float* pred, const float* targets, int N) {
    if (dev == DEVICE_CPU) return mse_backward_cpu(dpred, pred, targets, N);
    launch_kernel<mse_backward_kernel1>(pointwise_cost(N, 3, 1, 3), ceil_div(N, BLOCK), BLOCK, 0, dpred, pred, targets,
                                        N);
}

// ----------------------------------------------------------------------------
// Logistic loss on a ±1 label y and a scalar prediction per row (--loss logistic):
//   losses[n] = log(1 + exp(-y[n] pred[n])) = softplus(-y pred),   L = sum_n losses[n] / N
// backward: dpred[n] += -y[n] σ(-y[n] pred[n]) / N
// Computed stably: softplus(z) = max(z, 0) + log1p(exp(-|z|)), and σ(z) from e = exp(-|z|)
// (1/(1+e) for z >= 0, e/(1+e) below): exp never overflows, whatever the prediction.

template <typename F>
__host__ __device__ inline F logistic_loss(F pred, F y) {
    F z = -y * pred;
    return (z > F(0) ? z : F(0)) + F(log1p(exp(-fabs(z))));
}

template <typename F>
__host__ __device__ inline F logistic_slope(F pred, F y) {  // d loss / d pred
    F z = -y * pred, e = F(exp(-fabs(z)));
    F sigma = z >= F(0) ? F(1) / (F(1) + e) : e / (F(1) + e);  // σ(z)
    return -y * sigma;
}

template <typename F>
void logistic_forward_cpu(F* losses, const F* pred, const float* targets, int N) {  // losses, pred, targets (N)
    for (int n = 0; n < N; n++) losses[n] = logistic_loss(pred[n], F(targets[n]));
}

template <typename F>
void logistic_backward_cpu(F* dpred, const F* pred, const float* targets, int N) {  // dpred, pred, targets (N)
    for (int n = 0; n < N; n++) dpred[n] += logistic_slope(pred[n], F(targets[n])) / F(N);
}

__global__ void logistic_forward_kernel1(float* __restrict__ losses, const float* __restrict__ pred,
                                         const float* __restrict__ targets, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N) losses[n] = logistic_loss(pred[n], targets[n]);
}

__global__ void logistic_backward_kernel1(float* __restrict__ dpred, const float* __restrict__ pred,
                                          const float* __restrict__ targets, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N) dpred[n] += logistic_slope(pred[n], targets[n]) / (float)N;
}

inline void logistic_forward(Device dev, float* losses, const float* pred, const float* targets, int N) {
    if (dev == DEVICE_CPU) return logistic_forward_cpu(losses, pred, targets, N);
    launch_kernel<logistic_forward_kernel1>(pointwise_cost(N, 2, 1, 20), ceil_div(N, BLOCK), BLOCK, 0, losses, pred,
                                            targets, N);
}

inline void logistic_backward(Device dev, float* dpred, const float* pred, const float* targets, int N) {
    if (dev == DEVICE_CPU) return logistic_backward_cpu(dpred, pred, targets, N);
    launch_kernel<logistic_backward_kernel1>(pointwise_cost(N, 3, 1, 20), ceil_div(N, BLOCK), BLOCK, 0, dpred, pred,
                                             targets, N);
}

// ----------------------------------------------------------------------------
// Softmax cross-entropy over V classes per row, on the rows that count, with label smoothing ε
// (PyTorch's label_smoothing; ε = 0 is the plain cross-entropy):
//   p = softmax(logits[n,:]),  q_v = (1 - ε) [v == y_n] + ε / V   (the target distribution)
//   losses[n] = -sum_v q_v log p[v] * w_n = ((1 - ε) (-log p[y_n]) + ε (-1/V sum_v log p[v])) * w_n
//   L = sum_n losses[n] / count,   w_n = row_weight[n] (0 or 1; nullptr: every row counts), count = sum_n w_n
// A row with w_n = 0 gets loss 0 without evaluating the log: its p[y_n] may underflow to 0,
// and -log(0) * 0 would be inf * 0 = NaN. The smoothing term is summed as log-softmax,
// -1/V sum_v log p[v] = log(sum_v e^(z_v - zmax)) - 1/V sum_v (z_v - zmax), finite where a p[v] underflows.
// backward of losses[n] = -sum_v q_v log p[v] * w_n:  dlogits[n,v] += (p[v] - q_v) * w_n / count
// A mixed batch (mixup, cutmix: recipe/mix.h) gives each row a second class b_n and a weight λ_n,
// mix[n] = (b_n, λ_n) (mix nullptr: no row is mixed), and the target becomes λ q(y_n) + (1 - λ) q(b_n),
// timm's mixed smoothed one-hot, whose cross-entropy (timm's SoftTargetCrossEntropy) is
//   λ CE_ε(y_n) + (1 - λ) CE_ε(b_n)
//     = (1 - ε) (λ (-log p[y_n]) + (1 - λ) (-log p[b_n])) + ε (-1/V sum_v log p[v])
// with each -log p[v] summed as log-softmax, log(sum) - (z_v - zmax), so that a class of weight 0 adds 0
// where its p underflows; and q_v = ε/V + (1 - ε) (λ [v == y_n] + (1 - λ) [v == b_n]) in the backward.

// λ (-log p[a]) + (1 - λ) (-log p[b]) of a mixed row: z (V) its logits, mix_row (2) = (b, λ)
template <typename F>
__host__ __device__ inline F mixed_nll(const F* z, F zmax, F log_sum, int a, const float* mix_row) {
    const F lambda = F(mix_row[1]);
    return log_sum - (lambda * (z[a] - zmax) + (F(1) - lambda) * (z[(int)mix_row[0]] - zmax));
}

// q_v of a mixed row of class a: ε/V + (1 - ε) (λ [v == a] + (1 - λ) [v == b]), mix_row (2) = (b, λ)
template <typename F>
__host__ __device__ inline F mixed_target(int v, int a, const float* mix_row, float smoothing, int V) {
    const F lambda = F(mix_row[1]);
    const F share = (v == a ? lambda : F(0)) + (v == (int)mix_row[0] ? F(1) - lambda : F(0));
    return F(smoothing) / F(V) + (F(1) - F(smoothing)) * share;
}

template <typename F>
void crossentropy_forward_cpu(F* losses, F* probs, const F* logits, const float* targets,
                              const float* row_weight, int N, int V, float smoothing = 0.0f,
                              const float* mix = nullptr) {
    // losses (N), probs (N,V), logits (N,V), targets (N), row_weight (N) or nullptr, mix (N,2) or nullptr
    #pragma omp parallel for if (worth_threads((size_t)N * V * 8))
    for (int n = 0; n < N; n++) {
        const F* z = logits + (size_t)n * V;
        F* p = probs + (size_t)n * V;
        F zmax = z[0];
        for (int v = 1; v < V; v++) zmax = z[v] > zmax ? z[v] : zmax;
        F sum = 0;
        for (int v = 0; v < V; v++) { p[v] = std::exp(z[v] - zmax); sum += p[v]; }
        for (int v = 0; v < V; v++) p[v] /= sum;
        F w = row_weight ? F(row_weight[n]) : F(1);
        const int y = (int)targets[n];
        F nll = mix ? mixed_nll(z, zmax, F(std::log(sum)), y, mix + 2 * n) : -std::log(p[y]);
        if (smoothing != 0.0f) {
            F mean_shifted = 0;  // 1/V sum_v (z_v - zmax)
            for (int v = 0; v < V; v++) mean_shifted += z[v] - zmax;
            mean_shifted /= F(V);
            nll = (F(1) - F(smoothing)) * nll + F(smoothing) * (std::log(sum) - mean_shifted);
        }
        losses[n] = w == F(0) ? F(0) : nll * w;
    }
}

template <typename F>
void crossentropy_backward_cpu(F* dlogits, const F* probs, const float* targets, const float* row_weight,
                               float count, int N, int V, float smoothing = 0.0f, const float* mix = nullptr) {
    // dlogits (N,V), probs (N,V), targets (N), row_weight (N) or nullptr, mix (N,2) or nullptr
    // q_v: 1 - ε + ε/V on the target, ε/V elsewhere (exactly 1 and 0 when ε = 0)
    const F q_off = F(smoothing) / F(V), q_target = (F(1) - F(smoothing)) + q_off;
    #pragma omp parallel for if (worth_threads((size_t)N * V * 8))
    for (int n = 0; n < N; n++) {
        F scale = (row_weight ? F(row_weight[n]) : F(1)) / F(count);
        for (int v = 0; v < V; v++) {
            const F q = mix ? mixed_target<F>(v, (int)targets[n], mix + 2 * n, smoothing, V)
                            : v == (int)targets[n] ? q_target : q_off;
            dlogits[(size_t)n * V + v] += (probs[(size_t)n * V + v] - q) * scale;
        }
    }
}

__global__ void crossentropy_forward_kernel1(float* __restrict__ losses, float* __restrict__ probs,
                                             const float* __restrict__ logits, const float* __restrict__ targets,
                                             const float* __restrict__ row_weight, int N, int V, float smoothing,
                                             const float* __restrict__ mix) {
    // mix (N,2) or nullptr
    int n = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per row
    if (n >= N) return;
    const float* z = logits + (size_t)n * V;
    float* p = probs + (size_t)n * V;
    float zmax = z[0];
    for (int v = 1; v < V; v++) zmax = fmaxf(zmax, z[v]);
    float sum = 0;
    for (int v = 0; v < V; v++) { p[v] = expf(z[v] - zmax); sum += p[v]; }
    for (int v = 0; v < V; v++) p[v] /= sum;
    float w = row_weight ? row_weight[n] : 1.0f;
    float nll = mix ? mixed_nll(z, zmax, logf(sum), (int)targets[n], mix + 2 * n) : -logf(p[(int)targets[n]]);
    if (smoothing != 0.0f) {
        float mean_shifted = 0;  // 1/V sum_v (z_v - zmax)
        for (int v = 0; v < V; v++) mean_shifted += z[v] - zmax;
        mean_shifted /= (float)V;
        nll = (1.0f - smoothing) * nll + smoothing * (logf(sum) - mean_shifted);
    }
    losses[n] = w == 0.0f ? 0.0f : nll * w;
}

// kernel 2 (Kernels::fast_layers): a warp per row. kernel1's lone thread walks the V logits three times
// (max, exponentials and sum, normalising): for a language model's V in the thousands that is
// tens of thousands of steps in one thread. Here 32 lanes share each walk, and warp reductions
// combine their max and sums (in another order than kernel1's left-to-right sum: the bits differ
// within rounding).
__global__ void crossentropy_forward_kernel2(float* __restrict__ losses, float* __restrict__ probs,
                                             const float* __restrict__ logits, const float* __restrict__ targets,
                                             const float* __restrict__ row_weight, int N, int V, float smoothing,
                                             const float* __restrict__ mix) {
    // as kernel1: losses (N), probs (N,V), logits (N,V), targets (N), row_weight (N) or nullptr, mix (N,2) or nullptr
    const int n = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (n >= N) return;  // the whole warp
    const float* z = logits + (size_t)n * V;
    float* p = probs + (size_t)n * V;
    float lane_max = -INFINITY;
    for (int v = lane; v < V; v += WARP) lane_max = fmaxf(lane_max, z[v]);
    const float zmax = warp_max(lane_max);
    float lane_sum = 0, lane_shifted = 0;  // sums of e^(z_v - zmax) and of z_v - zmax
    for (int v = lane; v < V; v += WARP) {
        p[v] = expf(z[v] - zmax);
        lane_sum += p[v];
        lane_shifted += z[v] - zmax;
    }
    const float sum = warp_sum(lane_sum), mean_shifted = warp_sum(lane_shifted) / (float)V;
    for (int v = lane; v < V; v += WARP) p[v] /= sum;
    __syncwarp();  // lane 0 reads p at the target, which another lane may have written
    if (lane != 0) return;
    const float w = row_weight ? row_weight[n] : 1.0f;
    float nll = mix ? mixed_nll(z, zmax, logf(sum), (int)targets[n], mix + 2 * n) : -logf(p[(int)targets[n]]);
    if (smoothing != 0.0f) nll = (1.0f - smoothing) * nll + smoothing * (logf(sum) - mean_shifted);
    losses[n] = w == 0.0f ? 0.0f : nll * w;
}

__global__ void crossentropy_backward_kernel1(float* __restrict__ dlogits, const float* __restrict__ probs,
                                              const float* __restrict__ targets, const float* __restrict__ row_weight,
                                              const float* __restrict__ count, int N, int V, float smoothing,
                                              const float* __restrict__ mix) {
    // count: one float on the device (it changes with the batch's loss mask, so a graph reads it); mix (N,2) or nullptr
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over N*V
    if (idx >= (size_t)N * V) return;
    int n = (int)(idx / V), v = (int)(idx % V);
    float scale = (row_weight ? row_weight[n] : 1.0f) / *count;
    float q_off = smoothing / (float)V, q_target = (1.0f - smoothing) + q_off;
    const float q = mix ? mixed_target<float>(v, (int)targets[n], mix + 2 * n, smoothing, V)
                        : v == (int)targets[n] ? q_target : q_off;
    dlogits[idx] += (probs[idx] - q) * scale;
}

inline void crossentropy_forward(Device dev, const Kernels& kernels, float* losses, float* probs, const float* logits,
                                 const float* targets, const float* row_weight, int N, int V,
                                 float smoothing = 0.0f, const float* mix = nullptr) {
    if (dev == DEVICE_CPU)
        return crossentropy_forward_cpu(losses, probs, logits, targets, row_weight, N, V, smoothing, mix);
    // --profile's cost: the logits read, the probabilities written; a row's thread walks V three
    // times (kernel 1), a lane a 32nd of that (kernel 2)
    const double walk = 3.0 * (kernels.fast_layers ? ceil_div(V, WARP) : V);
    const LaunchCost cost{4.0 * (2.0 * N * V + 3.0 * N), 5.0 * N * V, walk};
    if (kernels.fast_layers)
        launch_kernel<crossentropy_forward_kernel2>(cost, ceil_div(N, 4), 4 * WARP, 0, losses, probs, logits, targets,
                                                    row_weight, N, V, smoothing, mix);
    else
        launch_kernel<crossentropy_forward_kernel1>(cost, ceil_div(N, BLOCK), BLOCK, 0, losses, probs, logits,
                                                    targets, row_weight, N, V, smoothing, mix);
}

// count: the loss's denominator (the counted rows), one float on dev
inline void crossentropy_backward(Device dev, float* dlogits, const float* probs, const float* targets,
                                  const float* row_weight, const float* count, int N, int V, float smoothing = 0.0f,
                                  const float* mix = nullptr) {
    if (dev == DEVICE_CPU)
        return crossentropy_backward_cpu(dlogits, probs, targets, row_weight, *count, N, V, smoothing, mix);
    launch_kernel<crossentropy_backward_kernel1>(pointwise_cost((size_t)N * V, 2, 1, 4), ceil_div((size_t)N * V, BLOCK),
                                                 BLOCK, 0, dlogits, probs, targets, row_weight, count, N, V, smoothing,
                                                 mix);
}

// ----------------------------------------------------------------------------
// The readout's loss: the MSE or the logistic loss (Config::loss) of a regression readout's one
// value per row, or the cross-entropy of a classifier's or a next-token readout's logits (R,OUT).
// What the rows are compared with, on dev:
struct LossTargets {
    const float* targets;     // (R) a value, a ±1 label, or a class id
    const float* row_weight;  // (R) 0/1: the rows that count (the next-token loss mask); nullptr: all count
    const float* count;       // (1) the rows that count: the cross-entropy's denominator
    const float* mix;         // (R,2) a mixed batch's second class and λ per row (recipe/mix.h); nullptr: unmixed
    float smoothing;          // the cross-entropy's label smoothing ε
};

inline void readout_loss_forward(Device dev, const Kernels& k, const Config& c, float* losses, float* probs,
                                 const float* logits, const LossTargets& t, int R) {
    if (c.readout != READOUT_REGRESSION)
        return crossentropy_forward(dev, k, losses, probs, logits, t.targets, t.row_weight, R, c.OUT, t.smoothing,
                                    t.mix);
    if (c.loss == LOSS_LOGISTIC) return logistic_forward(dev, losses, logits, t.targets, R);
    mse_forward(dev, losses, logits, t.targets, R);
}

// dlogits (R,OUT) += the gradient of the mean loss
inline void readout_loss_backward(Device dev, const Config& c, float* dlogits, const float* probs,
                                  const float* logits, const LossTargets& t, int R) {
    if (c.readout != READOUT_REGRESSION)
        return crossentropy_backward(dev, dlogits, probs, t.targets, t.row_weight, t.count, R, c.OUT, t.smoothing,
                                     t.mix);
    if (c.loss == LOSS_LOGISTIC) return logistic_backward(dev, dlogits, logits, t.targets, R);
    mse_backward(dev, dlogits, logits, t.targets, R);
}
