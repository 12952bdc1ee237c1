// dev/exercises/check/step7.cu: the kernel course's step 7 (make exercise STEP=7): the file EXERCISE's
// attention_mask_backward_exercise (its two launches) against the CPU's dM (attention_backward_cpu,
// attention.cuh) on shapes of one, two and three batch groups (the last one short), a mask shared
// by the heads and one per head, or --shape's: dM from the CPU's dS. check.h says what is checked
// and how.
#include "attention/flash.cuh"          // the kernels and launcher whose signatures the exercise's take
#include "dev/exercises/check/check.h"
#include EXERCISE  // attention_mask_partials_exercise, attention_mask_sum_exercise, attention_mask_backward_exercise

COURSE_SAME_SIGNATURE(attention_mask_partials_exercise, attention_mask_partials_kernel3);
COURSE_SAME_SIGNATURE(attention_mask_sum_exercise, attention_mask_sum_kernel3);
COURSE_SAME_SIGNATURE(attention_mask_backward_exercise, attention_mask_backward_gpu3);

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    std::vector<DevShape> shapes = {{"T16, shared mask, 3 batch rows: 1 group", {3, 16, 2, 16, 1, false}},
                                    {"T16, per head, 17 rows: 3 groups, the last of 1", {17, 16, 2, 8, 2, true}},
                                    {"T65, shared, 9 rows: 2 groups", {9, 65, 2, 8, 1, true}},
                                    {"T65, per head, 16 rows: 2 groups", {16, 65, 3, 4, 3, false}}};
    if (opt.shape) shapes = course_attention_shapes(opt, argv[0]);
    course_begin("step 7, dM summed in fixed batch groups", EXERCISE, "attention_backward_cpu, attention.cuh");
    for (const DevShape& shape : shapes) {
        const AttentionShape s = shape.s;
        if (s.mask_heads == 0) {
            fprintf(stderr, "%s: a shape without a mask has no dM\n", argv[0]);
            return 2;
        }
        const BackwardCase c(s);
        const std::vector<Output> outputs = {{"dM", c.dmask, c.dmask_start, "hij", {s.mask_heads, s.T, s.T}}};
        const bool ok = check_case(attention_label(shape), outputs, [&] {
            DevBuffer dscores(c.dscores), mask(c.mask), dmask(c.dmask_start);
            attention_mask_backward_exercise(dmask.ptr, dscores.ptr, mask.ptr, s);
            return Outputs{dmask.get()};
        });
        if (!ok)
            course_failed("stage 1 over groups x entries threads (groups = ceil(B / 8)): m = idx % count, g = idx / "
                          "count; its rows b = 8g .. min(8g + 8, B) - 1; the partial over dS[8g, first head, ij]. "
                          "Stage 2 over entries: the partials at rows 0, 8, 16, ... in order, times sigmoid_of_minus(M)");
    }
    return course_passed("dM matches the CPU's on every shape, with the same bits in every thread order");
}
