// gpu/profile.h: what a GPU step does, recorded call by call for --profile (gpu/profile_report.cuh
// prints it). While recording is on, every kernel launch (launch_kernel, layers/launch.cuh),
// every cuBLAS call, every copy between host and device and every synchronisation is written
// down with its configuration and, where its caller states it, its cost (LaunchCost): the bytes
// it must move, the floating-point operations it does, and the longest walk one of its threads
// takes over elements in turn. On a GPU each call is also bracketed by two CUDA events, recorded
// without synchronising and read after the last step.
//
// Recording is off except under --profile: a call then costs one test of a flag.
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "gpu/cuda.cuh"  // dim3, cudaEvent_t, cudaCheck

// What a launch costs at the least, as its launcher states it from the shapes (never measured):
//   bytes  each element it must read or write, once (what a perfect cache would still move)
//   flops  its floating-point operations (a multiply-add counts 2)
//   walk   the most elements one thread handles one after another: a long walk on few threads
//          is a serial chain that no GPU width can shorten
struct LaunchCost {
    double bytes = 0, flops = 0, walk = 0;
};

// n elements, each read `reads` times (different arrays) and written `writes` times, one
// thread each: the cost of the simple pointwise kernels
inline LaunchCost pointwise_cost(size_t n, int reads, int writes, int flops_each = 1) {
    return {4.0 * n * (reads + writes), (double)n * flops_each, 1};
}

// The kernel's name, read off this function's signature (gcc: "... [with auto kernel = name]";
// nvcc's host pass may write "(& name)")
template <auto kernel>
inline std::string profiled_kernel_name() {
    std::string signature = __PRETTY_FUNCTION__;
    size_t start = signature.find("kernel = ");
    if (start == std::string::npos) return "a kernel";
    start += 9;
    std::string name = signature.substr(start, signature.find_first_of(";]", start) - start);
    const size_t amp = name.find('&');
    if (amp != std::string::npos) name = name.substr(amp + 1);
    while (!name.empty() && (name.back() == ')' || name.back() == ' ')) name.pop_back();
    while (!name.empty() && (name.front() == '(' || name.front() == ' ')) name.erase(0, 1);
    return name;
}

// One recorded call: a kernel launch or a library call (grid and block 0 for a library call,
// whose configuration the library chooses)
struct ProfiledCall {
    std::string name;
    unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    size_t shared_bytes = 0;
    LaunchCost cost;
    int first_event = -1;  // events[first_event], events[first_event + 1] bracket it on a GPU
    bool library() const { return grid[0] == 0; }  // a cuBLAS call or a memset
    double threads() const {
        return (double)grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2];
    }
};

// The counts of one profiled step
struct ProfiledStep {
    size_t first_call = 0;  // its calls: calls[first_call ... the next step's first_call)
    double seconds = 0;     // wall time, to the end of its last call on the device
    size_t copies_to_device = 0, copies_to_host = 0, bytes_to_device = 0, bytes_to_host = 0;
    size_t async_copies = 0;      // of those copies, the ones on the stream (the host does not wait)
    size_t synchronisations = 0;  // device-wide waits and blocking copies to the host, each of which waits
    size_t staging_waits = 0;     // waits for a pinned batch copy to be free (gpu/device_step.cuh)
};

struct Profiler {
    bool recording = false;
    std::vector<ProfiledCall> calls;
    std::vector<ProfiledStep> steps;
    std::vector<cudaEvent_t> events;  // a pool that grows, reused from one profile run to the next
    size_t events_used = 0;
    cudaStream_t stream = nullptr;    // where the events are recorded: the program's one stream

