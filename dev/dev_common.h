// dev/dev_common.h: what the kernel lab's programs share (dev/README.md says what the lab is).
// Each program runs every version of one kernel family on the same shapes, checks it against
// the CPU reference, times it with CUDA events and prints one table:
//   shape | version | idea | time | bound | GB/s | TFLOP/s | max error | same bits
// (the bound from the costs the launchers state for --profile and the datasheet figures of this GPU
// where gpu/profile.h has them, else an H200's, named in the header: an estimate)
// It exits non-zero when any version misses the tolerance or gives NaN.
//   ./dev/attention_forward            every version on every shape
//   ./dev/attention_forward 3          version 3 only
//   ./dev/attention_forward --quick    small shapes and one timing run (the CPU emulation:
//                                      make test runs dev/*-emulated --quick)
//   ./dev/attention_forward --version  its commit and build settings (make gpu-check's preflight)
//   ./dev/attention_forward 3 --shape 64,256,6,64,6,1
//                                      one shape: B,T,NH,HS,mask heads (0, 1 or NH),causal (0/1);
//                                      tools/bench_gpu.py --attention times ours this way
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "attention/versions.cuh"  // the layer: row functions, CPU loops, every kernel version, the table
#include "dev/dev_check.h"         // the shapes, buffers and checks, shared with the kernel course
#include "gpu/profile.h"           // profiler, lower_bound_seconds, bound_figures: each call's bound

// The command line: [version] [--quick] [--shape B,T,NH,HS,MASK_HEADS,CAUSAL], or --version alone
struct DevOptions {
    int version = 0;  // 0: every version
    bool quick = false;
    std::vector<DevShape> shapes;  // dev_shapes(quick), or the one --shape
};

[[noreturn]] inline void dev_usage(const char* program) {
    fprintf(stderr, "usage: %s [version 1..%d] [--quick] [--shape B,T,NH,HS,MASK_HEADS,CAUSAL] | --version\n", program,
            ATTENTION_KERNEL_COUNT);
    exit(2);
}

inline DevOptions dev_options(int argc, char** argv) {
    DevOptions o;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--version" && argc == 2) { print_version(argv[0]); exit(0); }
        if (arg == "--quick") { o.quick = true; continue; }
        if (arg == "--shape" && i + 1 < argc) {
            o.shapes.resize(1);
            if (!parse_shape(argv[++i], &o.shapes[0])) dev_usage(argv[0]);
            continue;
        }
        char* end = nullptr;
        const long v = strtol(argv[i], &end, 10);
        if (*end || end == argv[i] || v < 1 || v > ATTENTION_KERNEL_COUNT) dev_usage(argv[0]);
        o.version = (int)v;
    }
    if (o.shapes.empty()) o.shapes = dev_shapes(o.quick);
    if (gpu_count() == 0) {
        fprintf(stderr, "%s: no CUDA GPU (make dev-emulated builds the CPU emulation's %s-emulated)\n", argv[0],
                argv[0]);
        exit(2);
    }
    return o;
}

// The largest |gpu - cpu|, or NaN when an entry misses (dev_first_miss). The first miss is printed
// as proof, at its place when the buffer's dims and their letters are given, else at its index.
inline double dev_max_error(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                            const std::string& letters = "", const std::vector<int>& dims = {}) {
    const size_t miss = dev_first_miss(gpu, cpu);
    if (miss < cpu.size()) {
        const std::string where =
            dims.empty() ? "[" + std::to_string(miss) + "]" : " at " + dev_place(miss, letters, dims);
        fprintf(stderr, "  %s%s: gpu %.7g, cpu %.7g\n", what, where.c_str(), gpu[miss], cpu[miss]);
        return NAN;
    }
    double worst = 0;
    for (size_t i = 0; i < cpu.size(); i++) worst = std::max(worst, std::fabs((double)gpu[i] - cpu[i]));
    return worst;
}

