// dev/exercises/check/step9.cu: the kernel course's step 9, before it trains (make exercise STEP=9,
// check/exercise.sh): the file EXERCISE's two launchers against the CPU's attention_forward_cpu and
// attention_backward_cpu (attention.cuh) on the kernel lab's --quick shapes (or --shape): A and y;
// dS, dq, dk, dv and dM. check.h says what is checked and how.
#include "dev/exercises/check/attention.h"  // forward_outputs, forward_run, backward_outputs, backward_run
#include "dev/exercises/check/train.h"      // the launchers' declarations
#include EXERCISE  // attention_forward_exercise_gpu, attention_backward_exercise_gpu

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    course_begin("step 9 (before it trains), the launchers of your forward and backward", EXERCISE,
                 "attention_forward_cpu, attention_backward_cpu, attention.cuh");
    for (const DevShape& shape : course_attention_shapes(opt, argv[0])) {
        const AttentionShape s = shape.s;
        const ForwardCase f(s);
        const BackwardCase c(s);
        std::vector<Output> outputs = forward_outputs(f);
        for (const Output& o : backward_outputs(c)) outputs.push_back(o);
        const bool ok = check_case(attention_label(shape), outputs, [&] {
            Outputs got = forward_run(f, [&](float* out, float* att, const float* qkv, const float* mask_term) {
                attention_forward_exercise_gpu(out, att, qkv, mask_term, s);
            });
            for (std::vector<float>& g : backward_run(c, [&](float* dqkv, float* dmask, float* dscores,
                                                             const float* dout, const float* qkv, const float* att,
                                                             const float* mask) {
                     attention_backward_exercise_gpu(dqkv, dmask, dscores, dout, qkv, att, mask, s);
                 }))
                got.push_back(std::move(g));
            return got;
        });
        if (!ok)
            course_failed("forward: launch_kernel<attention_forward_exercise>(ceil_div((size_t)s.B * s.NH * s.T, 128), "
                          "128, 0, out, att, qkv, mask_term, s); backward: the rows, the columns, and if s.mask_heads "
                          "the mask entries (step 4's launches); if your steps 3 and 4 pass, check the file includes them");
    }
    return course_passed("your launchers' A, y, dS, dq, dk, dv and dM match the CPU's on every shape; now the training");
}
