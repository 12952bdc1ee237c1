// emu/runtime.h: the CUDA runtime as the emulation gives it (emu/cuda_emulation.h says what the
// emulation is): the keywords, the runtime's types, the built-in variables, errors, and the
// runtime calls about errors and the device. Device memory is emu/device_memory.h's, the calls
// that allocate, copy and set it emu/memory_calls.h's, streams and events emu/streams.h's.
#pragma once
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// ----------------------------------------------------------------------------
// the keywords: a kernel is a plain inline function (inline: a header's kernels may go into two
// translation units linked together, as the kernel course's step 9 links the learner's kernels
// into the trainer: dev/exercises/check/train.cu); `__shared__` makes a block-local variable one
// static variable, which the blocks of a launch use in turn

#define __global__ inline
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

// ----------------------------------------------------------------------------
// the runtime's types

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
};

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock;
    int maxThreadsPerBlock, warpSize, multiProcessorCount, major, minor;
};

struct uint3 {
    unsigned int x, y, z;
};

struct CUstream_st;  // emu/streams.h
typedef CUstream_st* cudaStream_t;

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// the built-in variables: the launch sets the dims, the scheduler sets the indices each time it
// resumes a CUDA thread (one runs at a time), so a kernel, and gdb, read them as on a GPU
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

namespace emu {

// ----------------------------------------------------------------------------
// errors: what went wrong is one line on stderr; the code waits for cudaGetLastError. An error
// found while queued work runs (emu/streams.h) is also an asynchronous error, which the calls
// that wait return, as a GPU's calls return the errors of earlier asynchronous work; an error of
// a call's own arguments is not (it is that call's answer, and the last error's).

inline cudaError_t& pending_error() {
    static cudaError_t error = cudaSuccess;
    return error;
}

inline cudaError_t& asynchronous_error() {
    static cudaError_t error = cudaSuccess;
    return error;
}

// whether queued work is running now (emu::run_queue sets it)
inline bool& running_queued_work() {
    static bool running = false;
    return running;
}

// one line on stderr
inline void say(const std::string& what) { fprintf(stderr, "CUDA emulation: %s\n", what.c_str()); }

// says what went wrong and keeps its code for cudaGetLastError (and, found while queued work
// runs, for the next wait)
inline cudaError_t report(cudaError_t code, const std::string& what) {
    say(what);
    if (pending_error() == cudaSuccess) pending_error() = code;
    if (running_queued_work() && asynchronous_error() == cudaSuccess) asynchronous_error() = code;
    return code;
}

inline std::string hex(const void* p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

constexpr size_t MAX_SHARED_BYTES = 48 * 1024;  // a launch's dynamic shared memory, without opt-in

}  // namespace emu

// ----------------------------------------------------------------------------
// the runtime calls

inline cudaError_t cudaGetLastError() {
    cudaError_t error = emu::pending_error();
    emu::pending_error() = cudaSuccess;
    emu::asynchronous_error() = cudaSuccess;
    return error;
}

inline cudaError_t cudaPeekAtLastError() { return emu::pending_error(); }

inline const char* cudaGetErrorString(cudaError_t error) {
    switch (error) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorIllegalState: return "the operation is not permitted in the current state";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
        case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
        case cudaErrorStreamCaptureImplicit:
            return "operation would make the legacy stream depend on a capturing blocking stream";
    }
    return "unknown error";
}

inline cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}

inline cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : emu::report(cudaErrorInvalidDevice, "cudaSetDevice: only device 0 exists");
}

inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (device != 0) return emu::report(cudaErrorInvalidDevice, "cudaGetDeviceProperties: only device 0 exists");
    *prop = cudaDeviceProp();
    snprintf(prop->name, sizeof prop->name, "CUDA emulation on the CPU");
    prop->totalGlobalMem = (size_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    prop->sharedMemPerBlock = emu::MAX_SHARED_BYTES;
    prop->maxThreadsPerBlock = 1024;
    prop->warpSize = warpSize;
    prop->multiProcessorCount = 1;
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}
