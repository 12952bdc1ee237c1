// dev/exercises/check/step2.cu: the kernel course's step 2 (make exercise STEP=2): the file EXERCISE's
// attention_row_softmax_exercise, called by a thread per row as kernel 1 calls its row functions,
// against the CPU's attention_row_softmax (attention.cuh) in double (where no e^x overflows: the
// reference stays right whatever the float version does) on the kernel lab's --quick shapes (or
// --shape): random scores, every third row's between 60 and 100 (whose e^x overflows in float), NaN
// past a causal row's last key. check.h says what is checked and how.
#include "dev/exercises/check/check.h"
#include EXERCISE  // attention_row_softmax_exercise

static_assert(std::is_same_v<std::decay_t<decltype(attention_row_softmax_exercise)>, void (*)(float*, int, int)>,
              "attention_row_softmax_exercise takes (float* att_row, int T, int last)");

// A thread per row (b, h, i) of A (B,NH,T,T), as attention_forward_kernel1 runs its row functions
__global__ void row_softmax_kernel(float* att, AttentionShape s) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= s.B * s.NH * s.T) return;
    const int i = row % s.T;
    attention_row_softmax_exercise(att + (size_t)row * s.T, s.T, s.causal ? i : s.T - 1);
}

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    course_begin("step 2, the softmax of a row", EXERCISE, "attention_row_softmax in double, attention.cuh");
    for (const DevShape& shape : course_attention_shapes(opt, argv[0])) {
        const AttentionShape s = shape.s;
        const int rows = s.B * s.NH * s.T;
        Rng rng(2);
        std::vector<float> scores((size_t)rows * s.T), expected;
        for (int r = 0; r < rows; r++) {
            const int last = s.causal ? r % s.T : s.T - 1;
            for (int j = 0; j < s.T; j++)
                scores[(size_t)r * s.T + j] = j > last ? NAN : r % 3 == 2 ? rng.uniform(60, 100) : rng.uniform(-3, 3);
        }
        std::vector<double> in_double(scores.begin(), scores.end());  // the reference in double: no e^x overflows
        for (int r = 0; r < rows; r++)
            attention_row_softmax(in_double.data() + (size_t)r * s.T, s.T, s.causal ? r % s.T : s.T - 1);
        expected.assign(in_double.begin(), in_double.end());
        const std::vector<Output> outputs = {{"A", expected, scores, "bhij", {s.B, s.NH, s.T, s.T}, true}};
        const bool ok = check_case(attention_label(shape), outputs, [&] {
            DevBuffer att(scores);
            launch_kernel<row_softmax_kernel>(ceil_div(rows, 128), 128, 0, att.ptr, s);
            return Outputs{att.get()};
        });
        if (!ok)
            course_failed("three walks along the row: the max of S_i0..S_i,last; e^(S_ij - max) in place and their "
                          "sum; then A_ij = that / sum for j <= last, and 0 for j > last");
    }
    return course_passed("every row's softmax matches the CPU's, the rows whose e^x would overflow included");
}
