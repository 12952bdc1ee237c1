// gpu/device_step.cuh: what a training step computes and keeps on the device besides the model's
// buffers, so that on the GPU the host waits for it only where it reads a result (a logging,
// evaluation or checkpoint step), never in between:
//   - the step's scalars (StepScalars), which the host hands over with each batch (in the batch
//     block, gpu/model_batch.cuh);
//   - the mean loss, summed on the device in a fixed order (loss_mean_kernel1);
//   - the step log (StepLog): the last step's loss, the first non-finite one and its step, and a
//     classifier's top-1 hits on its training batches, kept over the steps until the host reads
//     it (step_log_kernel1).
// The CPU computes the same, in host memory, with the same functions.
#pragma once
#include <cmath>
#include <cstdint>
#include "layers/adamw.cuh"   // AdamWStep
#include "layers/launch.cuh"  // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

// What the host hands the device with each batch
struct StepScalars {
    float loss_count = 0;  // the loss's denominator: the counted rows (next token: the counted positions)
    AdamWStep adam{};      // this step's learning rate and Adam's bias corrections (training steps)
    int64_t step = 0;      // the step's index, which the step log names
};

// What the device keeps of the training steps since the host last read it (and cleared it)
struct StepLog {
    float loss;              // the last step's mean loss
    float first_bad_loss;    // the first loss that was not finite ...
    int64_t first_bad_step;  // ... and its step; -1: none
    int64_t correct, seen;   // a classifier's top-1 hits and rows on its training batches
};

inline StepLog step_log_cleared() { return {0.0f, 0.0f, -1, 0, 0}; }

// ----------------------------------------------------------------------------
// the mean loss on the device: mean = sum_r losses[r] / count, the sum in double in a fixed
// order (block_strided_sum, layers/launch.cuh: one block, thread t adding rows t, t + 256, ...,
// then a tree); count is one float on the device

constexpr int LOSS_MEAN_THREADS = 256;  // a power of two: block_tree_sum's tree (layers/launch.cuh)

__global__ void __launch_bounds__(LOSS_MEAN_THREADS)
loss_mean_kernel1(float* __restrict__ mean, const float* __restrict__ losses, int R, const float* __restrict__ count) {
    // mean (1), losses (R), count (1)
    __shared__ double sums[LOSS_MEAN_THREADS];
    const int t = threadIdx.x;
    const double total = block_strided_sum<LOSS_MEAN_THREADS>(losses, (size_t)R, sums, t);
    if (t == 0) *mean = (float)(total / *count);
}

// mean (1), losses (R) and count (1) on dev
inline void loss_mean(Device dev, float* mean, const float* losses, int R, const float* count) {
    if (dev == DEVICE_CPU) {
        double sum = 0;
        for (int r = 0; r < R; r++) sum += losses[r];  // fixed order: reproducible
        *mean = (float)(sum / *count);
        return;
    }
    const LaunchCost cost{4.0 * R + 8, (double)R, std::ceil((double)R / LOSS_MEAN_THREADS)};
    launch_kernel<loss_mean_kernel1>(cost, 1, LOSS_MEAN_THREADS, 0, mean, losses, R, count);
}

// ----------------------------------------------------------------------------
// the step log: after each training step, its loss, whether it is the first that is not finite,
// and (classes > 0) the top-1 hits of its logits. The top class is the first of the largest
// logits, as std::max_element finds it (tasks/task.h, top_class). A hit is against the row's
// target class; in a mixed batch (recipe/mix.h) that is the row's own class, of weight λ.

__host__ __device__ inline int top_class_of(const float* row, int classes) {
    int best = 0;
    for (int k = 1; k < classes; k++)
        if (row[best] < row[k]) best = k;
    return best;
}

// x - x is 0 for a finite x, NaN for an infinity or a NaN (the same test on host and device)
__host__ __device__ inline bool is_finite_value(float x) { return x - x == 0.0f; }

__host__ __device__ inline void step_log_loss(StepLog& log, float loss, int64_t step) {
    log.loss = loss;
    if (!is_finite_value(loss) && log.first_bad_step < 0) {
        log.first_bad_step = step;
        log.first_bad_loss = loss;
    }
}

// one block: thread t counts the hits of rows t, t + 256, ..., then a tree (integers: the order
// cannot change the sum, but it is fixed anyway); thread 0 writes the log
__global__ void __launch_bounds__(LOSS_MEAN_THREADS)
step_log_kernel1(StepLog* __restrict__ log, const float* __restrict__ mean, const StepScalars* __restrict__ scalars,
                 const float* __restrict__ logits, const float* __restrict__ targets, int rows, int classes) {
    // log (1), mean (1), scalars (1), logits (rows, classes), targets (rows); classes 0: no hits to count
    __shared__ int hits[LOSS_MEAN_THREADS];
    const int t = threadIdx.x;
    int mine = 0;
    for (int r = t; classes > 0 && r < rows; r += LOSS_MEAN_THREADS)
        mine += top_class_of(logits + (size_t)r * classes, classes) == (int)targets[r];
    hits[t] = mine;
    const int total = block_tree_sum<LOSS_MEAN_THREADS>(hits, t);
    if (t != 0) return;
    step_log_loss(*log, *mean, scalars->step);
    if (classes > 0) {
        log->correct += total;
        log->seen += rows;
    }
}

// the same on the CPU: logits (rows, classes) and targets (rows) in host memory
inline void step_log_add_cpu(StepLog& log, float loss, int64_t step, const float* logits, const float* targets,
                             int rows, int classes) {
    step_log_loss(log, loss, step);
    if (classes == 0) return;
    for (int r = 0; r < rows; r++)
        log.correct += top_class_of(logits + (size_t)r * classes, classes) == (int)targets[r];
    log.seen += rows;
}

// After a training forward pass: its loss (mean), the step's index (scalars), and a classifier's
// hits, into the log; all on dev
inline void step_log_add(Device dev, StepLog* log, const float* mean, const StepScalars* scalars,
                         const float* logits, const float* targets, int rows, int classes) {
    if (dev == DEVICE_CPU) return step_log_add_cpu(*log, *mean, scalars->step, logits, targets, rows, classes);
    const LaunchCost cost{4.0 * ((double)rows * classes + rows) + 48, (double)rows * classes,
                          std::ceil((double)rows / LOSS_MEAN_THREADS) * classes};
    launch_kernel<step_log_kernel1>(cost, 1, LOSS_MEAN_THREADS, 0, log, mean, scalars, logits, targets, rows, classes);
}
