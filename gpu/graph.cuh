// gpu/graph.cuh: CUDA graphs, for a step whose hundreds of launches would otherwise each cost
// the host a few microseconds (Kernels::graph, --cuda-graph).
//
// What it teaches. A small model's step on a GPU is set by launch latency, not by its FLOPs:
// each kernel launch and cuBLAS call costs the host microseconds, and the GPU idles between
// short kernels. Stream capture records the work a piece of host code puts on a stream,
// without running it, as a graph: cudaStreamBeginCapture, the code, cudaStreamEndCapture. An
// instantiated graph is then launched with one call, and the GPU runs all its work back to back.
// What the capture records is fixed: each launch's grid and arguments, each copy's pointers and
// sizes, each library call's operands. So the captured code must read every value that changes
// from step to step from device memory at a fixed address (the batch block and the step's
// scalars, gpu/device_step.cuh), must not wait for the GPU or read a result (CUDA refuses a
// synchronous copy during a capture), and must not allocate. One graph is captured per shape of
// the work (the training step; a forward pass of so many rows) and replayed at every later use.
//
// GraphCache::run(shape, work): the first time a shape comes, work() runs call by call, so that
// whatever a call makes on its first use (cuBLASLt's descriptors and algorithm for a product)
// is made outside any capture; the second time, work() is captured and the graph launched; from
// then on the graph is launched. A launch goes on the program's stream, and the host goes on.
// --profile records each launch as one call, with the captured work's size in its name (the
// capture itself is not recorded). device_work(graphs, graph, shape, work) is the one call the
// model and the training step make: through the cache with --cuda-graph on a GPU, else work().
#pragma once
#include <map>
#include <string>
#include "gpu/cuda.cuh"     // cudaGraph_t, cudaCheck, GPU_EMULATED
#include "gpu/profile.h"    // profiler: a launch of the graph is one recorded call
#include "gpu/stream.cuh"   // gpu_stream: what is captured, and where the graph is launched

struct CapturedGraph {
    int uses = 0;  // the times the shape has come
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    size_t nodes = 0;  // the launches, copies, memsets and library kernels it holds
};

// A capture of gpu_stream() for as long as it is in scope, the profiler paused meanwhile (the
// capture's launches are not run, so not timed). end() ends it and hands over the graph. Should
// an exception leave the captured work first (a fail() deep in a pass), the destructor ends the
// capture and drops what it recorded: the stream is no longer capturing, so the frees that run
// while the exception unwinds succeed and the program prints the exception's own line, not "CUDA
// error: operation not permitted when stream is capturing".
class CaptureScope {
  public:
    explicit CaptureScope(bool recording) : recording_(recording) {
        profiler().recording = false;
        cudaCheck(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal));
    }
    cudaGraph_t end() {
        cudaGraph_t graph = nullptr;
        open_ = false;
        cudaCheck(cudaStreamEndCapture(gpu_stream(), &graph));
        return graph;
    }
    ~CaptureScope() {
        profiler().recording = recording_;
        if (!open_) return;
        cudaGraph_t dropped = nullptr;  // what the work recorded before it threw, never launched
        if (cudaStreamEndCapture(gpu_stream(), &dropped) == cudaSuccess && dropped) cudaGraphDestroy(dropped);
        cudaGetLastError();  // an invalidated capture's error: the exception in flight is the one to report
    }
    CaptureScope(const CaptureScope&) = delete;
    CaptureScope& operator=(const CaptureScope&) = delete;

  private:
    bool recording_;    // the profiler's state before the capture, restored at its end
    bool open_ = true;  // still capturing: end() not called
};

struct GraphCache {
    std::map<std::string, CapturedGraph> by_shape;

    template <typename Work>
    void run(const std::string& shape, Work&& work) {
        CapturedGraph& g = by_shape[shape];
        if (g.uses++ == 0) return work();
        const bool recording = profiler().recording;
        if (!g.exec) {
            CaptureScope capture(recording);
            work();
            g.graph = capture.end();
            cudaCheck(cudaGraphInstantiate(&g.exec, g.graph, 0));
            cudaCheck(cudaGraphGetNodes(g.graph, nullptr, &g.nodes));
        }
        if (recording)
            profiler().begin("cudaGraphLaunch (" + shape + ": " + std::to_string(g.nodes) + " nodes)", 0, 0, 0,
                             LaunchCost{}, !GPU_EMULATED);
        cudaCheck(cudaGraphLaunch(g.exec, gpu_stream()));
        if (recording) profiler().end();
    }

    // destroys every graph (a launch still in flight runs to its end: CUDA frees an executable
    // graph when its last launch completes)
    void clear() {
        for (auto& [shape, g] : by_shape) {
            if (g.exec) cudaCheck(cudaGraphExecDestroy(g.exec));
            if (g.graph) cudaCheck(cudaGraphDestroy(g.graph));
        }
        by_shape.clear();
    }
};

// Runs work, the device's part of a pass or a step: with `graph` (Kernels::graph, on a GPU)
// captured once per shape and replayed (GraphCache::run), else launched call by call.
template <typename Work>
inline void device_work(GraphCache& graphs, bool graph, const std::string& shape, Work&& work) {
    if (!graph) return work();
    graphs.run(shape, work);
}
