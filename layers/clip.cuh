// layers/clip.cuh: clipping the gradient by its global norm, as torch.nn.utils.clip_grad_norm_ does:
//   norm = sqrt(sum_i g_i^2)                   over every parameter's gradient at once
//   if norm > max_norm:  g_i *= max_norm / (norm + 1e-6)   for every i, so the norm becomes max_norm
// The direction of the step is kept; only its length is capped, which tames the rare huge gradient
// (a ViT's first steps, a spike mid-run) without touching the ordinary ones.
//
// The sum of squares is deterministic on both devices, without atomics: the gradient is cut into
// chunks of GRAD_NORM_CHUNK elements, each chunk is summed in double in a fixed order into
// partials[k], and the partials are added in a fixed order. On the CPU a chunk is summed in
// index order (whichever thread takes it, so the result is the same at every thread count) and
// the partials in index order; on the GPU one block of 256 threads takes a chunk, each thread a
// strided slice, then a fixed tree in shared memory, and one more block adds the partials the
// same way. The two devices sum in different orders, so they agree to rounding, not bits.
// On the GPU the host never sees the norm during a step: the last block writes it and the
// clipping factor to the device (GradNorm, at the end of the scratch), and the scaling kernel
// reads the factor there, so a captured graph replays the clip with each step's own norm.
#pragma once
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

constexpr size_t GRAD_NORM_CHUNK = 4096;  // elements per partial sum, on both devices
constexpr int GRAD_NORM_THREADS = 256;    // GPU threads per chunk: each sums GRAD_NORM_CHUNK / 256 = 16 elements
// (a power of two for block_tree_sum, layers/launch.cuh; the kernels' launches and __launch_bounds__)

inline size_t grad_norm_chunks(size_t n) { return (n + GRAD_NORM_CHUNK - 1) / GRAD_NORM_CHUNK; }

// The norm and what the clip multiplies the gradients by (1 when it does not clip), kept at the
// end of the scratch, on the device of the gradients
struct GradNorm {
    double norm;
    float factor;
};

// The scratch grad_norm needs for n gradients, in floats: one double partial sum per chunk, two
// floats each, then a GradNorm. Allocate it once, as a buffer of its own (buffer_alloc on the
// device of the gradients), so that it is aligned for the doubles it holds.
inline size_t grad_norm_scratch_size(size_t n) { return 2 * grad_norm_chunks(n) + sizeof(GradNorm) / sizeof(float); }

inline GradNorm* grad_norm_result(float* scratch, size_t n) {
    return reinterpret_cast<GradNorm*>(scratch + 2 * grad_norm_chunks(n));
}

// ----------------------------------------------------------------------------
// The sum of squares: partials[k] = sum of g_i^2 over chunk k, in double; then sum_k partials[k]

inline void grad_norm_partials_cpu(double* partials, const float* grads, size_t n) {
    // partials (grad_norm_chunks(n)), grads (n)
    const size_t chunks = grad_norm_chunks(n);
    #pragma omp parallel for if (worth_threads(n * 2))
    for (size_t k = 0; k < chunks; k++) {
        const size_t end = std::min(n, (k + 1) * GRAD_NORM_CHUNK);
        double sum = 0;
        for (size_t i = k * GRAD_NORM_CHUNK; i < end; i++) sum += (double)grads[i] * grads[i];
        partials[k] = sum;
    }
}

__global__ void __launch_bounds__(GRAD_NORM_THREADS)
grad_norm_partials_kernel1(double* __restrict__ partials, const float* __restrict__ grads, size_t n) {
    // one block per chunk; thread t sums elements t, t + 256, t + 512, ... of the chunk
    __shared__ double sums[GRAD_NORM_THREADS];
    const int t = threadIdx.x;
    const size_t start = (size_t)blockIdx.x * GRAD_NORM_CHUNK;
    const size_t end = start + GRAD_NORM_CHUNK < n ? start + GRAD_NORM_CHUNK : n;
    double sum = 0;
    for (size_t i = start + t; i < end; i += GRAD_NORM_THREADS) sum += (double)grads[i] * grads[i];
    sums[t] = sum;
    const double total = block_tree_sum<GRAD_NORM_THREADS>(sums, t);
    if (t == 0) partials[blockIdx.x] = total;
}

// the CPU's last stage: the partials added in index order
inline double sum_partials_in_order(const double* partials, size_t count) {
    double sum = 0;
    for (size_t k = 0; k < count; k++) sum += partials[k];
    return sum;
}

// the clipping factor of a norm: max_norm / (norm + 1e-6) above max_norm, else 1 (max_norm 0: no clipping)
__host__ __device__ inline float clip_factor(double norm, float max_norm) {
    return max_norm > 0 && norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
}

