// layers/device.cuh: where a buffer lives and a layer runs, and what lives there:
//   - Device: the CPU (plain loops) or the GPU (CUDA kernels); what the device is (the GPU's
//     name, or the CPU's model, vector width and threads);
//   - CPU threads: whether a loop is worth them (worth_threads);
//   - buffers that allocate, clear and copy on either device (device_copy, device_copy_async:
//     each copy --profile counts), and single values the host reads and writes (value_read);
//   - timing: wall-clock time, and a wait for the device.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "gpu/cuda.cuh"     // cudaMalloc ... cudaMemcpyAsync, cudaCheck, GPU_EMULATED
#include "gpu/profile.h"    // profiler, profile_copy, profile_synchronisation: what --profile records
#include "gpu/stream.cuh"   // gpu_stream: every copy and memset goes on it
#include "layers/errors.h"  // fail

// ----------------------------------------------------------------------------
// devices

enum Device { DEVICE_CPU = 0, DEVICE_GPU = 1 };

// The SIMD width the host code was compiled for (the -march of the build decides it, not the
// machine it runs on): what the CPU loops can use.
inline int cpu_vector_bits() {
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX__)
    return 256;
#elif defined(__SSE2__) || defined(__ARM_NEON)  // SSE, or ARM64's NEON
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

// Inside a parallel region: the team's size and this thread's number in it (1 and 0 in a build
// without OpenMP, the ThreadSanitizer build's, where the region is the calling thread alone)
inline int team_size() {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}
inline int team_thread() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
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

// Zeroes count floats. On the CPU each thread clears its share: the model's gradients, cleared every
// step, are some 70 and 120 MB in make bench's ViT and wide models (mostly the activations'), and
// one core's stores alone left the other waiting. On the GPU a memset on the stream (--profile
// records it as a call: its bytes written, one a thread), which a graph can capture.
inline void buffer_zero(Device dev, float* p, size_t count) {
    if (dev == DEVICE_CPU) {
        #pragma omp parallel if (worth_threads(count))
        {
            const size_t threads = team_size(), me = team_thread();
            const size_t first = count * me / threads, end = count * (me + 1) / threads;
            memset(p + first, 0, (end - first) * sizeof(float));
        }
        return;
    }
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

// ----------------------------------------------------------------------------
// single values on either device: what the device writes and the host reads now and then

// One T on dev, set to value
template <typename T>
inline T* value_alloc(Device dev, const T& value) {
    if (dev == DEVICE_CPU) return new T(value);
    T* p = nullptr;
    cudaCheck(cudaMalloc(&p, sizeof(T)));
    device_copy(p, &value, sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

template <typename T>
inline void value_free(Device dev, T* p) {
    if (dev == DEVICE_CPU) delete p;
    else cudaCheck(cudaFree(p));
}

// Its value, for the host: on the GPU a copy that waits for the work queued before it
template <typename T>
inline T value_read(Device dev, const T* p) {
    if (dev == DEVICE_CPU) return *p;
    T value;
    device_copy(&value, p, sizeof(T), cudaMemcpyDeviceToHost);
    return value;
}

template <typename T>
inline void value_write(Device dev, T* p, const T& value) {
    if (dev == DEVICE_CPU) *p = value;
    else device_copy(p, &value, sizeof(T), cudaMemcpyHostToDevice);
}

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
