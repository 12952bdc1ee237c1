// layers/common.cuh: the small things every layer and the model lean on, in this order:
//   - errors: fail() (errors.h) for bad input; cudaCheck / cublasCheck: CUDA errors are bugs, not
//     input, and abort with file:line
//   - devices: Device (where a buffer lives and a layer runs: CPU loops or CUDA kernels), the
//     GPU count, the architecture check, what the device is (the GPU's name, or the CPU's model,
//     vector width and threads)
//   - how the GPU computes: the stream, the cuBLAS handle and Kernels (versions, TF32, the graph)
//   - the CPU's paths: CPU_REFERENCE (the plain loops or the fast ones) and worth_threads
//   - buffers that allocate, clear and copy on either device (device_copy, device_copy_async: each
//     copy --profile counts)
//   - launching kernels (launch_kernel, ceil_div, BLOCK), warps (warp_max, warp_sum), a block's
//     fixed-order sums (block_tree_sum, block_strided_sum), UNROLL, DYNAMIC_SHARED
//   - Rng: a seeded xorshift64* generator (uniform and normal), so a seed fixes everything
//   - wall-clock timing
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <cmath>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#ifdef MASKPRIOR_CUDA_EMULATION  // the host compiler, without a GPU: emu/ runs the kernels on the CPU
#include "emu/cuda_emulation.h"
#include "emu/cublas_emulation.h"
#include "emu/cublaslt_emulation.h"
constexpr bool GPU_EMULATED = true;
#else
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
constexpr bool GPU_EMULATED = false;
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#include "layers/errors.h"   // fail(), InputError
#include "layers/profile.h"  // profiler, LaunchCost: what --profile records

// ----------------------------------------------------------------------------
// errors: bad input throws InputError through fail() (errors.h); CUDA errors are bugs

inline void cuda_check(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "maskprior: CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(err));
        exit(1);
    }
}
#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)

inline void cublas_check(cublasStatus_t status, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "maskprior: cuBLAS error %d at %s:%d\n", (int)status, file, line);
        exit(1);
    }
}
#define cublasCheck(status) cublas_check((status), __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// devices

enum Device { DEVICE_CPU = 0, DEVICE_GPU = 1 };

// Number of usable CUDA devices; 0 when there is no driver or no GPU (never an error).
inline int gpu_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}

// The SIMD width the host code was compiled for (the -march of the build decides it, not the
// machine it runs on): what the CPU loops can use.
inline int cpu_vector_bits() {
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX__)
    return 256;
#elif defined(__SSE2__)
    return 128;
#else
    return 0;
#endif
}

// OpenMP threads of the CPU loops (1 in a build without OpenMP)
inline int cpu_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// The compute capability the GPU code was built for (make ARCH=...; 0 under the emulation)
#ifndef MASKPRIOR_CUDA_ARCH
#define MASKPRIOR_CUDA_ARCH 0
#endif

// What to say when the GPU (compute capability `present`, 80 for sm_80) is not the one the code
// was built for (`built`): "" when it is; for an older GPU, which cannot run the code at all, an
// error; for a newer one, which compiles the binary's PTX at start-up, a note (is_error false).
inline std::string gpu_arch_mismatch(int built, int present, bool* is_error) {
    *is_error = present < built;
    if (present == built) return "";
    const std::string line = "built for sm_" + std::to_string(built) + ", this GPU is sm_" + std::to_string(present);
    if (*is_error) return line + ": make ARCH=" + std::to_string(present);
    return line + ": its PTX is compiled at start-up (make ARCH=" + std::to_string(present) + " builds for it)";
}

// The line above, at start-up on a GPU: an error fails, a note goes to stderr
inline void check_gpu_arch() {
    if (MASKPRIOR_CUDA_ARCH == 0) return;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    bool is_error = false;
    const std::string line = gpu_arch_mismatch(MASKPRIOR_CUDA_ARCH, prop.major * 10 + prop.minor, &is_error);
    if (is_error) fail("%s", line.c_str());
    if (!line.empty()) fprintf(stderr, "maskprior: note: %s\n", line.c_str());
}

// "NVIDIA H200 (CUDA)", or the CPU's model name with its vector width and thread count
inline std::string device_name(Device dev) {
    if (dev == DEVICE_GPU) {
        cudaDeviceProp prop;
        cudaCheck(cudaGetDeviceProperties(&prop, 0));
        return std::string(prop.name) + " (CUDA)";
    }
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, model = "CPU";
    while (std::getline(cpuinfo, line))
        if (line.rfind("model name", 0) == 0) { model = line.substr(line.find(':') + 2); break; }
    return model + ", " + std::to_string(cpu_vector_bits()) + "-bit vectors, " +
           std::to_string(cpu_threads()) + " threads (CPU)";
}

