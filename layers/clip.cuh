// layers/clip.cuh: clipping the gradient by its global norm, as torch.nn.utils.clip_grad_norm_ does:
//   norm = sqrt(sum_i g_i^2)                   over every parameter's gradient at once
//   if norm > max_norm:  g_i *= max_norm / (norm + 1e-6)   for every i, so the norm becomes max_norm
// The direction of the step is kept; only its length is capped, which tames the rare huge gradient
// (a ViT's first steps, a spike mid-run) without touching the ordinary ones.
//
// The sum of squares is deterministic on both devices, without atomics: the gradient is cut into
// chunks of GRAD_NORM_CHUNK elements, each chunk is summed in double in a fixed order into
// partials[k], and the host adds the partials in index order. On the CPU a chunk is summed in
// index order (whichever thread takes it, so the result is the same at every thread count); on
// the GPU one block of 256 threads takes a chunk, each thread a strided slice, then a fixed tree
// in shared memory. The two devices sum in different orders, so they agree to rounding, not bits.
#pragma once
#include <vector>
#include "layers/common.cuh"  // Device, launch_kernel, worth_threads, cudaCheck

constexpr size_t GRAD_NORM_CHUNK = 4096;  // elements per partial sum, on both devices
constexpr int GRAD_NORM_THREADS = 256;    // GPU threads per chunk: each sums GRAD_NORM_CHUNK / 256 = 16 elements
// the kernel's tree halves the block: a power of two, and its launch is GRAD_NORM_THREADS (its __launch_bounds__)
static_assert((GRAD_NORM_THREADS & (GRAD_NORM_THREADS - 1)) == 0, "the norm's tree needs a power of two");

inline size_t grad_norm_chunks(size_t n) { return (n + GRAD_NORM_CHUNK - 1) / GRAD_NORM_CHUNK; }

// The scratch grad_norm_squared needs for n gradients, in floats: one double partial sum per
// chunk, two floats each. Allocate it once, as a buffer of its own (buffer_alloc on the device of
// the gradients), so that it is aligned for the doubles it holds.
inline size_t grad_norm_scratch_size(size_t n) { return 2 * grad_norm_chunks(n); }

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
    __syncthreads();
    for (int half = GRAD_NORM_THREADS / 2; half > 0; half /= 2) {  // the tree: sums[t] += sums[t + half]
        if (t < half) sums[t] += sums[t + half];
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = sums[0];
}

// the last stage on both devices: the partials added on the host, in index order
inline double sum_partials_in_order(const double* partials, size_t count) {
    double sum = 0;
    for (size_t k = 0; k < count; k++) sum += partials[k];
    return sum;
}

inline double grad_norm_squared(Device dev, const float* grads, size_t n, float* scratch) {
    // grads (n) and scratch (grad_norm_scratch_size(n) floats, holding the doubles partials) on dev
    const size_t chunks = grad_norm_chunks(n);
    if (chunks == 0) return 0;
    double* partials = reinterpret_cast<double*>(scratch);
    if (dev == DEVICE_CPU) {
        grad_norm_partials_cpu(partials, grads, n);
        return sum_partials_in_order(partials, chunks);
    }
    const LaunchCost cost{4.0 * n + 8.0 * chunks, 2.0 * n, GRAD_NORM_CHUNK / GRAD_NORM_THREADS};
    launch_kernel<grad_norm_partials_kernel1>(cost, (unsigned int)chunks, GRAD_NORM_THREADS, 0, partials, grads, n);
    std::vector<double> host(chunks);
    device_copy(host.data(), partials, chunks * sizeof(double), cudaMemcpyDeviceToHost);
    return sum_partials_in_order(host.data(), chunks);
}

// ----------------------------------------------------------------------------
// Scaling a buffer in place: x[i] *= factor

inline void scale_buffer_cpu(float* x, size_t n, float factor) {  // x (n)
    #pragma omp parallel for if (worth_threads(n))
    for (size_t i = 0; i < n; i++) x[i] *= factor;
}

__global__ void scale_buffer_kernel1(float* x, size_t n, float factor) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}

inline void scale_buffer(Device dev, float* x, size_t n, float factor) {
    if (dev == DEVICE_CPU) return scale_buffer_cpu(x, n, factor);
    launch_kernel<scale_buffer_kernel1>(pointwise_cost(n, 1, 1), ceil_div(n, BLOCK), BLOCK, 0, x, n, factor);
}

// ----------------------------------------------------------------------------
// The clip itself, on the gradient of every parameter at once: grads (n), scratch as for
// grad_norm_squared. Returns the norm before clipping (as torch's clip_grad_norm_), to log.

inline double clip_grad_norm(Device dev, float* grads, size_t n, float max_norm, float* scratch) {
    const double norm = std::sqrt(grad_norm_squared(dev, grads, n, scratch));
    if (norm > max_norm) scale_buffer(dev, grads, n, (float)(max_norm / (norm + 1e-6)));
    return norm;
}
