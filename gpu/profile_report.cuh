// gpu/profile_report.cuh: --profile N, where the time of a GPU training step goes. After one warm-up
// step (which allocates what the layers allocate on first use), N training steps run with every
// launch, cuBLAS call, copy and synchronisation recorded (gpu/profile.h); then one table by
// kernel and launch configuration, and one line per step.
//
// On a GPU each call's time comes from the CUDA events around it. On the CPU emulation there are
// no times; what the table shows there is what a learner without a GPU can see: each launch's
// threads and walk, and its lower bound on an H200 (gpu/profile.h: bytes / bandwidth, FLOPs /
// peak, one launch latency; a bound from the datasheet, never a measurement). A launch marked
// "serial" has fewer threads than the H200 has lanes while each walks more than SERIAL_WALK
// elements in turn: most of the GPU idles while a few threads walk.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>
#include "gpu/cuda.cuh"       // GPU_EMULATED
#include "layers/device.cuh"  // Device, device_sync, now_seconds
#include "gpu/profile.h"      // Profiler, ProfiledCall, H200, lower_bound_seconds, is_serial_launch

// The calls of one kind: a kernel with one launch configuration, or one named cuBLAS product
struct ProfileRow {
    ProfiledCall first;  // its configuration
    size_t calls = 0;
    double bytes = 0, flops = 0, walk = 0, bound_seconds = 0, gpu_seconds = 0;
    bool serial = false;
    bool stated = false;  // whether its launcher states its cost (else the bound is one launch latency)
};

inline std::string dims(const unsigned d[3]) {
    if (d[0] == 0) return "-";
    std::string s = std::to_string(d[0]);
    if (d[1] > 1 || d[2] > 1) s += "x" + std::to_string(d[1]);
    if (d[2] > 1) s += "x" + std::to_string(d[2]);
    return s;
}

// the rows of the recorded calls, the costliest first (by GPU time where there is one, else bound)
inline std::vector<ProfileRow> profile_rows(const Profiler& p, bool tensor_cores, bool timed) {
    std::map<std::string, ProfileRow> by_key;
    for (const ProfiledCall& call : p.calls) {
        const std::string key = call.name + " " + dims(call.grid) + " " + dims(call.block) + " " +
                                std::to_string(call.shared_bytes);
        ProfileRow& row = by_key[key];
        if (row.calls == 0) row.first = call;
        row.calls++;
        row.bytes += call.cost.bytes;
        row.flops += call.cost.flops;
        row.walk = std::max(row.walk, call.cost.walk);
        row.stated = call.cost.bytes > 0 || call.cost.flops > 0 || call.cost.walk > 0;
        // a cuBLAS call uses tensor cores where TF32 is on
        row.bound_seconds += lower_bound_seconds(call.cost, H200, call.library() && tensor_cores);
        row.serial = row.serial || is_serial_launch(call, H200);
        if (timed && call.first_event >= 0) {
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, p.events[call.first_event], p.events[call.first_event + 1]));
            row.gpu_seconds += ms / 1000.0;
        }
    }
    std::vector<ProfileRow> rows;
    for (auto& [key, row] : by_key) rows.push_back(row);
    std::sort(rows.begin(), rows.end(), [&](const ProfileRow& a, const ProfileRow& b) {
        return timed ? a.gpu_seconds > b.gpu_seconds : a.bound_seconds > b.bound_seconds;
    });
    return rows;
}

