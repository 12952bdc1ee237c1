// dev/attention_forward.cu: every version of the attention forward, checked against the CPU and
// timed side by side (dev/README.md). Build and run:
//   make dev && ./dev/attention_forward [version] [--quick]
//   make dev-emulated && ./dev/attention_forward-emulated --quick   (no GPU: the CPU emulation)
// The versions (attention/versions.cuh's ATTENTION_KERNELS, each file's header says what it teaches):
//   1  attention.cuh        one thread per query row: the CPU's row function as it is
//   2  attention/warp.cuh   one warp per query row, warp shuffles for the softmax's max and sum
//   3  attention/flash.cuh  k/v tiles in shared memory, the online softmax
//   4  attention/short.cuh  T <= 64: a block holds the whole head in shared memory, one launch
// Checked: y (B,T,NH·HS) and A (B,NH,T,T) within 1e-4 + 1e-3·|cpu|, and two runs' bits equal.
// Napkin counts of one call: bytes = qkv read once + y and A written + the mask read;
// flops = 4·B·NH·T²·HS (Q K^T and A V, a multiply and an add each), counted as if not causal.
#include "dev/dev_common.h"

int main(int argc, char** argv) {
    const DevOptions opt = dev_options(argc, argv);
    dev_table_header("attention forward");
    bool all_ok = true;
    for (const DevShape& shape : opt.shapes) {
        const AttentionShape s = shape.s;
        const DevSizes n(s);
        const ForwardCase c(s);  // the inputs and the CPU's y and A
        DevBuffer g_qkv(c.qkv), g_mask(c.mask), g_out(c.out), g_att(c.att), g_mask_term(c.mask_term);
        const float* gm = s.mask_heads ? g_mask.ptr : nullptr;
        const double bytes = sizeof(float) * (double)(n.qkv + n.out + n.att + (s.mask_heads ? n.mask : 0));
        const double flops = 4.0 * s.B * s.NH * s.T * s.T * s.HS;
        for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
            if (opt.version && version != opt.version) continue;
            if (dev_skip(shape, version)) continue;
            Kernels kernels;
            kernels.attention = version;
            auto call = [&] {
                attention_forward(DEVICE_GPU, kernels, g_out.ptr, g_att.ptr, g_qkv.ptr, gm, g_mask_term.ptr, s);
            };
            std::vector<float> runs[2][2];  // [run][y, A]
            for (auto& run : runs) {
                g_out.set(std::vector<float>(n.out, NAN));  // what a kernel leaves unwritten stays NaN
                g_att.set(std::vector<float>(n.att, NAN));
                call();
                run[0] = g_out.get();
                run[1] = g_att.get();
            }
            const double error = dev_worst(dev_max_error("y", runs[0][0], c.out), dev_max_error("A", runs[0][1], c.att));
            const bool reproducible = same_bits(runs[0][0], runs[1][0]) && same_bits(runs[0][1], runs[1][1]);
            const double ms = dev_time_ms(opt.quick ? 1 : 20, call);
            dev_table_row(shape, version, ms, dev_bound_ms(call), bytes, flops, error, reproducible);
            all_ok = all_ok && !std::isnan(error) && reproducible;
        }
    }
    printf(all_ok ? "every version matches the CPU\n" : "MISMATCH: a version above misses the CPU reference\n");
    return all_ok ? 0 : 1;
}
