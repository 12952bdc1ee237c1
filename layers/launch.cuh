// layers/launch.cuh: what a kernel and its launcher lean on: launch_kernel (every launch goes
// through it), ceil_div and BLOCK, the warp reductions, a block's fixed-order sums, UNROLL and
// DYNAMIC_SHARED.
#pragma once
#include <cstddef>
#include "gpu/cuda.cuh"      // dim3, the kernel keywords (or the emulation's), cudaGetLastError, cuda_fail, GPU_EMULATED
#include "gpu/profile.h"     // profiler, LaunchCost, profiled_kernel_name: what --profile records
#include "gpu/stream.cuh"    // gpu_stream: every launch goes on it
#include "layers/device.cuh" // Device, buffers: what a launcher works on

// Blocks of `block` threads that cover n elements: the grid size of a one-thread-per-element
// kernel. n is a size_t, so callers multiply their dims as size_t: B·T·V can pass 2^31.
inline unsigned int ceil_div(size_t n, int block) { return (unsigned int)((n + block - 1) / block); }

constexpr int BLOCK = 256;  // threads per block for the simple one-thread-per-element kernels

// Every kernel is launched here: launch_kernel<kernel>(grid, block, shared_bytes, args...) is
// kernel<<<grid, block, shared_bytes, gpu_stream()>>>(args...) and the check of its launch. Under
// the CPU emulation (emu/) the same call checks the launch configuration and every pointer
// argument, then runs the kernel's threads on the CPU (or, while the stream captures a graph,
// records the launch for the graph's replays). A launcher that knows what its launch costs says
// so first, launch_kernel<kernel>(cost, grid, ...), for --profile (gpu/profile.h).
template <auto kernel, typename... Args>
inline void launch_kernel(LaunchCost cost, dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    const bool recording = profiler().recording;  // timed with events on a GPU, not on the emulation
    if (recording) profiler().begin(profiled_kernel_name<kernel>(), grid, block, shared_bytes, cost, !GPU_EMULATED);
#ifdef MASKPRIOR_CUDA_EMULATION
    emu::launch_on<kernel>(gpu_stream(), grid, block, shared_bytes, args...);
#else
    kernel<<<grid, block, shared_bytes, gpu_stream()>>>(args...);
#endif
    if (recording) profiler().end();
    // the launch's own error (its configuration), or with CUDA_LAUNCH_BLOCKING=1 its kernel's fault too
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) cuda_fail(err, "after the launch of " + profiled_kernel_name<kernel>());
}

template <auto kernel, typename... Args>
inline void launch_kernel(dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    launch_kernel<kernel>(LaunchCost{}, grid, block, shared_bytes, args...);
}

// ----------------------------------------------------------------------------
// warps: 32 threads that run in lockstep. A warp reduction leaves the max (sum) of the 32 lanes'
// values in every lane: five butterfly steps of __shfl_xor_sync (offsets 16, 8, 4, 2, 1), in
// registers, in the same order at every run (attention/warp.cuh says more).

constexpr int WARP = 32;

__device__ inline float warp_max(float x) {
    for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, offset));
    return x;
}

__device__ inline float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xFFFFFFFFu, x, offset);
    return x;
}

// The sum of a block's values, a fixed tree in shared memory: thread t has written its value to
// sums[t] (THREADS of them, THREADS a power of two and the block's size); at each level thread
// t < half adds sums[t + half], halving until sums[0] holds the total, in the same order at every
// run. Every thread of the block calls it; each gets the total.
template <int THREADS, typename T>
__device__ inline T block_tree_sum(T* sums, int t) {
    static_assert((THREADS & (THREADS - 1)) == 0, "the tree halves the block: a power of two");
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half) sums[t] += sums[t + half];
        __syncthreads();
    }
    return sums[0];
}

// The sum of x[0..n) by one block of THREADS threads, in double, in a fixed order: thread t adds
// x[t], x[t + THREADS], ... in order into sums[t] (THREADS of them, in shared memory), then
// block_tree_sum. Every thread of the block calls it; each gets the total.
template <int THREADS, typename T>
__device__ inline double block_strided_sum(const T* x, size_t n, double* sums, int t) {
    double sum = 0;
    for (size_t i = t; i < n; i += THREADS) sum += x[i];
    sums[t] = sum;
    return block_tree_sum<THREADS>(sums, t);
}

// UNROLL before a loop: nvcc unrolls it (#pragma unroll). A per-thread array stays in registers
// only when every index into it is known at compile time, so the loops over one must be
// unrolled, or the array goes to (slow) local memory; `nvcc -Xptxas -v` shows which: a "stack
// frame" of its size. The emulation's host compiler needs no such hint.
#ifdef MASKPRIOR_CUDA_EMULATION
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

// extern __shared__ T name[]: the launch's dynamic shared memory, shared_bytes of it
#ifdef MASKPRIOR_CUDA_EMULATION
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(emu::dynamic_shared_memory())
#else
#define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