inline void print_profile(const Profiler& p, int steps, bool tensor_cores) {
    const bool timed = !GPU_EMULATED;
    const std::vector<ProfileRow> rows = profile_rows(p, tensor_cores, timed);
    double step_seconds = 0;
    for (const ProfiledStep& s : p.steps) step_seconds += s.seconds / steps;
    printf("\nper step, averaged over %d steps; bound: the lower bound on an %s (4.8 TB/s, 67 TFLOP/s fp32, "
           "495 TF32, 2 µs a launch: datasheet figures, the latency an estimate)\n",
           steps, H200.name);
    printf("%-52s %6s %9s %9s %9s %6s %7s %9s %9s %10s", "kernel / call", "calls", "grid", "block", "threads", "smem",
           "walk", "MB", "GFLOP", "bound µs");
    if (timed) printf(" %9s %6s %8s %8s", "GPU ms", "%", "GB/s", "TFLOP/s");
    printf("\n");
    size_t launches = 0, cublas_calls = 0, memsets = 0, graph_launches = 0;
    double bound = 0, longest_walk = 0;
    std::string longest_walker;
    for (const ProfileRow& r : rows) {
        const ProfiledCall& c = r.first;
        const bool library = c.library();
        (!library                               ? launches
         : c.name.rfind("cublas", 0) == 0        ? cublas_calls
         : c.name.rfind("cudaGraphLaunch", 0) == 0 ? graph_launches
                                                 : memsets) += r.calls;
        bound += r.bound_seconds;
        if (r.walk > longest_walk) longest_walk = r.walk, longest_walker = c.name;
        char mb[32] = "?", gflop[32] = "?";  // ?: not stated
        if (r.stated) snprintf(mb, sizeof mb, "%.2f", r.bytes / steps / 1e6);
        if (r.stated) snprintf(gflop, sizeof gflop, "%.3f", r.flops / steps / 1e9);
        const std::string walk = library ? "-" : r.stated ? std::to_string((long long)r.walk) : "?";
        printf("%-52.52s %6.1f %9s %9s %9s %6s %7s %9s %9s %10.1f", c.name.c_str(), (double)r.calls / steps,
               dims(c.grid).c_str(), dims(c.block).c_str(),
               library ? "-" : std::to_string((long long)c.threads()).c_str(),
               library ? "-" : std::to_string(c.shared_bytes).c_str(), walk.c_str(), mb, gflop,
               r.bound_seconds / steps * 1e6);
        if (timed) {
            const double ms = r.gpu_seconds / steps * 1e3;
            printf(" %9.3f %6.1f %8.0f %8.2f", ms, 100 * ms / 1e3 / step_seconds,
                   r.gpu_seconds > 0 ? r.bytes / r.gpu_seconds / 1e9 : 0.0,
                   r.gpu_seconds > 0 ? r.flops / r.gpu_seconds / 1e12 : 0.0);
        }
        printf("%s\n", r.serial ? "  serial" : "");
    }
    size_t serial_rows = 0, unstated_rows = 0;
    for (const ProfileRow& r : rows) serial_rows += r.serial, unstated_rows += !r.stated;
    if (unstated_rows)
        printf("(?: %zu launch configurations whose launcher states no cost: their bound is one launch latency)\n",
               unstated_rows);
    if (graph_launches > 0)  // the work inside a graph is not recorded call by call
        printf("\na step: %.1f graph launches (their nodes: each captured kernel launch, cuBLAS call, copy and "
               "memset; run without --cuda-graph for them one by one), %.1f kernel launches, %.1f cuBLAS calls, "
               "%.1f memsets outside the graph\n",
               (double)graph_launches / steps, (double)launches / steps, (double)cublas_calls / steps,
               (double)memsets / steps);
    else
        printf("\na step: %.1f kernel launches, %.1f cuBLAS calls, %.1f memsets; the longest walk of one thread %.0f "
               "elements (%s); %zu launch configurations marked serial; the summed lower bound %.3f ms (an estimate "
               "on an %s)\n",
               (double)launches / steps, (double)cublas_calls / steps, (double)memsets / steps, longest_walk,
               longest_walker.c_str(), serial_rows, bound / steps * 1e3, H200.name);
    for (size_t i = 0; i < p.steps.size(); i++) {
        const ProfiledStep& s = p.steps[i];
        printf("step %zu: %.3f ms wall%s; copies to the device %zu (%zu bytes), to the host %zu (%zu bytes), of "
               "them asynchronous %zu; synchronisations %zu; waits for a pinned batch copy %zu\n",
               i + 1, s.seconds * 1e3, timed ? "" : " (the emulation's, not a GPU's)", s.copies_to_device,
               s.bytes_to_device, s.copies_to_host, s.bytes_to_host, s.async_copies, s.synchronisations,
               s.staging_waits);
    }
}

// Runs run_step(0) unrecorded, then run_step(1) ... run_step(steps) recorded, into profiler().
template <typename Step>
inline void record_profile(Device dev, int steps, Step run_step) {
    Profiler& p = profiler();
    run_step(0);
    device_sync(dev);
    p.calls.clear();
    p.steps.clear();
    p.events_used = 0;
    p.stream = gpu_stream();
    for (int i = 0; i < steps; i++) {
        p.steps.push_back({p.calls.size()});
        const double start = now_seconds();
        p.recording = true;
        run_step(1 + i);
        p.recording = false;
        device_sync(dev);  // not recorded: the step's end, for its wall time
        p.steps.back().seconds = now_seconds() - start;
    }
}
