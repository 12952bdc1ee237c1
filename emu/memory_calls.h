// emu/memory_calls.h: the runtime calls that allocate, copy and set memory, as the emulation gives
// them (emu/cuda_emulation.h says what the emulation is): cudaMalloc, cudaFree, cudaMallocHost,
// cudaFreeHost, cudaMemcpy, cudaMemcpyAsync, cudaMemset, cudaMemsetAsync.
//
// When each call waits, and when its work happens, follows the CUDA Runtime API documentation of
// the toolkit this project builds with (CUDA 13.0, section "API synchronization behavior"):
//   - cudaMemcpy from pageable host memory to the device: "a stream sync is performed before the
//     copy is initiated", and the call returns once the source is staged. From device memory to
//     the host: "returns only once the copy has completed". Here both wait for the queue (the
//     legacy stream waits for the program's blocking streams) and copy at once. Device to device:
//     "no host-side synchronization is performed": queued on the legacy stream.
//   - cudaMemcpyAsync between device memory and pageable host memory "might be synchronous with
//     respect to host"; where "pageable memory must first be staged to pinned memory", the driver
//     stages it: so here a pageable source is read at the call (staged) and written to the device
//     when the queue runs, and a pageable destination, like any destination, is written only when
//     the queue runs. A program may count on neither the wait nor its absence.
//   - "For all other transfers" (pinned host memory, device to device) cudaMemcpyAsync "should be
//     fully asynchronous": the copy reads its source when it runs. So a host write into a pinned
//     source before its copy ran changes what arrives: the emulation keeps the source's bytes at
//     the call and reports, when the copy runs, a source that changed in between. A destination
//     in host memory reads as NaN (0xFF bytes) from the call until the copy has run.
//   - "The cudaMemset functions are asynchronous with respect to the host except when the target
//     memory is pinned host memory" (device memory is all they are given here): queued.
// cudaMallocHost's memory is marked as pinned, so each copy knows which case it is. cudaFree and
// cudaFreeHost wait for the queue first (queued work may still use the memory), and are refused
// during a capture, as cudaMalloc is. A copy's or memset's pointers are checked at the call: they
// must be where its direction says (device memory is what cudaMalloc gave, a whole range inside
// one block; host memory is anything else).
#pragma once
#include <cstring>
#include <map>
#include <string>
#include <vector>
#include "emu/device_memory.h"  // arena_allocate, arena_free, is_device_memory, ArenaOpen, POISON
#include "emu/runtime.h"        // emu::report, emu::hex
#include "emu/streams.h"        // stream_work, run_queue, allowed_outside_capture

