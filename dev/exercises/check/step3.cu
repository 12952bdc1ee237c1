// dev/exercises/check/step3.cu: the kernel course's step 3 (make exercise STEP=3): the file EXERCISE's
// attention_forward_exercise, launched as kernel 1 is (attention_forward_gpu1), against the CPU's
// attention_forward_cpu (attention.cuh) on the kernel lab's --quick shapes (or --shape): A and y.
// check.h says what is checked and how.
#include "dev/exercises/check/attention.h"  // forward_outputs, forward_run
#include EXERCISE  // attention_forward_exercise

COURSE_SAME_SIGNATURE(attention_forward_exercise, attention_forward_kernel1);

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    course_begin("step 3, the attention forward, a thread per query row", EXERCISE,
                 "attention_forward_cpu, attention.cuh");
    for (const DevShape& shape : course_attention_shapes(opt, argv[0])) {
        const AttentionShape s = shape.s;
        const ForwardCase c(s);
        const bool ok = check_case(attention_label(shape), forward_outputs(c), [&] {
            return forward_run(c, [&](float* out, float* att, const float* qkv, const float* mask_term) {
                launch_kernel<attention_forward_exercise>(ceil_div((size_t)s.B * s.NH * s.T, 128), 128, 0, out, att,
                                                          qkv, mask_term, s);
            });
        });
        if (!ok)
            course_failed("(b, h, i) = row_index(r, s); q = head_vector(qkv, s, 0, b, i, h); the scores of keys "
                          "0..last into A's row r (mask row i of head_mask(mask_term, s, h)), their softmax in place, "
                          "then y_i over the same keys into out");
    }
    return course_passed("A and y match the CPU's on every shape, in every thread order");
}
