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
#include "dev/dev_common.h"  // the shapes, options, buffers, cases, checks and table of the lab

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