namespace emu {

// cudaMallocHost's blocks: address -> bytes
inline std::map<uintptr_t, size_t>& pinned_blocks() {
    static std::map<uintptr_t, size_t> blocks;
    return blocks;
}

// whether [p, p + bytes) lies in one cudaMallocHost block
inline bool is_pinned(const void* p, size_t bytes) {
    const auto& blocks = pinned_blocks();
    auto it = blocks.upper_bound((uintptr_t)p);
    if (it == blocks.begin()) return false;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second;
}

// The checks of a copy (see the header). cudaSuccess or the error, reported.
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

// cudaMemcpyDefault's direction, from where the pointers are
inline cudaMemcpyKind copy_kind(const void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (kind != cudaMemcpyDefault) return kind;
    const bool to = is_device_memory(dst, bytes), from = is_device_memory(src, bytes);
    return to ? (from ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
              : (from ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

// The check of a memset: a whole range inside one cudaMalloc block.
inline cudaError_t memset_checked(void* ptr, size_t bytes) {
    if (bytes == 0 || is_device_memory(ptr, bytes)) return cudaSuccess;
    return report(cudaErrorInvalidValue, "cudaMemset(" + hex(ptr) + ", " + std::to_string(bytes) +
                                             " bytes): not device memory, or past the end of its block");
}

// The copy from pinned host memory, run later: it sends the source as it is then, and says so
// when the host changed it after the call (`at_call`: its bytes then).
inline Work pinned_upload(void* dst, const void* src, size_t bytes) {
    std::shared_ptr<std::vector<unsigned char>> at_call =
        std::make_shared<std::vector<unsigned char>>((const unsigned char*)src, (const unsigned char*)src + bytes);
    return [=] {
        if (memcmp(at_call->data(), src, bytes) != 0) {
            size_t first = 0;
            while (((const unsigned char*)src)[first] == (*at_call)[first]) first++;
            report(cudaErrorIllegalState,
                   "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes from pinned memory at " + hex(src) +
                       ": the host wrote into the source (byte " + std::to_string(first) +
                       " first) after the copy was queued and before it ran, so the device gets the new bytes; "
                       "wait for the copy (an event) before refilling its source");
        }
        memmove(dst, src, bytes);
    };
}

}  // namespace emu

// ----------------------------------------------------------------------------
// allocation

// file and line: the call's, recorded to name the block when the host touches it
inline cudaError_t cudaMalloc(void** ptr, size_t bytes, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
    if (!emu::allowed_outside_capture("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
    *ptr = emu::arena_allocate(bytes, file, line);
    if (!*ptr) return emu::report(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    return cudaSuccess;
}

template <typename T>
inline cudaError_t cudaMalloc(T** ptr, size_t bytes, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return cudaMalloc((void**)ptr, bytes, file, line);
}

inline cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    if (!emu::allowed_outside_capture("cudaFree")) return cudaErrorStreamCaptureUnsupported;
    emu::run_queue();
    auto it = emu::arena().blocks.find((uintptr_t)ptr);
    if (it == emu::arena().blocks.end())
        return emu::report(cudaErrorInvalidDevicePointer,
                           "cudaFree(" + emu::hex(ptr) + "): not a block from cudaMalloc");
    emu::arena_free(it);
    return emu::asynchronous_error();
}

// pinned (page-locked) host memory: on a GPU what a copy can read or write while the host goes
// on; here host memory marked as pinned (see the header)
inline cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
    *ptr = malloc(bytes ? bytes : 1);
    if (!*ptr) return emu::report(cudaErrorMemoryAllocation, "cudaMallocHost");
    emu::pinned_blocks()[(uintptr_t)*ptr] = bytes;
    return cudaSuccess;
}

inline cudaError_t cudaFreeHost(void* ptr) {
    if (!ptr) return cudaSuccess;
    emu::run_queue();
    if (!emu::pinned_blocks().erase((uintptr_t)ptr))
        return emu::report(cudaErrorInvalidValue, "cudaFreeHost(" + emu::hex(ptr) + "): not from cudaMallocHost");
    free(ptr);
    return emu::asynchronous_error();
}

// ----------------------------------------------------------------------------
// copies and memsets (see the header for when each waits and when its work happens)

inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!emu::allowed_outside_capture("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
    const cudaError_t checked = emu::memcpy_checked(dst, src, bytes, kind);
    if (checked != cudaSuccess || bytes == 0) return checked;
    kind = emu::copy_kind(dst, src, bytes, kind);
    if (kind == cudaMemcpyDeviceToDevice)
        return emu::stream_work(nullptr, [=] { memmove(dst, src, bytes); }, "cudaMemcpy");
    emu::run_queue([=] { memmove(dst, src, bytes); });
    return emu::asynchronous_error();
}

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t stream = nullptr) {
    const cudaError_t checked = emu::memcpy_checked(dst, src, bytes, kind);
    if (checked != cudaSuccess || bytes == 0) return checked;
    kind = emu::copy_kind(dst, src, bytes, kind);
    const char* call = "cudaMemcpyAsync";
    if (stream && stream->capturing)  // a graph's copy node: it reads and writes when replayed
        return emu::stream_work(stream, [=] { memmove(dst, src, bytes); }, call);
    switch (kind) {
        case cudaMemcpyHostToDevice:
            if (emu::is_pinned(src, bytes)) return emu::stream_work(stream, emu::pinned_upload(dst, src, bytes), call);
            {
                auto staged = std::make_shared<std::vector<unsigned char>>((const unsigned char*)src,
                                                                           (const unsigned char*)src + bytes);
                return emu::stream_work(stream, [=] { memcpy(dst, staged->data(), bytes); }, call);
            }
        case cudaMemcpyDeviceToHost: {
            const cudaError_t queued = emu::stream_work(stream, [=] { memmove(dst, src, bytes); }, call);
            if (queued == cudaSuccess) memset(dst, emu::POISON, bytes);  // unwritten until the copy runs
            return queued;
        }
        case cudaMemcpyDeviceToDevice: return emu::stream_work(stream, [=] { memmove(dst, src, bytes); }, call);
        default:  // host to host: synchronous
            emu::run_queue();
            memmove(dst, src, bytes);
            return emu::asynchronous_error();
    }
}

inline cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
    if (!emu::allowed_outside_capture("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
    const cudaError_t checked = emu::memset_checked(ptr, bytes);
    if (checked != cudaSuccess || bytes == 0) return checked;
    return emu::stream_work(nullptr, [=] { memset(ptr, value, bytes); }, "cudaMemset");
}

inline cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr) {
    const cudaError_t checked = emu::memset_checked(ptr, bytes);
    if (checked != cudaSuccess || bytes == 0) return checked;
    return emu::stream_work(stream, [=] { memset(ptr, value, bytes); }, "cudaMemsetAsync");
}
