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
// Checked: dqkv and dM within 1e-4 + 1e-3·|cpu| (both accumulate into random values, as every
// backward here does), and two runs from the same inputs give the same bits.
// Napkin counts of one call: bytes = qkv, A and dy read, dS written and read back, dqkv read and
// written, the mask read and dM read and written; flops = 8·B·NH·T²·HS (dA, dq, dk, dv).
#include "dev/dev_common.h"

int main(int argc, char** argv) {
    const DevOptions opt = dev_options(argc, argv);
    dev_table_header("attention backward (dq, dk, dv and dM)");
    bool all_ok = true;
    for (const DevShape& shape : opt.shapes) {
        const AttentionShape s = shape.s;
        const DevSizes n(s);
        Rng rng(8);
        const std::vector<float> qkv = dev_random(n.qkv, rng), mask = dev_random(n.mask, rng, 4);
        const std::vector<float> dout = dev_random(n.out, rng);
        const std::vector<float> dqkv_in = dev_random(n.qkv, rng), dmask_in = dev_random(n.mask, rng);
        const float* m = s.mask_heads ? mask.data() : nullptr;
        std::vector<float> out(n.out), att(n.att), mask_term(n.mask), dscores(n.att);
        attention_forward_cpu(out.data(), att.data(), qkv.data(), m, mask_term.data(), s);
        std::vector<float> dqkv = dqkv_in, dmask = dmask_in;
        attention_backward_cpu(dqkv.data(), dmask.data(), dscores.data(), dout.data(), qkv.data(), att.data(), m, s);
        DevBuffer g_qkv(qkv), g_mask(mask), g_att(att), g_dout(dout), g_dqkv(dqkv_in), g_dmask(dmask_in);
        DevBuffer g_dscores(dscores);
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
                g_dqkv.set(dqkv_in);
                g_dmask.set(dmask_in);
                g_dscores.set(std::vector<float>(n.att, NAN));  // dS is the backward's to write
                call();
                run[0] = g_dqkv.get();
                run[1] = g_dmask.get();
            }
            double error = dev_max_error("dqkv", runs[0][0], dqkv);
            if (s.mask_heads) error = dev_worst(error, dev_max_error("dM", runs[0][1], dmask));
            const bool reproducible = same_bits(runs[0][0], runs[1][0]) && same_bits(runs[0][1], runs[1][1]);
            const double ms = dev_time_ms(opt.quick ? 1 : 20, call);  // accumulating into dqkv and dM, as training does
            dev_table_row(shape, version, ms, dev_h200_bound_ms(call), bytes, flops, error, reproducible);
            all_ok = all_ok && !std::isnan(error) && reproducible;
        }
    }
    printf(all_ok ? "every version matches the CPU\n" : "MISMATCH: a version above misses the CPU reference\n");
    return all_ok ? 0 : 1;
}