    // a new call; brackets it with events on a GPU (`timed`)
    void begin(const std::string& name, dim3 grid, dim3 block, size_t shared_bytes, LaunchCost cost, bool timed) {
        ProfiledCall call;
        call.name = name;
        call.grid[0] = grid.x, call.grid[1] = grid.y, call.grid[2] = grid.z;
        call.block[0] = block.x, call.block[1] = block.y, call.block[2] = block.z;
        call.shared_bytes = shared_bytes;
        call.cost = cost;
        if (timed) {
            while (events.size() < events_used + 2) {
                cudaEvent_t event;
                cudaEventCreate(&event);
                events.push_back(event);
            }
            call.first_event = (int)events_used;
            cudaEventRecord(events[events_used], stream);
            events_used += 2;
        }
        calls.push_back(call);
    }
    void end() {
        if (calls.back().first_event >= 0) cudaEventRecord(events[calls.back().first_event + 1], stream);
    }
    void copy(bool to_device, size_t bytes, bool async) {
        ProfiledStep& s = steps.back();
        (to_device ? s.copies_to_device : s.copies_to_host)++;
        (to_device ? s.bytes_to_device : s.bytes_to_host) += bytes;
        if (async) s.async_copies++;
        else if (!to_device) s.synchronisations++;
    }
};

inline Profiler& profiler() {
    static Profiler p;
    return p;
}

// the hooks the launchers call; each a flag test when recording is off
inline void profile_copy(bool to_device, size_t bytes, bool async = false) {
    if (profiler().recording) profiler().copy(to_device, bytes, async);
}
inline void profile_synchronisation() {
    if (profiler().recording) profiler().steps.back().synchronisations++;
}
inline void profile_staging_wait() {
    if (profiler().recording) profiler().steps.back().staging_waits++;
}

// ----------------------------------------------------------------------------
// lower bounds on a named GPU: a launch takes at least the largest of its bytes over the memory
// bandwidth, its FLOPs over the arithmetic peak, and one launch latency. The figures are the
// datasheet's (the latency an estimate): what the bound gives is a bound, not a measurement.

struct GpuFigures {
    const char* name;
    double bytes_per_second;  // memory bandwidth
    double fp32_flops;        // FLOP/s without tensor cores
    double tf32_flops;        // FLOP/s of TF32 tensor cores (dense), for cuBLAS under --tf32
    double launch_seconds;    // one kernel launch back to back with the next: an estimate
    int lanes;                // FP32 lanes: SMs x 128
};

// NVIDIA's H200 SXM datasheet: 4.8 TB/s HBM3e, 67 TFLOP/s fp32, 495 TFLOP/s TF32 dense, 132 SMs;
// the launch latency (2 µs) is an estimate
constexpr GpuFigures H200 = {"NVIDIA H200 SXM", 4.8e12, 67e12, 495e12, 2e-6, 132 * 128};
// NVIDIA's H100 SXM datasheet: 3.35 TB/s HBM3, the H200's arithmetic and SMs; the same latency estimate
constexpr GpuFigures H100 = {"NVIDIA H100 SXM", 3.35e12, 67e12, 495e12, 2e-6, 132 * 128};

// The figures of the GPU named `device` (device_name's words) where they are here: an H100 SXM
// ("NVIDIA H100 80GB HBM3") or an H200; any other GPU, and the emulation, get the H200's, which
// the tables then name as not this GPU's (*own false)
inline const GpuFigures& bound_figures(const std::string& device, bool* own) {
    const bool h100 = device.find("H100") != std::string::npos &&
                      (device.find("HBM3") != std::string::npos || device.find("SXM") != std::string::npos);
    *own = h100 || device.find("H200") != std::string::npos;
    return h100 ? H100 : H200;
}

// a launch with more than this walk, on fewer threads than the GPU's lanes: a serial chain
constexpr double SERIAL_WALK = 256;

inline double lower_bound_seconds(const LaunchCost& cost, const GpuFigures& gpu, bool tensor_cores) {
    const double memory = cost.bytes / gpu.bytes_per_second;
    const double math = cost.flops / (tensor_cores ? gpu.tf32_flops : gpu.fp32_flops);
    return std::max(std::max(memory, math), gpu.launch_seconds);
}

inline bool is_serial_launch(const ProfiledCall& call, const GpuFigures& gpu) {
    return !call.library() && call.threads() < gpu.lanes && call.cost.walk > SERIAL_WALK;
}
