// emu/runtime.h: the CUDA runtime as the emulation gives it (emu/cuda_emulation.h says what the
// emulation is): the keywords, the runtime's types, the built-in variables, errors, device
// memory with its guard bytes, and the runtime calls (cudaMalloc ... events).
#pragma once
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

// ----------------------------------------------------------------------------
// the keywords: a kernel is a plain function; `__shared__` makes a block-local variable one
// static variable, which the blocks of a launch use in turn

#define __global__
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
    cudaErrorIllegalState = 401,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
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
// errors: what went wrong is one line on stderr; the code waits for cudaGetLastError

inline cudaError_t& pending_error() {
    static cudaError_t error = cudaSuccess;
    return error;
}

// one line on stderr
inline void say(const std::string& what) { fprintf(stderr, "CUDA emulation: %s\n", what.c_str()); }

// says what went wrong and keeps its code for cudaGetLastError
inline cudaError_t report(cudaError_t code, const std::string& what) {
    say(what);
    if (pending_error() == cudaSuccess) pending_error() = code;
    return code;
}

inline std::string hex(const void* p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

// ----------------------------------------------------------------------------
// device memory: host memory that cudaMalloc handed out, with guard bytes on both sides

constexpr size_t MAX_SHARED_BYTES = 48 * 1024;  // a launch's dynamic shared memory, without opt-in

constexpr size_t GUARD_BYTES = 64, GUARD_WORDS = GUARD_BYTES / 4;
constexpr unsigned char POISON = 0xFF;  // fresh memory: 0xFFFFFFFF is a NaN as a float

// word k of the guards of the block at `base`: a signalling NaN (exponent all ones, quiet bit
// 0, payload not 0) whose payload depends on the block. Arithmetic on it gives a quiet NaN,
// which differs; a copy from another block's guard differs too.
inline uint32_t guard_word(uintptr_t base, size_t k) {
    return 0x7F800000u | (uint32_t)(((base >> 4) * 2654435761u + k) % 0x3FFFFFu + 1);
}

inline void write_guards(uintptr_t base, size_t size) {
    uint32_t* before = (uint32_t*)(base - GUARD_BYTES);
    unsigned char* past = (unsigned char*)base + size;  // may not be 4-byte aligned
    for (size_t k = 0; k < GUARD_WORDS; k++) {
        uint32_t word = guard_word(base, k);
        before[k] = word;
        memcpy(past + 4 * k, &word, 4);
    }
}

// every live cudaMalloc block: its address -> its size in bytes
inline std::map<uintptr_t, size_t>& allocations() {
    static std::map<uintptr_t, size_t> blocks;
    return blocks;
}

// The cudaMalloc block that holds [p, p + bytes), or end(): an address one past a block's end
// belongs to it when bytes is 0 (an empty slice).
inline std::map<uintptr_t, size_t>::const_iterator block_holding(const void* p, size_t bytes) {
    const auto& blocks = allocations();
    const uintptr_t a = (uintptr_t)p;
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return blocks.end();
    --it;
    return a + bytes <= it->first + it->second ? it : blocks.end();
}

inline bool is_device_memory(const void* p, size_t bytes = 0) {
    return block_holding(p, bytes) != allocations().end();
}

// Writes outside a block change its guards: each damaged guard is reported (and rewritten).
// Returns whether all were intact.
inline bool guards_intact(const std::string& after) {
    bool intact = true;
    for (const auto& [base, size] : allocations()) {
        const unsigned char* before = (unsigned char*)base - GUARD_BYTES;
        const unsigned char* past = (unsigned char*)base + size;
        for (size_t k = 0; k < GUARD_WORDS; k++) {
            uint32_t word = guard_word(base, k), seen_before, seen_past;
            memcpy(&seen_before, before + 4 * k, 4);
            memcpy(&seen_past, past + 4 * k, 4);
            if (seen_before == word && seen_past == word) continue;
            std::string where = seen_past != word ? std::to_string(4 * k) + " bytes past the end"
                                                  : std::to_string(GUARD_BYTES - 4 * k) + " bytes before the start";
            report(cudaErrorIllegalAddress, after + " wrote " + where + " of a cudaMalloc block of " +
                                                std::to_string(size) + " bytes at " + hex((void*)base));
            write_guards(base, size);
            intact = false;
            break;  // one line per block
        }
    }
    return intact;
}

// ----------------------------------------------------------------------------
// stream capture's state (emu/streams.h has the calls): the stream now capturing, if any, and
// whether a call made during the capture was one that CUDA refuses there

inline cudaStream_t& capturing_stream() {
    static cudaStream_t stream = nullptr;
    return stream;
}

inline bool& capture_invalidated() {
    static bool invalidated = false;
    return invalidated;
}

// A call CUDA refuses while a stream captures (global mode): one line, and the capture is
// invalidated. Returns whether the call may go on (no capture).
inline bool allowed_outside_capture(const char* call) {
    if (!capturing_stream()) return true;
    capture_invalidated() = true;
    report(cudaErrorStreamCaptureUnsupported,
           std::string(call) + " while a stream captures a graph: not allowed (the capture is invalidated)");
    return false;
}

// The checks of a copy: the pointers must be where its direction says (device memory is what
// cudaMalloc gave, a whole range inside one block; host memory is anything else). cudaSuccess
// or the error, reported.
inline cudaError_t memcpy_checked(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    const char* names[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return report(cudaErrorInvalidMemcpyDirection, "cudaMemcpy: unknown direction");
    auto check = [&](const void* p, bool device, const char* which) {
        if (kind == cudaMemcpyDefault) return true;
        if (device ? is_device_memory(p, bytes) : !is_device_memory(p)) return true;
        report(cudaErrorInvalidValue,
               std::string("cudaMemcpy(") + names[kind] + ", " + std::to_string(bytes) + " bytes): the " + which + " " +
                   hex(p) +
                   (device ? " is not device memory, or the range passes the end of its cudaMalloc block"
                           : " is device memory"));
        return false;
    };
    if (!check(dst, dst_device, "destination") || !check(src, src_device, "source")) return cudaErrorInvalidValue;
    return cudaSuccess;
}

// The check of a memset: a whole range inside one cudaMalloc block.
inline cudaError_t memset_checked(void* ptr, size_t bytes) {
    if (bytes == 0 || is_device_memory(ptr, bytes)) return cudaSuccess;
    return report(cudaErrorInvalidValue, "cudaMemset(" + hex(ptr) + ", " + std::to_string(bytes) +
                                             " bytes): not device memory, or past the end of its block");
}

}  // namespace emu

// ----------------------------------------------------------------------------
// the runtime calls

inline cudaError_t cudaGetLastError() {
    cudaError_t error = emu::pending_error();
    emu::pending_error() = cudaSuccess;
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
        case cudaErrorIllegalState: return "the operation is not permitted in the current state";
        case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
        case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    }
    return "unknown error";
}

