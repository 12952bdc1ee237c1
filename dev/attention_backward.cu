// dev/attention_backward.cu: every version of the attention backward, the mask gradient dM
// included, checked against the CPU and timed side by side (dev/README.md). Build and run:
//   make dev && ./dev/attention_backward [version] [--quick]
//   make dev-emulated && ./dev/attention_backward-emulated --quick   (no GPU: the CPU emulation)
// The versions (attention/versions.cuh's ATTENTION_KERNELS):
//   1  attention.cuh        one thread per query row (dA, dS, dq), per key column (dk, dv) and
//                           per mask entry (dM, summed over the batch by that one thread)
//   2  attention/warp.cuh   one warp per query row and per key column; dM as in version 1
//   3  attention/flash.cuh  version 2's dq, dk, dv; dM summed in batch groups, then the groups'
//                           partial sums in group order: parallel over the batch, no atomics
//   4  attention/short.cuh  T <= 64: one block a head, A then dS kept in shared memory; dM's
//                           first stage in that launch (4 batch rows a block), then the groups
// Checked: dq, dk, dv and dM within 1e-4 + 1e-3·|cpu| (both accumulate into random values, as every
// backward here does), a miss named at its (b, t, h, d) or (h, i, j), and two runs from the same
// inputs give the same bits.
// Napkin counts of one call: bytes = qkv, A and dy read, dS written and read back, dqkv read and
// written, the mask read and dM read and written; flops = 8·B·NH·T²·HS (dA, dq, dk, dv).
//
// Built with -DATTENTION_BACKWARD_EXERCISE='"file"' (make exercise, on the emulation), it checks
// the exercise's three kernels in that file instead of the versions (dev/exercises/README.md):
// the same inputs and CPU reference; each output's first miss is named, with its likely cause.
#include <algorithm>
#include <type_traits>
#include "dev/dev_common.h"  // the shapes, options, buffers, checks and table of the lab
#ifdef ATTENTION_BACKWARD_EXERCISE
#include ATTENTION_BACKWARD_EXERCISE  // the exercise: attention_backward_{rows,columns,mask}_exercise
#endif

// One shape's random inputs and the CPU's outputs from them (attention_backward_cpu), which every
// version, and the exercise, is checked against. The backward adds into dqkv and dM (+=), so both
// start from random values, which a missing term cannot hide behind.
struct BackwardCase {
    AttentionShape s;
    std::vector<float> qkv, mask, dout;          // (B,T,3·NH·HS), (mask heads or 1,T,T), dy (B,T,NH·HS)
    std::vector<float> att;                      // (B,NH,T,T) A, from the CPU's forward
    std::vector<float> dqkv_start, dmask_start;  // what the backward adds into: dqkv's shape, the mask's
    std::vector<float> dqkv, dmask, dscores;     // the CPU's: the starts plus the gradients, and dS (B,NH,T,T)
    explicit BackwardCase(AttentionShape shape) : s(shape) {
        const DevSizes n(s);
        Rng rng(8);
        qkv = dev_random(n.qkv, rng);
        mask = dev_random(n.mask, rng, 4);
        dout = dev_random(n.out, rng);
        dqkv_start = dev_random(n.qkv, rng);
        dmask_start = dev_random(n.mask, rng);
        const float* m = s.mask_heads ? mask.data() : nullptr;
        std::vector<float> out(n.out), mask_term(n.mask);
        att.resize(n.att);
        dscores.resize(n.att);
        attention_forward_cpu(out.data(), att.data(), qkv.data(), m, mask_term.data(), s);
        dqkv = dqkv_start;
        dmask = dmask_start;
        attention_backward_cpu(dqkv.data(), dmask.data(), dscores.data(), dout.data(), qkv.data(), att.data(), m, s);
    }
};

// dqkv's dq, dk or dv (part 0, 1 or 2) as a (B,T,NH,HS) buffer of its own, to be checked and named alone
static std::vector<float> qkv_part(const std::vector<float>& dqkv, AttentionShape s, int part) {
    const size_t row = (size_t)s.NH * s.HS;  // one token's q (or k, or v) of every head
    std::vector<float> out((size_t)s.B * s.T * row);
    for (size_t bt = 0; bt < (size_t)s.B * s.T; bt++)
        std::copy_n(dqkv.begin() + (bt * 3 + part) * row, row, out.begin() + bt * row);
    return out;
}

static const char* const QKV_GRADIENTS[3] = {"dq", "dk", "dv"};

#ifndef ATTENTION_BACKWARD_EXERCISE
// A version's dq, dk, dv and dM against the CPU's: the largest error, or NaN at a miss, each
// output's first miss printed at its (b, t, h, d), or (h, i, j) for dM (h 0: the heads share it)
static double backward_error(const BackwardCase& c, const std::vector<float>& dqkv, const std::vector<float>& dmask) {
    const AttentionShape s = c.s;
    double error = 0;
    for (int part = 0; part < 3; part++)
        error = dev_worst(error, dev_max_error(QKV_GRADIENTS[part], qkv_part(dqkv, s, part), qkv_part(c.dqkv, s, part),
                                               "bthd", {s.B, s.T, s.NH, s.HS}));
    if (s.mask_heads) error = dev_worst(error, dev_max_error("dM", dmask, c.dmask, "hij", {s.mask_heads, s.T, s.T}));
    return error;
}

