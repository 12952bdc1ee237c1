// gpu/device_step.cuh: what a step on the GPU keeps on the device, so that the host waits for
// it only where it reads a result (a logging, evaluation or checkpoint step), never in between:
//   - the batch block (DeviceBatch): a batch's inputs (token ids or pixels, targets, the loss
//     mask, the token rows of the embedding's kernel 2, a mixed image batch's second classes and
//     weights: recipe/mix.h) and the step's scalars (StepScalars), in
//     one device allocation at fixed addresses, filled by one asynchronous copy from one of two
//     pinned host copies of it: the host fills one while the other's copy may still be queued;
//   - the mean loss, summed on the device in a fixed order (loss_mean_kernel1);
//   - the step log (StepLog): the last step's loss, the first non-finite one and its step, and a
//     classifier's top-1 hits on its training batches, kept over the steps until the host reads
//     it (step_log_kernel1). On the CPU the host keeps the same log (step_log_add_cpu).
// Fixed addresses and values read from device memory are what let a graph (gpu/graph.cuh)
// replay a step: a captured launch keeps its arguments, so whatever changes from step to step
// must be in memory the launch points to, not in the arguments.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include "layers/adamw.cuh"   // AdamWStep
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

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

// The arrays of one batch: room for `rows` examples
struct BatchShape {
    size_t token_ints = 0;      // (rows, T) token ids; 0 for an image model
    size_t pixel_floats = 0;    // (rows, channels, H, W); 0 for a token model
    size_t target_floats = 0;   // (rows · readout_rows)
    size_t mask_floats = 0;     // (rows · T) the next-token loss mask; 0 without one
    size_t token_row_ints = 0;  // TokenRows' array (layers/embedding.cuh); 0 where kernel 2 does not run
    size_t mix_floats = 0;      // (rows · 2) a mixed batch's second class and λ per row; 0 for a token model
};

// The batch block: the same layout (byte offsets) in pinned host memory and on the device
struct DeviceBatch {
    size_t tokens = 0, pixels = 0, targets = 0, loss_mask = 0, token_rows = 0, mix = 0, scalars = 0, bytes = 0;
    char* device = nullptr;          // the block on the device
    char* staging[2] = {nullptr, nullptr};  // two pinned host copies
    cudaEvent_t copied[2] = {nullptr, nullptr};  // recorded after each copy's upload: refilled after it
    int next = 0;                    // the copy the host fills next
    template <typename T>
    T* on_device(size_t offset) const { return reinterpret_cast<T*>(device + offset); }
};

// Lays out and allocates the block for a batch of that shape (the arrays 16-byte aligned).
inline void device_batch_build(DeviceBatch& b, const BatchShape& shape) {
    size_t at = 0;
    auto room = [&](size_t bytes) {
        const size_t offset = at;
        at += (bytes + 15) / 16 * 16;
        return offset;
    };
    b.tokens = room(shape.token_ints * sizeof(int));
    b.pixels = room(shape.pixel_floats * sizeof(float));
    b.targets = room(shape.target_floats * sizeof(float));
    b.loss_mask = room(shape.mask_floats * sizeof(float));
    b.token_rows = room(shape.token_row_ints * sizeof(int));
    b.mix = room(shape.mix_floats * sizeof(float));
    b.scalars = room(sizeof(StepScalars));
    b.bytes = at;
    cudaCheck(cudaMalloc(&b.device, b.bytes));
    for (int k = 0; k < 2; k++) {
        cudaCheck(cudaMallocHost((void**)&b.staging[k], b.bytes));
        memset(b.staging[k], 0, b.bytes);
        cudaCheck(cudaEventCreate(&b.copied[k]));
    }
}

inline void device_batch_free(DeviceBatch& b) {
    if (b.device) cudaCheck(cudaFree(b.device));
    for (int k = 0; k < 2; k++) {
        if (b.staging[k]) cudaCheck(cudaFreeHost(b.staging[k]));
        if (b.copied[k]) cudaCheck(cudaEventDestroy(b.copied[k]));
    }
    b = DeviceBatch();
}

// The pinned copy to fill with the next batch: the host waits until the upload from it two
// batches ago has left (at once unless the GPU is two steps behind; --profile counts the wait).
inline char* device_batch_begin(DeviceBatch& b) {
    profile_staging_wait();
    cudaCheck(cudaEventSynchronize(b.copied[b.next]));
    return b.staging[b.next];
}

// Uploads the copy just filled: one asynchronous copy on the stream, in order with the launches.
inline void device_batch_upload(DeviceBatch& b) {
    device_copy_async(b.device, b.staging[b.next], b.bytes, cudaMemcpyHostToDevice);
    cudaCheck(cudaEventRecord(b.copied[b.next], gpu_stream()));
    b.next ^= 1;
}

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

inline void loss_mean_gpu(float* mean, const float* losses, int R, const float* count) {
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

inline void step_log_add_gpu(StepLog* log, const float* mean, const StepScalars* scalars, const float* logits,
                             const float* targets, int rows, int classes) {
    const LaunchCost cost{4.0 * ((double)rows * classes + rows) + 48, (double)rows * classes,
                          std::ceil((double)rows / LOSS_MEAN_THREADS) * classes};
    launch_kernel<step_log_kernel1>(cost, 1, LOSS_MEAN_THREADS, 0, log, mean, scalars, logits, targets, rows, classes);
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
