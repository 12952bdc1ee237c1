// dev/exercises/check/attention.h: the outputs of the course's attention steps (3, 4, 5 and 9's
// launchers) and the runs that fill them: A and y of the forward; dS, dq, dk, dv and dM of the
// backward, each from the kernel lab's cases (dev/dev_check.h), named at their places.
#pragma once
#include <functional>
#include "dev/exercises/check/check.h"  // Output, Outputs, nan_filled, DevBuffer, ForwardCase, BackwardCase

// The forward's outputs, written (=): A (B,NH,T,T), then y (B,T,NH,HS)
inline std::vector<Output> forward_outputs(const ForwardCase& c) {
    const AttentionShape s = c.s;
    return {{"A", c.att, nan_filled(c.att.size()), "bhij", {s.B, s.NH, s.T, s.T}},
            {"y", c.out, nan_filled(c.out.size()), "bthd", {s.B, s.T, s.NH, s.HS}}};
}

// A forward on fresh buffers: `launch(out, att, qkv, mask_term)`, the mask term the CPU's (nullptr
// without a mask), out and att NaN; what it left in A and y
inline Outputs forward_run(const ForwardCase& c,
                           const std::function<void(float*, float*, const float*, const float*)>& launch) {
    DevBuffer qkv(c.qkv), mask_term(c.mask_term), out(nan_filled(c.out.size())), att(nan_filled(c.att.size()));
    launch(out.ptr, att.ptr, qkv.ptr, c.s.mask_heads ? mask_term.ptr : nullptr);
    return {att.get(), out.get()};
}

// The backward's outputs: dS written (=), then dq, dk, dv (B,T,NH,HS) and dM (mask_heads,T,T) added
// (+=) to random starts; dM only with a mask
inline std::vector<Output> backward_outputs(const BackwardCase& c) {
    const AttentionShape s = c.s;
    std::vector<Output> outputs = {{"dS", c.dscores, nan_filled(c.dscores.size()), "bhij", {s.B, s.NH, s.T, s.T}}};
    for (int part = 0; part < 3; part++)
        outputs.push_back({QKV_GRADIENTS[part], qkv_part(c.dqkv, s, part), qkv_part(c.dqkv_start, s, part), "bthd",
                           {s.B, s.T, s.NH, s.HS}});
    if (s.mask_heads) outputs.push_back({"dM", c.dmask, c.dmask_start, "hij", {s.mask_heads, s.T, s.T}});
    return outputs;
}

// A backward on fresh buffers: `launch(dqkv, dmask, dscores, dout, qkv, att, mask)`, dqkv and dM
// from the case's starts, dS NaN; what it left in dS, dq, dk, dv and dM (backward_outputs' order)
inline Outputs backward_run(
    const BackwardCase& c,
    const std::function<void(float*, float*, float*, const float*, const float*, const float*, const float*)>& launch) {
    const AttentionShape s = c.s;
    DevBuffer qkv(c.qkv), mask(c.mask), att(c.att), dout(c.dout), dqkv(c.dqkv_start), dmask(c.dmask_start);
    DevBuffer dscores(nan_filled(c.att.size()));
    launch(dqkv.ptr, dmask.ptr, dscores.ptr, dout.ptr, qkv.ptr, att.ptr, s.mask_heads ? mask.ptr : nullptr);
    const std::vector<float> dqkv_got = dqkv.get();
    Outputs got = {dscores.get()};
    for (int part = 0; part < 3; part++) got.push_back(qkv_part(dqkv_got, s, part));
    if (s.mask_heads) got.push_back(dmask.get());
    return got;
}