inline cudaError_t cudaMalloc(void** ptr, size_t bytes) {
    if (!emu::allowed_outside_capture("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
    unsigned char* raw = (unsigned char*)malloc(bytes + 2 * emu::GUARD_BYTES);
    if (!raw) return emu::report(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    *ptr = raw + emu::GUARD_BYTES;
    memset(*ptr, emu::POISON, bytes);
    emu::write_guards((uintptr_t)*ptr, bytes);
    emu::allocations()[(uintptr_t)*ptr] = bytes;
    return cudaSuccess;
}

template <typename T>
inline cudaError_t cudaMalloc(T** ptr, size_t bytes) {
    return cudaMalloc((void**)ptr, bytes);
}

inline cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    if (!emu::allowed_outside_capture("cudaFree")) return cudaErrorStreamCaptureUnsupported;
    auto it = emu::allocations().find((uintptr_t)ptr);
    if (it == emu::allocations().end())
        return emu::report(cudaErrorInvalidDevicePointer,
                           "cudaFree(" + emu::hex(ptr) + "): not a block from cudaMalloc");
    emu::allocations().erase(it);
    free((unsigned char*)ptr - emu::GUARD_BYTES);
    return cudaSuccess;
}

// A synchronous copy: checked (emu::memcpy_checked), then done; refused during a capture.
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!emu::allowed_outside_capture("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
    const cudaError_t checked = emu::memcpy_checked(dst, src, bytes, kind);
    if (checked == cudaSuccess && bytes > 0) memmove(dst, src, bytes);
    return checked;
}

inline cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
    if (!emu::allowed_outside_capture("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
    const cudaError_t checked = emu::memset_checked(ptr, bytes);
    if (checked == cudaSuccess && bytes > 0) memset(ptr, value, bytes);
    return checked;
}

inline cudaError_t cudaDeviceSynchronize() {
    if (!emu::allowed_outside_capture("cudaDeviceSynchronize")) return cudaErrorStreamCaptureUnsupported;
    return emu::pending_error();
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

// events: the host's clock at cudaEventRecord (every launch has finished by then)
struct CUevent_st {
    double seconds = 0;
};
typedef CUevent_st* cudaEvent_t;

inline cudaError_t cudaEventCreate(cudaEvent_t* event) {
    *event = new CUevent_st();
    return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t = nullptr) {
    event->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    *ms = (float)(1000 * (end->seconds - start->seconds));
    return cudaSuccess;
}