// ----------------------------------------------------------------------------
// how the GPU computes

// The one stream of the process (GPU runs only), created on first use: every launch, copy,
// memset and cuBLAS call goes on it, in order, so that the host never waits for the GPU except
// where it reads a result, and a whole training step can be captured as one CUDA graph
// (run/graph.cuh). A plain cudaStreamCreate stream, so a synchronous call on the legacy
// default stream still waits for it.
inline cudaStream_t gpu_stream() {
    static cudaStream_t stream = nullptr;
    if (!stream) cudaCheck(cudaStreamCreate(&stream));
    return stream;
}

// cuBLAS's workspace, given to it once: a handle without one allocates its own on first use,
// which a graph capture cannot hold. 32 MiB, what NVIDIA recommends for Hopper.
constexpr size_t CUBLAS_WORKSPACE_BYTES = size_t(32) << 20;

// The one cuBLAS handle of the process, created on first use (GPU runs only) with the stream and
// the workspace above, set to the math of the call about to use it: plain fp32 sgemm, or TF32
// tensor cores where the caller's Kernels say tf32 (--tf32).
inline cublasHandle_t cublas_handle(bool tf32) {
    static cublasHandle_t handle = nullptr;
    if (!handle) {
        void* workspace = nullptr;
        cudaCheck(cudaMalloc(&workspace, CUBLAS_WORKSPACE_BYTES));
        cublasCheck(cublasCreate(&handle));
        cublasCheck(cublasSetStream(handle, gpu_stream()));
        cublasCheck(cublasSetWorkspace(handle, workspace, CUBLAS_WORKSPACE_BYTES));
    }
    cublasCheck(cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return handle;
}

// Creates the stream and the cuBLAS handle with its workspace now, at set-up: a graph capture
// cannot hold their allocations (the first use of each would otherwise make them).
inline void gpu_setup() {
    gpu_stream();
    cublas_handle(false);
}

// How the GPU computes: which kernel versions run, whether the matmuls may use TF32, and whether
// the training step is launched as one CUDA graph. Chosen once at setup (--attention-kernel,
// --matmul-kernel, --fast-kernels, --tf32, --cuda-graph; run/setup.cuh), held by the model, and
// passed to every layer whose GPU path depends on it. The CPU computes the same whatever it holds.
// The defaults are the versions that have run on a GPU, in fp32, launched call by call.
struct Kernels {
    int attention = 1;         // the attention kernels' version (attention/versions.cuh lists them)
    int matmul = 1;            // the matmuls' version: 1 cuBLAS and separate bias and GELU kernels,
                               // 2 cuBLASLt with the bias, GELU and bias gradient fused in (layers/matmul.cuh)
    bool fast_layers = false;  // the other layers' second versions: a warp per LayerNorm and
                               // cross-entropy row, the fusions of layers/fused.cuh, the column sums of
                               // layers/column_sums.cuh for the bias and LayerNorm parameter gradients
    bool tf32 = false;         // cuBLAS may round the matmuls' inputs to TF32 (tensor cores)
    bool graph = false;        // the training step captured once as a CUDA graph and replayed (run/graph.cuh)
};

// ----------------------------------------------------------------------------
// CPU paths: the fast ones, or (make CPU_REFERENCE=1) the plain reference loops

// The matmul, attention and LayerNorm have a plain CPU loop, the reference, and a fast path
// that sums every output in the same order (cpu_fast/). A build with
// -DMASKPRIOR_CPU_REFERENCE runs the reference loops everywhere: the same bits, slower; for
// learners who want to see what the fast paths buy, and for tests/march_check.sh.
#ifdef MASKPRIOR_CPU_REFERENCE
constexpr bool CPU_REFERENCE = true;
#else
constexpr bool CPU_REFERENCE = false;
#endif

// ----------------------------------------------------------------------------
// CPU threads: whether a loop is worth them

// OpenMP wakes its threads at every parallel loop and waits for them at its end. With
// OMP_WAIT_POLICY=passive (the Makefile's: threads that sleep rather than spin, which a busy
// machine needs) that costs about 90 µs a loop on the development machine (a 2-core VM), the
// time of some 3 million multiply-adds. So a loop with less work than about twice that runs on
// the calling thread: `#pragma omp parallel for if (worth_threads(work))`, work counting the
// loop's multiply-adds, or its elements times the operations each takes. Which thread computes
// an output never changes its value, so results are the same at every thread count either way.
constexpr size_t PARALLEL_MIN_WORK = size_t(1) << 23;
inline bool worth_threads(size_t work) { return work >= PARALLEL_MIN_WORK; }

// ----------------------------------------------------------------------------
// buffers on either device

inline float* buffer_alloc(Device dev, size_t count) {
    float* p = nullptr;
    if (dev == DEVICE_GPU) {
        cudaCheck(cudaMalloc(&p, count * sizeof(float)));
    } else {
        p = (float*)malloc(count * sizeof(float));
        if (!p) fail("out of memory allocating %zu floats", count);
    }
    return p;
}

inline void buffer_free(Device dev, float* p) {
    if (dev == DEVICE_GPU) cudaCheck(cudaFree(p));
    else free(p);
}

// Zeroes count floats. On the GPU a memset on the stream (--profile records it as a call: its
// bytes written, one a thread), which a graph can capture.
inline void buffer_zero(Device dev, float* p, size_t count) {
    if (dev == DEVICE_CPU) return (void)memset(p, 0, count * sizeof(float));
    const bool recording = profiler().recording;
    if (recording) profiler().begin("cudaMemset", 0, 0, 0, {4.0 * count, 0, 1}, !GPU_EMULATED);
    cudaCheck(cudaMemsetAsync(p, 0, count * sizeof(float), gpu_stream()));
    if (recording) profiler().end();
}

// cudaMemcpy of `bytes`: the host waits for the stream's work and the copy (--profile counts the
// copies between host and device, and a copy to the host as a synchronisation too). For what
// the host reads or writes outside the training step: results, checkpoints, set-up.
inline void device_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (kind != cudaMemcpyDeviceToDevice) profile_copy(kind == cudaMemcpyHostToDevice, bytes);
    cudaCheck(cudaMemcpy(dst, src, bytes, kind));
}