// the GPU's last stage, one block: the partials' block_strided_sum (layers/launch.cuh); thread 0
// writes the norm and the clipping factor
__global__ void __launch_bounds__(GRAD_NORM_THREADS)
grad_norm_finish_kernel1(GradNorm* __restrict__ result, const double* __restrict__ partials, size_t chunks,
                         float max_norm) {
    __shared__ double sums[GRAD_NORM_THREADS];
    const int t = threadIdx.x;
    const double total = block_strided_sum<GRAD_NORM_THREADS>(partials, chunks, sums, t);
    if (t == 0) {
        result->norm = sqrt(total);
        result->factor = clip_factor(result->norm, max_norm);
    }
}

// The norm of grads (n) into grad_norm_result(scratch, n), with the clipping factor for max_norm
// (0: none); grads and scratch (grad_norm_scratch_size(n) floats) on dev. The host waits for nothing.
inline void grad_norm(Device dev, const float* grads, size_t n, float max_norm, float* scratch) {
    const size_t chunks = grad_norm_chunks(n);
    double* partials = reinterpret_cast<double*>(scratch);
    GradNorm* result = grad_norm_result(scratch, n);
    if (dev == DEVICE_CPU) {
        grad_norm_partials_cpu(partials, grads, n);
        result->norm = std::sqrt(sum_partials_in_order(partials, chunks));
        result->factor = clip_factor(result->norm, max_norm);
        return;
    }
    const LaunchCost cost{4.0 * n + 8.0 * chunks, 2.0 * n, GRAD_NORM_CHUNK / GRAD_NORM_THREADS};
    if (chunks > 0)
        launch_kernel<grad_norm_partials_kernel1>(cost, (unsigned int)chunks, GRAD_NORM_THREADS, 0, partials, grads, n);
    const LaunchCost finish{8.0 * chunks + 12, (double)chunks, std::ceil((double)chunks / GRAD_NORM_THREADS)};
    launch_kernel<grad_norm_finish_kernel1>(finish, 1, GRAD_NORM_THREADS, 0, result, partials, chunks, max_norm);
}

// ----------------------------------------------------------------------------
// Scaling the gradients in place by the clipping factor: x[i] *= factor. The GPU launches it
// whatever the norm (a multiplication by exactly 1 keeps the bits), so that a graph holds the
// same launches every step.

inline void scale_buffer_cpu(float* x, size_t n, float factor) {  // x (n)
    #pragma omp parallel for if (worth_threads(n))
    for (size_t i = 0; i < n; i++) x[i] *= factor;
}

__global__ void scale_by_clip_kernel1(float* __restrict__ x, size_t n, const GradNorm* __restrict__ clip) {
    // x (n); clip: one, on the device
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= clip->factor;
}

// ----------------------------------------------------------------------------
// The clip itself, on the gradient of every parameter at once: grads (n), scratch as for
// grad_norm. clip_gradients leaves the norm before clipping in grad_norm_result(scratch, n);
// clip_grad_norm also returns it, as torch's clip_grad_norm_ does (on the GPU it waits for it).

inline void clip_gradients(Device dev, float* grads, size_t n, float max_norm, float* scratch) {
    grad_norm(dev, grads, n, max_norm, scratch);
    const GradNorm* result = grad_norm_result(scratch, n);
    if (dev == DEVICE_CPU) {
        if (result->factor != 1.0f) scale_buffer_cpu(grads, n, result->factor);
        return;
    }
    launch_kernel<scale_by_clip_kernel1>(pointwise_cost(n, 1, 1), ceil_div(n, BLOCK), BLOCK, 0, grads, n, result);
}

// the norm grad_norm left in scratch, read by the host (on the GPU, a copy that waits for it)
inline double grad_norm_read(Device dev, float* scratch, size_t n) {
    GradNorm result;
    if (dev == DEVICE_CPU) result = *grad_norm_result(scratch, n);
    else device_copy(&result, grad_norm_result(scratch, n), sizeof result, cudaMemcpyDeviceToHost);
    return result.norm;
}

// the norm of grads (n), read by the host
inline double grad_norm_of(Device dev, const float* grads, size_t n, float* scratch) {
    grad_norm(dev, grads, n, 0.0f, scratch);
    return grad_norm_read(dev, scratch, n);
}

inline double clip_grad_norm(Device dev, float* grads, size_t n, float max_norm, float* scratch) {
    clip_gradients(dev, grads, n, max_norm, scratch);
    return grad_norm_read(dev, scratch, n);
}
