// dev/exercises/check/step4.cu: the kernel course's step 4 (make exercise STEP=4): the file EXERCISE's
// three backward kernels, launched as kernel 1's are (attention_backward_gpu1), against the CPU's
// attention_backward_cpu (attention.cuh) on the kernel lab's --quick shapes (or --shape): dS, dq, dk,
// dv and dM. check.h says what is checked and how.
#include "dev/exercises/check/attention.h"  // backward_outputs, backward_run
#include EXERCISE  // attention_backward_{rows,columns,mask}_exercise

COURSE_SAME_SIGNATURE(attention_backward_rows_exercise, attention_backward_rows_kernel1);
COURSE_SAME_SIGNATURE(attention_backward_columns_exercise, attention_backward_columns_kernel1);
COURSE_SAME_SIGNATURE(attention_backward_mask_exercise, attention_backward_mask_kernel1);

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    course_begin("step 4, the attention backward and dM, a thread per row, column and mask entry", EXERCISE,
                 "attention_backward_cpu, attention.cuh");
    for (const DevShape& shape : course_attention_shapes(opt, argv[0])) {
        const AttentionShape s = shape.s;
        const BackwardCase c(s);
        const bool ok = check_case(attention_label(shape), backward_outputs(c), [&] {
            return backward_run(c, [&](float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                       const float* att, const float* mask) {
                // kernel 1's launches: a thread per (b, h, i) query row, then per (b, h, j) key column,
                // then per mask entry, in blocks of 128
                const unsigned blocks = ceil_div((size_t)s.B * s.NH * s.T, 128);
                launch_kernel<attention_backward_rows_exercise>(blocks, 128, 0, dqkv, dscores, dout, qkv, att, s);
                launch_kernel<attention_backward_columns_exercise>(blocks, 128, 0, dqkv, dscores, dout, qkv, att, s);
                if (s.mask_heads)
                    launch_kernel<attention_backward_mask_exercise>(ceil_div((size_t)s.mask_heads * s.T * s.T, 128),
                                                                    128, 0, dmask, dscores, mask, s);
            });
        });
        if (!ok)
            course_failed("rows: dA_ij = dy_i . v_j into dS's row, then dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik), then "
                          "dq_i; columns: dk_j and dv_j summed over the queries i; mask entries: every b (and every h "
                          "of a shared mask) in a fixed order, times sigmoid_of_minus(M)");
    }
    return course_passed("dS, dq, dk, dv and dM match the CPU's on every shape, with the same bits in every thread order");
}