// The same copy on the stream, in order with the launches, without the host waiting: for a
// batch's upload from pinned memory (a pageable source makes the copy synchronous again), and
// for copies a graph captures.
inline void device_copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (kind != cudaMemcpyDeviceToDevice) profile_copy(kind == cudaMemcpyHostToDevice, bytes, true);
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, kind, gpu_stream()));
}

// Copies count floats between two buffers, each on its own device.
inline void buffer_copy(float* dst, Device dst_dev, const float* src, Device src_dev, size_t count) {
    if (dst_dev == DEVICE_CPU && src_dev == DEVICE_CPU) { memcpy(dst, src, count * sizeof(float)); return; }
    cudaMemcpyKind kind = dst_dev == DEVICE_CPU ? cudaMemcpyDeviceToHost
                          : src_dev == DEVICE_GPU ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
    device_copy(dst, src, count * sizeof(float), kind);
}

// Blocks of `block` threads that cover n elements: the grid size of a one-thread-per-element
// kernel. n is a size_t, so callers multiply their dims as size_t: B·T·V can pass 2^31.
inline unsigned int ceil_div(size_t n, int block) { return (unsigned int)((n + block - 1) / block); }

constexpr int BLOCK = 256;  // threads per block for the simple one-thread-per-element kernels

// Every kernel is launched here: launch_kernel<kernel>(grid, block, shared_bytes, args...) is
// kernel<<<grid, block, shared_bytes, gpu_stream()>>>(args...) and the check of its launch. Under
// the CPU emulation (emu/) the same call checks the launch configuration and every pointer
// argument, then runs the kernel's threads on the CPU (or, while the stream captures a graph,
// records the launch for the graph's replays). A launcher that knows what its launch costs says
// so first, launch_kernel<kernel>(cost, grid, ...), for --profile (layers/profile.h).
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
    cudaCheck(cudaGetLastError());
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

// ----------------------------------------------------------------------------
// random numbers: xorshift64*, uniform in [0,1) from the top 24 bits, normal by Box-Muller

struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
        if (state == 0) state = 1;
        for (int i = 0; i < 4; i++) next_u64();  // decorrelate nearby seeds
    }
    uint64_t next_u64() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        return state * 0x2545F4914F6CDD1Dull;
    }
    float uniform() { return (float)(next_u64() >> 40) / 16777216.0f; }
    float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
    int below(int n) { return (int)(next_u64() % (uint64_t)n); }
    float normal() {
        float u1 = uniform(), u2 = uniform();
        if (u1 < 1e-12f) u1 = 1e-12f;
        return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
    }
};

// ----------------------------------------------------------------------------
// timing

inline double now_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline void device_sync(Device dev) {
    if (dev != DEVICE_GPU) return;
    profile_synchronisation();
    cudaCheck(cudaDeviceSynchronize());
}