int main(int argc, char** argv) {
    const DevOptions opt = dev_options(argc, argv);
    dev_table_header("attention backward (dq, dk, dv and dM)");
    bool all_ok = true;
    for (const DevShape& shape : opt.shapes) {
        const AttentionShape s = shape.s;
        const DevSizes n(s);
        const BackwardCase c(s);
        DevBuffer g_qkv(c.qkv), g_mask(c.mask), g_att(c.att), g_dout(c.dout), g_dqkv(c.dqkv_start);
        DevBuffer g_dmask(c.dmask_start), g_dscores(c.dscores);
        const float* gm = s.mask_heads ? g_mask.ptr : nullptr;
        const double bytes = sizeof(float) * (double)(n.qkv + n.att + n.out + 2 * n.att + 2 * n.qkv +
                                                      (s.mask_heads ? 3 * n.mask : 0));
        const double flops = 8.0 * s.B * s.NH * s.T * s.T * s.HS;
        for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
            if (opt.version && version != opt.version) continue;
            if (dev_skip(shape, version)) continue;
            Kernels kernels;
            kernels.attention = version;
            auto call = [&] {
                attention_backward(DEVICE_GPU, kernels, g_dqkv.ptr, g_dmask.ptr, g_dscores.ptr, g_dout.ptr, g_qkv.ptr,
                                   g_att.ptr, gm, s);
            };
            std::vector<float> runs[2][2];  // [run][dqkv, dM]
            for (auto& run : runs) {
                g_dqkv.set(c.dqkv_start);
                g_dmask.set(c.dmask_start);
                g_dscores.set(std::vector<float>(n.att, NAN));  // dS is the backward's to write
                call();
                run[0] = g_dqkv.get();
                run[1] = g_dmask.get();
            }
            const double error = backward_error(c, runs[0][0], runs[0][1]);
            const bool reproducible = same_bits(runs[0][0], runs[1][0]) && same_bits(runs[0][1], runs[1][1]);
            const double ms = dev_time_ms(opt.quick ? 1 : 20, call);  // accumulating into dqkv and dM, as training does
            dev_table_row(shape, version, ms, dev_bound_ms(call), bytes, flops, error, reproducible);
            all_ok = all_ok && !std::isnan(error) && reproducible;
        }
    }
    printf(all_ok ? "every version matches the CPU\n" : "MISMATCH: a version above misses the CPU reference\n");
    return all_ok ? 0 : 1;
}

#else
// ----------------------------------------------------------------------------
// the exercise (dev/exercises/README.md), on the emulation: its schedule runs a block's threads in
// either order
#ifndef MASKPRIOR_CUDA_EMULATION
#error "the exercise is built on the CUDA emulation: make exercise"
#endif

// Its kernels have kernel 1's signatures: the solution is kernel 1's own kernels under these names
static_assert(std::is_same_v<std::decay_t<decltype(attention_backward_rows_exercise)>,
                             decltype(&attention_backward_rows_kernel1)> &&
                  std::is_same_v<std::decay_t<decltype(attention_backward_columns_exercise)>,
                                 decltype(&attention_backward_columns_kernel1)> &&
                  std::is_same_v<std::decay_t<decltype(attention_backward_mask_exercise)>,
                                 decltype(&attention_backward_mask_kernel1)>,
              "the exercise's kernels take the arguments of kernel 1's (attention.cuh)");

// The exercise's launches, kernel 1's: a thread per (b, h, i) query row, then per (b, h, j) key
// column, then per mask entry, in blocks of 128. Shapes as in attention_backward_cpu.
static void attention_backward_exercise(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                        const float* att, const float* mask, AttentionShape s) {
    const unsigned blocks = ceil_div((size_t)s.B * s.NH * s.T, 128);
    launch_kernel<attention_backward_rows_exercise>(blocks, 128, 0, dqkv, dscores, dout, qkv, att, s);
    launch_kernel<attention_backward_columns_exercise>(blocks, 128, 0, dqkv, dscores, dout, qkv, att, s);
    if (s.mask_heads)
        launch_kernel<attention_backward_mask_exercise>(ceil_div((size_t)s.mask_heads * s.T * s.T, 128), 128, 0, dmask,
                                                        dscores, mask, s);
}

// What one call of the exercise left: dqkv, dM and dS
struct ExerciseRun {
    std::vector<float> dqkv, dmask, dscores;
};

