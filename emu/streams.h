// emu/streams.h: streams, events, stream capture and CUDA graphs as the emulation gives them
// (emu/cuda_emulation.h says what the emulation is), the part of the API the program uses:
//   cudaStreamCreate / Destroy / Synchronize / IsCapturing, cudaEventCreate / Destroy / Record /
//   Synchronize / Query / ElapsedTime, cudaDeviceSynchronize, cudaStreamBeginCapture /
//   EndCapture, cudaGraphInstantiate, cudaGraphGetNodes (the count), cudaGraphLaunch,
//   cudaGraphExecDestroy, cudaGraphDestroy.
//
// Work that runs later, as on a GPU. A launch, an asynchronous copy, a memset or a cuBLAS call
// puts its work on a queue and returns; nothing runs until the host waits: a stream or event
// synchronize, cudaDeviceSynchronize, a synchronous copy to or from the host, a cudaFree or
// cudaFreeHost (emu/memory_calls.h), or the second cudaEventQuery of an unfinished event. Then
// the queue runs, all of it, in the order it was queued, on the calling thread, with the arena
// of device memory opened once for the whole run (emu/device_memory.h); no worker thread, since
// the arena's protection is the process's and the emulation's state is not thread-safe. One
// queue for every stream is one of the orders a GPU may run them in: each stream's work stays in
// its order, the legacy default stream's work comes after what was queued before it, as CUDA's
// blocking streams make it, and a wait for any stream has run at least that stream's work. So
// host code that reads a result it has not waited for, or refills a buffer that a queued copy
// has not read yet, sees what it would on a GPU, not the finished work.
//
// Errors found while queued work runs (a write past a block, a barrier some threads never
// reach, a copy's source changed before it ran) are reported when they are found and surface
// at the next call that returns the pending error, as a GPU's asynchronous errors do; the checks
// a launch can make at the call (its configuration, its pointers) stay at the call.
//
// Events are queue items: cudaEventRecord queues the moment the event completes (the host's
// clock then, for cudaEventElapsedTime). cudaEventQuery of an event whose work has not run
// answers cudaErrorNotReady once, and the next query runs the queue: code that takes completion
// for granted shows, and a loop that polls still ends.
//
// Capture. While a stream captures (cudaStreamBeginCapture), the work put on it is checked as it
// would be and recorded instead of queued, in the stream's records, apart from the queue (work
// queued before the capture still runs at the next wait). Ending the capture hands the records
// over as a graph; instantiating copies them; launching the instance queues them in the order
// they were recorded. So a kernel's arguments, a copy's pointers and a cuBLAS call's scalars are
// fixed at capture, as on a GPU: a host value read into a kernel argument at capture is replayed
// unchanged every time, which the graph tests catch. What CUDA refuses during a capture in
// global mode, the emulation refuses too, with one line: a synchronous copy or memset,
// cudaDeviceSynchronize, a synchronize of the capturing stream, cudaMalloc and cudaFree, and any
// work on the legacy default stream (which would have to wait for the capturing stream). The
// capture is then invalidated, and cudaStreamEndCapture fails, as on a GPU.
#pragma once
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <vector>
#include "emu/device_memory.h"  // ArenaOpen: the queue runs with the arena open
#include "emu/runtime.h"        // emu::report, cudaError_t

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
using Work = std::function<void()>;  // one piece of work: a launch, a copy, a memset, a library call, an event
}  // namespace emu

struct CUstream_st {
    bool capturing = false;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    std::vector<emu::Work> records;  // the capture's work, in order (the queue is apart: emu::queue)
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

// ----------------------------------------------------------------------------
// capture's state: the stream now capturing, if any, and whether a call made during the capture
// was one that CUDA refuses there

inline cudaStream_t& capturing_stream() {
    static cudaStream_t stream = nullptr;
    return stream;
}

inline bool& capture_invalidated() {
    static bool invalidated = false;
    return invalidated;
}

// A call CUDA refuses while a stream captures in global mode: one line, and the capture is
// invalidated. Returns whether the call may go on (no such capture).
inline bool allowed_outside_capture(const char* call) {
    const cudaStream_t s = capturing_stream();
    if (!s || s->mode != cudaStreamCaptureModeGlobal) return true;
    capture_invalidated() = true;
    report(cudaErrorStreamCaptureUnsupported,
           std::string(call) + " while a stream captures a graph: not allowed (the capture is invalidated)");
    return false;
}

// ----------------------------------------------------------------------------
// the queue

inline std::deque<Work>& queue() {
    static std::deque<Work> work;
    return work;
}

// Runs everything queued, in order, then `then` (a synchronous copy's own work, or nothing), the
// arena open once for all of it: the host waits here.
inline void run_queue(const Work& then = nullptr) {
    bool& running = running_queued_work();
    if (running || (queue().empty() && !then)) return;  // work never waits: a wait inside the run adds nothing
    ArenaOpen open;
    running = true;
    while (!queue().empty()) {
        Work work = std::move(queue().front());
        queue().pop_front();
        work();
    }
    running = false;
    if (then) then();
}

// Work on `stream`: recorded when the stream captures, else queued. A null stream is the legacy
// default stream, which is never captured and whose work a global-mode capture of another
// stream refuses (it would wait for the capturing stream). `call` names the work in that line.
inline cudaError_t stream_work(cudaStream_t stream, Work work, const char* call = "work") {
    if (stream && stream->capturing) {
        stream->records.push_back(std::move(work));
        return cudaSuccess;
    }
    const cudaStream_t capturing = capturing_stream();
    if (!stream && capturing && capturing->mode == cudaStreamCaptureModeGlobal) {
        capture_invalidated() = true;
        return report(cudaErrorStreamCaptureImplicit,
                      std::string(call) + " on the legacy default stream while a stream captures a graph: it would "
                                          "wait for the capturing stream (the capture is invalidated)");
    }
    queue().push_back(std::move(work));
    return cudaSuccess;
}

inline double clock_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace emu

// ----------------------------------------------------------------------------
// streams

inline cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    *stream = new CUstream_st();
    return cudaSuccess;
}

