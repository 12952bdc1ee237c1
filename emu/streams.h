// emu/streams.h: streams, stream capture and CUDA graphs as the emulation gives them (emu/cuda_emulation.h
// says what the emulation is), the part of the API the program uses:
//   cudaStreamCreate / Destroy / Synchronize, cudaMemcpyAsync, cudaMemsetAsync, cudaMallocHost /
//   cudaFreeHost (pinned memory is plain host memory here), cudaStreamBeginCapture / EndCapture /
//   IsCapturing, cudaGraphInstantiate, cudaGraphGetNodes (the count), cudaGraphLaunch,
//   cudaGraphExecDestroy, cudaGraphDestroy.
// On a GPU, work on a stream runs in order, later, while the host goes on. Here it runs at once,
// in the call (every stream is in order, trivially), unless the stream is capturing: then the
// call checks its arguments as it would and records the work instead of running it. Ending the
// capture hands the records over as a graph; instantiating copies them; launching the
// instance runs them in the order they were recorded. So a kernel's arguments, a copy's
// pointers and a cuBLAS call's scalars are fixed at capture, as on a GPU: a host value read
// into a kernel argument at capture is replayed unchanged every time, which is what the graph
// tests catch.
// What CUDA refuses during a capture (global mode), the emulation refuses too, with one line:
// a synchronous cudaMemcpy or cudaMemset, cudaDeviceSynchronize, cudaStreamSynchronize of the
// capturing stream, cudaMalloc and cudaFree. The capture is then invalidated, and
// cudaStreamEndCapture fails, as on a GPU.
#pragma once
#include <cstring>
#include <functional>
#include <vector>
#include "emu/runtime.h"  // emu::capturing_stream, emu::allowed_outside_capture, emu::memcpy_checked

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

namespace emu {
using Work = std::function<void()>;  // one recorded call: a launch, a copy, a memset, a library call
}  // namespace emu

struct CUstream_st {
    bool capturing = false;
    std::vector<emu::Work> records;  // the capture's work, in order
};
struct CUgraph_st {
    std::vector<emu::Work> work;
};
struct CUgraphExec_st {
    std::vector<emu::Work> work;
};
typedef CUgraph_st* cudaGraph_t;
typedef CUgraphExec_st* cudaGraphExec_t;

namespace emu {

// Work on `stream`: recorded when it is capturing, else run now. A null stream is the legacy
// default stream, which is never captured.
inline void stream_work(cudaStream_t stream, Work work) {
    if (stream && stream->capturing) stream->records.push_back(std::move(work));
    else work();
}

}  // namespace emu

inline cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    *stream = new CUstream_st();
    return cudaSuccess;
}

inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (stream == emu::capturing_stream()) emu::capturing_stream() = nullptr;
    delete stream;
    return cudaSuccess;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (stream && stream->capturing && !emu::allowed_outside_capture("cudaStreamSynchronize"))
        return cudaErrorStreamCaptureUnsupported;
    return emu::pending_error();
}

inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
    if (!stream || emu::capturing_stream())
        return emu::report(cudaErrorIllegalState, "cudaStreamBeginCapture: the legacy default stream, or a second "
                                                  "capture while one runs");
    *stream = CUstream_st();
    stream->capturing = true;
    emu::capturing_stream() = stream;
    emu::capture_invalidated() = false;
    return cudaSuccess;
}

inline cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    *status = !stream || !stream->capturing ? cudaStreamCaptureStatusNone
              : emu::capture_invalidated()  ? cudaStreamCaptureStatusInvalidated
                                            : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

inline cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
    if (!stream || !stream->capturing)
        return emu::report(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
    const bool invalidated = emu::capture_invalidated();
    std::vector<emu::Work> records = std::move(stream->records);
    *stream = CUstream_st();
    emu::capturing_stream() = nullptr;
    emu::capture_invalidated() = false;
    *graph = nullptr;
    if (invalidated) return emu::report(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture was "
                                                                           "invalidated by a call it does not allow");
    *graph = new CUgraph_st{std::move(records)};
    return cudaSuccess;
}

inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long = 0) {
    if (!graph) return emu::report(cudaErrorInvalidValue, "cudaGraphInstantiate: no graph");
    *exec = new CUgraphExec_st{graph->work};
    return cudaSuccess;
}

// the graph's work, in the order it was captured, on `stream` (which may itself be capturing)
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    if (!exec) return emu::report(cudaErrorInvalidValue, "cudaGraphLaunch: no instantiated graph");
    for (const emu::Work& work : exec->work) emu::stream_work(stream, work);
    return emu::pending_error();
}

// a graph's nodes: here its recorded calls (nodes = nullptr: only their count)
inline cudaError_t cudaGraphGetNodes(cudaGraph_t graph, void* nodes, size_t* count) {
    if (!graph || nodes)
        return emu::report(cudaErrorInvalidValue, "cudaGraphGetNodes: the emulation gives the count only");
    *count = graph->work.size();
    return cudaSuccess;
}

inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}

// The copy's pointers are checked now (as cudaMemcpy checks them); the copy itself is stream work.
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t stream = nullptr) {
    const cudaError_t checked = emu::memcpy_checked(dst, src, bytes, kind);
    if (checked == cudaSuccess && bytes > 0) emu::stream_work(stream, [=] { memmove(dst, src, bytes); });
    return checked;
}

inline cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr) {
    const cudaError_t checked = emu::memset_checked(ptr, bytes);
    if (checked == cudaSuccess && bytes > 0) emu::stream_work(stream, [=] { memset(ptr, value, bytes); });
    return checked;
}

// pinned (page-locked) host memory: on a GPU, what an asynchronous copy needs to overlap the
// host's work; here plain host memory
inline cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? cudaSuccess : emu::report(cudaErrorMemoryAllocation, "cudaMallocHost");
}

inline cudaError_t cudaFreeHost(void* ptr) {
    free(ptr);
    return cudaSuccess;
}
