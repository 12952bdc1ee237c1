// dev/exercises/check/check.h: how the kernel course (dev/exercises/README.md) checks a step. Each
// step's program (check/step<N>.cu) includes the learner's file, runs its kernels on the CUDA
// emulation (emu/) from the same random inputs as the CPU's loops, and hands this file what came
// out: every output is compared with the CPU's, entry by entry, within 1e-4 + 1e-3·|cpu| (the
// tests' tolerance for sums), and the first that misses is named with its indices, the value
// wanted and the value got, and the likely mistake:
//   - an output the kernel writes (=) starts as NaN: one still NaN there was never written;
//   - an output the kernel adds into (+=) starts from random values: one that still holds its
//     start had nothing added, one that holds the new part alone was stored (=), not added;
//   - a NaN anywhere else was read from an entry nobody wrote (such entries start as NaN) or from
//     past the end of a buffer (the emulation's guard bytes and gaps read as NaN), or made by an
//     overflow (inf / inf);
//   - the kernels run three times, a block's threads in index order, in reverse order and
//     shuffled (emu/schedule.h): a value that changes with the order is a thread reading what
//     another writes with no barrier between them (a missing __syncthreads or __syncwarp), or
//     two threads adding into one number (a race on a GPU).
// What stops a run before any of this (a write past the end of a buffer, a barrier that some
// threads never reach, the host reading device memory) the emulation names itself, in one line.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <type_traits>
#include <string>
#include <vector>
#include "dev/dev_check.h"  // DevShape, dev_shapes, parse_shape, DevBuffer, dev_close, dev_first_miss, dev_place
#ifndef MASKPRIOR_CUDA_EMULATION
#error "the kernel course is built on the CUDA emulation, whose schedules it needs: make exercise"
#endif

// One output of a step's kernels, as the CPU computes it
struct Output {
    std::string name;             // "dM"
    std::vector<float> expected;  // the CPU's values
    std::vector<float> start;     // what its buffer holds before the call: NaN where the kernel writes,
                                  // random values where it adds, the input where it works in place
    std::string letters;          // a letter for each dimension: "hij"
    std::vector<int> dims;        // its shape, row-major: {mask heads, T, T}
    bool in_place = false;        // the kernel turns its input into it (start: the input)
};

// What one run of the learner's kernels left in each output, in the order of the step's outputs
using Outputs = std::vector<std::vector<float>>;

inline bool same_float_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

// Why entry i of an output may be wrong, from the value got, the CPU's and the start ("" when the
// value does not tell): the messages of dev/exercises/README.md
inline std::string likely_mistake(const Output& o, size_t i, float got) {
    const float start = o.start[i];
    if (std::isnan(got) && std::isnan(start) && same_float_bits(got, start)) return "never written";
    if (std::isnan(got))
        return "a NaN went into it: read from an entry that nothing wrote (such entries start as NaN), from past "
               "the end of a buffer (the emulation's guard bytes read as NaN), or made (inf / inf, 0 / 0, inf - inf: "
               "an e^x that overflowed?)";
    if (std::isinf(got)) return "an infinity: an e^x that overflowed, or the log of 0";
    if (same_float_bits(got, start))
        return o.in_place ? "its starting value, nothing was written here" : "its starting value, nothing was added here";
    if (!std::isnan(start) && dev_close(got, o.expected[i] - start))
        return "the new part alone, without the starting value: the kernel stores (=) where it should add (+=)";
    return "";
}

// One output's line for the report, from its run in index order: WRONG at its first miss with the
// two values and why (order_dependent: the output's bits change with the order of a block's threads)
inline std::string wrong_line(const Output& o, const std::vector<float>& got, size_t i, bool order_dependent) {
    const std::string why = likely_mistake(o, i, got[i]);
    char line[1024];
    snprintf(line, sizeof line, "  %-8s WRONG at %s: expected %.7g, got %.7g%s%s%s\n", o.name.c_str(),
             dev_place(i, o.letters, o.dims).c_str(), o.expected[i], got[i], why.empty() ? "" : ": ", why.c_str(),
             order_dependent ? "; it changes with the order of a block's threads: two threads write (or add into)"
                               " one entry, or one reads what another writes with no barrier between (__syncthreads,"
                               " __syncwarp)" : "");
    return line;
}

// The orders a case runs its kernels in: index first, then the two that move every thread
struct NamedOrder {
    const char* name;
    emu::Schedule schedule;
};
inline const NamedOrder ORDERS[3] = {{"in index order", {emu::Order::index, 0}},
                                     {"in reverse order", {emu::Order::reverse, 0}},
                                     {"shuffled (seed 1)", {emu::Order::shuffle, 1}}};