// A stream's queued work still runs at the next wait (it is in the one queue), as CUDA lets a
// destroyed stream's work finish.
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (stream == emu::capturing_stream()) emu::capturing_stream() = nullptr;
    delete stream;
    return cudaSuccess;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (stream && stream->capturing && !emu::allowed_outside_capture("cudaStreamSynchronize"))
        return cudaErrorStreamCaptureUnsupported;
    emu::run_queue();
    return emu::asynchronous_error();
}

inline cudaError_t cudaDeviceSynchronize() {
    if (!emu::allowed_outside_capture("cudaDeviceSynchronize")) return cudaErrorStreamCaptureUnsupported;
    emu::run_queue();
    return emu::asynchronous_error();
}

// ----------------------------------------------------------------------------
// events: a record is a queue item; its state outlives a cudaEventDestroy that comes before it
// runs, as CUDA lets such an event complete

namespace emu {
struct EventState {
    bool recorded = false;        // cudaEventRecord was called
    bool complete = false;        // its last record has run
    bool said_not_ready = false;  // cudaEventQuery answered "not ready" since that record
    double seconds = 0;           // the host's clock when it ran
};
}  // namespace emu

struct CUevent_st {
    std::shared_ptr<emu::EventState> state = std::make_shared<emu::EventState>();
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

inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr) {
    if (!event) return emu::report(cudaErrorInvalidResourceHandle, "cudaEventRecord: no event");
    std::shared_ptr<emu::EventState> state = event->state;
    state->recorded = true;
    state->complete = false;
    state->said_not_ready = false;
    return emu::stream_work(
        stream,
        [state] {
            state->seconds = emu::clock_seconds();
            state->complete = true;
        },
        "cudaEventRecord");
}

inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (!event) return emu::report(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: no event");
    if (event->state->recorded && !event->state->complete) emu::run_queue();
    return emu::asynchronous_error();
}

// cudaSuccess when the event's work has run (or it was never recorded); an unfinished event
// answers cudaErrorNotReady once, then runs the queue (see the header)
inline cudaError_t cudaEventQuery(cudaEvent_t event) {
    if (!event) return emu::report(cudaErrorInvalidResourceHandle, "cudaEventQuery: no event");
    emu::EventState& state = *event->state;
    if (!state.recorded || state.complete) return emu::asynchronous_error();
    if (!state.said_not_ready) {
        state.said_not_ready = true;
        return cudaErrorNotReady;
    }
    emu::run_queue();
    return emu::asynchronous_error();
}

inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start || !end || !start->state->recorded || !end->state->recorded)
        return emu::report(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event that was never recorded");
    if (!start->state->complete || !end->state->complete) return cudaErrorNotReady;
    *ms = (float)(1000 * (end->state->seconds - start->state->seconds));
    return cudaSuccess;
}

// ----------------------------------------------------------------------------
// capture and graphs

inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    if (!stream || emu::capturing_stream())
        return emu::report(cudaErrorIllegalState, "cudaStreamBeginCapture: the legacy default stream, or a second "
                                                  "capture while one runs");
    stream->capturing = true;
    stream->mode = mode;
    stream->records.clear();
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
    stream->records.clear();
    stream->capturing = false;
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

// the graph's work, in the order it was captured, on `stream` (queued, or recorded when the
// stream itself captures)
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    if (!exec) return emu::report(cudaErrorInvalidValue, "cudaGraphLaunch: no instantiated graph");
    for (const emu::Work& work : exec->work) {
        const cudaError_t queued = emu::stream_work(stream, work, "cudaGraphLaunch");
        if (queued != cudaSuccess) return queued;
    }
    return emu::asynchronous_error();
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