// the worse of two errors; NaN (a miss) wins
inline double dev_worst(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// The mean time of `runs` calls of f, by CUDA events around them (after one call to warm up). The
// events go on gpu_stream() (gpu/stream.cuh), the stream the kernels run on. Recorded on the
// legacy default stream, they would bracket the kernels only through that stream's implicit
// synchronisation with blocking streams: true while gpu_stream() is one, not what a timer should
// rest on.
template <typename F>
inline double dev_time_ms(int runs, F f) {
    f();
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    cudaCheck(cudaEventRecord(start, gpu_stream()));
    for (int r = 0; r < runs; r++) f();
    cudaCheck(cudaEventRecord(stop, gpu_stream()));
    cudaCheck(cudaEventSynchronize(stop));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    return ms / runs;
}

// The GPU whose datasheet figures the bound column uses: this one's where gpu/profile.h has them
// (own), else an H200's
inline const GpuFigures& dev_bound_figures(bool* own = nullptr) {
    bool mine = false;
    const GpuFigures& gpu = bound_figures(device_name(DEVICE_GPU), &mine);
    if (own) *own = mine;
    return gpu;
}

// The lines above a table: the program, the GPU, and what the bound column is, on which GPU's figures
inline void dev_table_intro(const char* program) {
    bool own = false;
    const GpuFigures& gpu = dev_bound_figures(&own);
    printf("%s on %s\n", program, device_name(DEVICE_GPU).c_str());
#ifdef MASKPRIOR_CUDA_EMULATION
    printf("(the CPU emulation of CUDA: the checks hold, the times are not a GPU's)\n");
#endif
    printf("(bound: the sum of the call's launches' lower bounds on an %s%s,\n"
           " from the costs their launchers state: datasheet figures and a 2 µs launch, an estimate, not a\n"
           " measurement; gpu/profile.h)\n",
           gpu.name, own ? "" : " (not this GPU: gpu/profile.h has no figures for it)");
}

inline void dev_table_header(const char* program) {
    dev_table_intro(program);
    printf("| %-34s | v | %-55s | %9s | %11s | %7s | %8s | %9s | %-9s |\n", "shape (B, T, NH, HS)", "idea", "time ms",
           "bound", "GB/s", "TFLOP/s", "max error", "same bits");
    printf("|%s|---|%s|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(57, '-').c_str(),
           std::string(11, '-').c_str(), std::string(13, '-').c_str(), std::string(9, '-').c_str(),
           std::string(10, '-').c_str(), std::string(11, '-').c_str(), std::string(11, '-').c_str());
}

// The lower bound of one call, in ms, on dev_bound_figures()'s GPU: the sum over its launches of
// each one's bound, from the costs their launchers state for --profile (gpu/profile.h). Runs the
// call once.
template <typename F>
inline double dev_bound_ms(F call) {
    Profiler& p = profiler();
    p.calls.clear();
    p.steps.assign(1, ProfiledStep{});
    p.events_used = 0;
    p.recording = true;
    call();
    p.recording = false;
    double seconds = 0;
    for (const ProfiledCall& launch : p.calls) seconds += lower_bound_seconds(launch.cost, dev_bound_figures(), false);
    return seconds * 1e3;
}

// One row of the table; bytes and flops are the napkin counts of one call, bound_ms its bound
inline void dev_table_row(const DevShape& shape, int version, double ms, double bound_ms, double bytes, double flops,
                          double error, bool reproducible) {
    const AttentionShape& s = shape.s;
    const std::string dims = std::string(shape.name) + " " + std::to_string(s.B) + "," + std::to_string(s.T) + "," +
                             std::to_string(s.NH) + "," + std::to_string(s.HS);
    printf("| %-34s | %d | %-55s | %9.4f | %8.4f ms | %7.1f | %8.3f | %9.2e | %-9s |\n", dims.c_str(), version,
           ATTENTION_KERNELS[version - 1].idea, ms, bound_ms, bytes / (ms * 1e6), flops / (ms * 1e9), error,
           reproducible ? "yes" : "NO");
}

// Whether a version cannot run a shape (version 3: HS > 128; version 4: T > 64, or a head past its
// shared memory); the row then says why
inline bool dev_skip(const DevShape& shape, int version) {
    const std::string refusal = attention_kernel_refusal(version, shape.s.HS, shape.s.T);
    if (refusal.empty()) return false;
    printf("| %-34s | %d | skipped: %-46s |\n", shape.name, version, refusal.c_str());
    return true;
}
