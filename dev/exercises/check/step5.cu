// dev/exercises/check/step5.cu: the kernel course's step 5 (make exercise STEP=5): the file EXERCISE's
// warp reductions on a block of 4 warps, then its attention_forward_warp_exercise, launched as
// version 2's forward is (attention_forward_gpu2), against the CPU's attention_forward_cpu
// (attention.cuh) on the kernel lab's --quick shapes (or --shape): A and y, within the tolerance (a
// warp sums in another order than the CPU's loop). check.h says what is checked and how.
#include <algorithm>
#include "attention/warp.cuh"               // attention_forward_kernel2: the signature to match
#include "dev/exercises/check/attention.h"  // forward_outputs, forward_run
#include EXERCISE  // warp_max_exercise, warp_sum_exercise, attention_forward_warp_exercise

COURSE_SAME_SIGNATURE(warp_max_exercise, warp_max);
COURSE_SAME_SIGNATURE(warp_sum_exercise, warp_sum);
COURSE_SAME_SIGNATURE(attention_forward_warp_exercise, attention_forward_kernel2);

constexpr int WARPS = 4;  // the reductions' block, and the forward's warps a block (version 2's)

// Every lane of a block of WARPS warps: its warp's max and sum of in, by the learner's reductions
__global__ void warp_reductions_kernel(float* maxes, float* sums, const float* in) {
    maxes[threadIdx.x] = warp_max_exercise(in[threadIdx.x]);
    sums[threadIdx.x] = warp_sum_exercise(in[threadIdx.x]);
}

// The reductions' case: random values, each warp's max and sum (in lane order) in all its lanes
static bool check_reductions() {
    Rng rng(5);
    const std::vector<float> in = dev_random(WARPS * WARP, rng, 10);
    std::vector<float> maxes(in.size()), sums(in.size());
    for (int w = 0; w < WARPS; w++) {
        const auto first = in.begin() + w * WARP;
        float sum = 0;
        for (int l = 0; l < WARP; l++) sum += first[l];
        std::fill_n(maxes.begin() + w * WARP, WARP, *std::max_element(first, first + WARP));
        std::fill_n(sums.begin() + w * WARP, WARP, sum);
    }
    const std::vector<Output> outputs = {{"warp_max", maxes, nan_filled(in.size()), "wl", {WARPS, WARP}},
                                         {"warp_sum", sums, nan_filled(in.size()), "wl", {WARPS, WARP}}};
    return check_case("warp_max and warp_sum in every lane of 4 warps (w: the warp, l: the lane)", outputs, [&] {
        DevBuffer g_in(in), g_maxes(nan_filled(in.size())), g_sums(nan_filled(in.size()));
        launch_kernel<warp_reductions_kernel>(1, WARPS * WARP, 0, g_maxes.ptr, g_sums.ptr, g_in.ptr);
        return Outputs{g_maxes.get(), g_sums.get()};
    });
}

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    course_begin("step 5, the attention forward, a warp per query row", EXERCISE,
                 "attention_forward_cpu, attention.cuh");
    if (!check_reductions())
        course_failed("for (int offset = 16; offset > 0; offset /= 2) x = x + (or fmaxf of x and) "
                      "__shfl_xor_sync(0xFFFFFFFFu, x, offset); return x;");
    for (const DevShape& shape : course_attention_shapes(opt, argv[0])) {
        const AttentionShape s = shape.s;
        const ForwardCase c(s);
        const bool ok = check_case(attention_label(shape), forward_outputs(c), [&] {
            return forward_run(c, [&](float* out, float* att, const float* qkv, const float* mask_term) {
                launch_kernel<attention_forward_warp_exercise>(ceil_div((size_t)s.B * s.NH * s.T, WARPS), WARPS * WARP,
                                                               0, out, att, qkv, mask_term, s);
            });
        });
        if (!ok)
            course_failed("row r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32; lanes over "
                          "keys (j = lane, lane + 32, ...) for the scores, warp_max, the exps, warp_sum, A; then "
                          "__syncwarp() before lanes over dims (d = lane, lane + 32, ...) read all of A_i,: for y");
    }
    return course_passed("the warp reductions, A and y match the CPU's on every shape, in every thread order");
}