// One call from the case's starts (dS from NaN: the rows kernel's to write), a block's threads run
// in `order` (the emulation runs them one at a time: emu/threads.h); then index order again
static ExerciseRun run_exercise(const BackwardCase& c, emu::Order order) {
    DevBuffer qkv(c.qkv), mask(c.mask), att(c.att), dout(c.dout), dqkv(c.dqkv_start), dmask(c.dmask_start);
    DevBuffer dscores(std::vector<float>(c.att.size(), NAN));
    emu::schedule() = {order, 0};
    attention_backward_exercise(dqkv.ptr, dmask.ptr, dscores.ptr, dout.ptr, qkv.ptr, att.ptr,
                                c.s.mask_heads ? mask.ptr : nullptr, c.s);
    ExerciseRun run{dqkv.get(), dmask.get(), dscores.get()};  // get() waits for the kernels, which run then
    emu::schedule() = {emu::Order::index, 0};
    return run;
}

// One output of the exercise: true when it matches the CPU's; its line, added to report: "ok", or
// WRONG at its first miss's place with the two values and, when the value tells, why. start: what
// the output held before the call (nullptr for dS, which starts as NaN).
static bool exercise_output(std::string& report, const char* name, const std::vector<float>& got,
                            const std::vector<float>& expected, const std::vector<float>* start,
                            const std::string& letters, const std::vector<int>& dims) {
    char line[512];
    const size_t i = dev_first_miss(got, expected);
    if (i == expected.size()) {
        snprintf(line, sizeof line, "  %-3s ok\n", name);
        report += line;
        return true;
    }
    std::string why;
    if (std::isnan(got[i]))
        why = start ? ": a NaN went into it (dS starts as NaN: read where it was never written?)" : ": never written";
    else if (start && same_bits({got[i]}, {(*start)[i]}))
        why = ": its starting value, nothing was added here";
    else if (start && dev_close(got[i], expected[i] - (*start)[i]))
        why = ": the gradient alone, without the starting value: the backward adds (+=), it does not store (=)";
    snprintf(line, sizeof line, "  %-3s WRONG at %s: expected %.7g, got %.7g%s\n", name,
             dev_place(i, letters, dims).c_str(), expected[i], got[i], why.c_str());
    report += line;
    return false;
}

// Whether two runs, a block's threads in index and in reverse order, left the same bits; a line in
// report for each output that differs: a number that two threads add into (a race on a GPU) gets its
// terms in another order in the two, so other bits
static bool same_bits_both_orders(std::string& report, const ExerciseRun& index, const ExerciseRun& reverse,
                                  AttentionShape s) {
    const char* const race = "differs between a block's threads run in index and in reverse order: two threads add"
                             " into one number (a race on a GPU)\n";
    const size_t before = report.size();
    for (int part = 0; part < 3; part++)
        if (!same_bits(qkv_part(index.dqkv, s, part), qkv_part(reverse.dqkv, s, part)))
            report += "  " + std::string(QKV_GRADIENTS[part]) + "  " + race;
    if (!same_bits(index.dmask, reverse.dmask)) report += std::string("  dM  ") + race;
    return report.size() == before;
}

int main(int argc, char** argv) {
    const DevOptions opt = dev_options(argc, argv);
    if (opt.version) {
        fprintf(stderr, "%s: the exercise has no versions: [--quick] [--shape B,T,NH,HS,MASK_HEADS,CAUSAL]\n", argv[0]);
        return 2;
    }
    printf("the exercise %s: dS, dq, dk, dv and dM against the CPU's (attention_backward_cpu)\n",
           ATTENTION_BACKWARD_EXERCISE);
    for (const DevShape& shape : opt.shapes) {
        const AttentionShape s = shape.s;
        const char* const masks[3] = {"no mask", "one mask shared by the heads", "a mask per head"};
        printf("%s (B %d, T %d, NH %d, HS %d, %s%s): ", shape.name, s.B, s.T, s.NH, s.HS,
               masks[std::min(s.mask_heads, 2)], s.causal ? ", causal" : "");
        const BackwardCase c(s);
        const ExerciseRun run = run_exercise(c, emu::Order::index);
        std::string report;
        bool ok = exercise_output(report, "dS", run.dscores, c.dscores, nullptr, "bhij", {s.B, s.NH, s.T, s.T});
        for (int part = 0; part < 3; part++) {
            const std::vector<float> start = qkv_part(c.dqkv_start, s, part);
            ok &= exercise_output(report, QKV_GRADIENTS[part], qkv_part(run.dqkv, s, part), qkv_part(c.dqkv, s, part),
                                  &start, "bthd", {s.B, s.T, s.NH, s.HS});
        }
        if (s.mask_heads)
            ok &= exercise_output(report, "dM", run.dmask, c.dmask, &c.dmask_start, "hij", {s.mask_heads, s.T, s.T});
        ok = ok && same_bits_both_orders(report, run, run_exercise(c, emu::Order::reverse), s);
        if (ok) {
            printf("ok\n");
            continue;
        }
        printf("\n%sFAILED: fix the first output above that is not ok, in the order the kernels write them"
               " (dev/exercises/README.md says what each message means)\n", report.c_str());
        return 1;
    }
    printf("PASSED: dS, dq, dk, dv and dM match the CPU's on every shape, with the same bits in either thread order\n");
    return 0;
}
#endif
