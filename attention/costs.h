// attention/costs.h: what a launch of attention costs at the least, as every version's launchers
// state it for --profile (gpu/profile.h). s is an AttentionShape (attention.cuh, which
// includes this file before it declares the struct: hence the template).
#pragma once
#include "gpu/profile.h"  // LaunchCost

// A launch over the (B,NH,T) rows: q, k, v and y (or dy, dq, dk, dv) once, `matrices` (B,NH,T,T)
// score matrices read or written, `products` T·HS products a row; walk: its thread's longest
// loop, counted from the kernel's loops.
template <typename Shape>
inline LaunchCost attention_cost(const Shape& s, int matrices, int products, double walk) {
    const double rows = (double)s.B * s.NH * s.T;
    return {4.0 * rows * (4.0 * s.HS + (double)matrices * s.T), 2.0 * rows * s.T * s.HS * products, walk};
}

// A launch of the mask gradient: every dS read once, the mask read, dM read and written.
template <typename Shape>
inline LaunchCost attention_mask_cost(const Shape& s, double walk) {
    const double scores = (double)s.B * s.NH * s.T * s.T;
    return {4.0 * (scores + 3.0 * s.mask_heads * s.T * s.T), scores, walk};
}