// One case of a step: `run` launches the learner's kernels on fresh buffers and returns what they
// left in each output. It runs once in each of ORDERS; the report gives every output's line from
// the index order, then what the other orders change. Prints "ok", or the report; true when ok.
inline bool check_case(const std::string& label, const std::vector<Output>& outputs,
                       const std::function<Outputs()>& run) {
    printf("%s: ", label.c_str());
    fflush(stdout);  // before the kernels run: a run the emulation stops prints its line after this one
    Outputs got[3];
    for (int k = 0; k < 3; k++) {
        emu::schedule() = ORDERS[k].schedule;
        got[k] = run();
    }
    emu::schedule() = ORDERS[0].schedule;
    std::string report;
    bool ok = true;
    for (size_t o = 0; o < outputs.size(); o++) {
        const Output& out = outputs[o];
        const bool order_dependent = !same_bits(got[0][o], got[1][o]) || !same_bits(got[0][o], got[2][o]);
        const size_t miss = dev_first_miss(got[0][o], out.expected);
        if (miss < out.expected.size()) {
            report += wrong_line(out, got[0][o], miss, order_dependent);
            ok = false;
            continue;
        }
        char line[1024];
        if (!order_dependent) {
            snprintf(line, sizeof line, "  %-8s ok\n", out.name.c_str());
            report += line;
            continue;
        }
        ok = false;  // right in index order, and other bits in another
        snprintf(line, sizeof line, "  %-8s right in every order, but its bits differ between a block's threads run in "
                 "index and in another order: two threads add into one number (a race on a GPU), or one reads what another "
                 "writes with no barrier between\n", out.name.c_str());
        for (int k = 1; k < 3; k++) {
            const size_t i = dev_first_miss(got[k][o], out.expected);
            if (i == out.expected.size()) continue;
            snprintf(line, sizeof line,
                     "  %-8s right with a block's threads in index order, WRONG %s at %s: expected %.7g, got %.7g: a "
                     "thread read what another thread of its block had not written yet: a missing __syncthreads "
                     "(or __syncwarp)\n", out.name.c_str(), ORDERS[k].name, dev_place(i, out.letters, out.dims).c_str(),
                     out.expected[i], got[k][o][i]);
            break;
        }
        report += line;
    }
    if (ok) {
        printf("ok\n");
        return true;
    }
    printf("\n%s", report.c_str());
    return false;
}

// The command line of a step's program: [--shape ...], which the step reads (attention steps: B,T,NH,HS,
// MASK_HEADS,CAUSAL); nothing else
struct CourseOptions {
    const char* shape = nullptr;  // --shape's text, or nullptr: the step's own shapes
};

inline CourseOptions course_options(int argc, char** argv, const char* shape_usage) {
    CourseOptions o;
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--shape" && i + 1 < argc) {
            o.shape = argv[++i];
            continue;
        }
        fprintf(stderr, "usage: %s [--shape %s]\n", argv[0], shape_usage);
        exit(2);
    }
    return o;
}

// The attention steps' shapes: the kernel lab's --quick ones (dev/dev_check.h), or --shape's one
inline std::vector<DevShape> course_attention_shapes(const CourseOptions& o, const char* program) {
    if (!o.shape) return dev_shapes(true);
    DevShape shape;
    if (!parse_shape(o.shape, &shape)) {
        fprintf(stderr, "usage: %s [--shape B,T,NH,HS,MASK_HEADS,CAUSAL]  (mask heads 0, 1 or NH; causal 0 or 1)\n",
                program);
        exit(2);
    }
    return {shape};
}

// An attention shape's label: its name and numbers, its mask, causal or not
inline std::string attention_label(const DevShape& shape) {
    const AttentionShape& s = shape.s;
    const char* const masks[3] = {"no mask", "one mask shared by the heads", "a mask per head"};
    char text[256];
    snprintf(text, sizeof text, "%s (B %d, T %d, NH %d, HS %d, %s%s)", shape.name, s.B, s.T, s.NH, s.HS,
             masks[s.mask_heads < 2 ? s.mask_heads : 2], s.causal ? ", causal" : "");
    return text;
}

inline std::vector<float> nan_filled(size_t n) { return std::vector<float>(n, NAN); }

// The first line of a step's output, and its last when every case passed (exit 0); a failed case
// ends the program (exit 1) with the line that says what to do, and the step's hint
inline void course_begin(const char* step, const char* file, const char* reference) {
    printf("%s, the file %s: its outputs against the CPU's (%s)\n", step, file, reference);
}

[[noreturn]] inline void course_failed(const char* hint) {
    printf("FAILED: fix the first output above that is not ok, in the order the kernels write them "
           "(dev/exercises/README.md says what each message means)\nhint: %s\n", hint);
    exit(1);
}

inline int course_passed(const char* what) {
    printf("PASSED: %s\n", what);
    return 0;
}

// The learner's kernel takes the arguments of the project's, which the solution names
#define COURSE_SAME_SIGNATURE(exercise, project)                                                \
    static_assert(std::is_same_v<std::decay_t<decltype(exercise)>, decltype(&project)>, #exercise \
                  " takes the arguments of the project's " #project)
