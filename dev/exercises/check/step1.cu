// dev/exercises/check/step1.cu: the kernel course's step 1 (make exercise STEP=1): the file EXERCISE's
// mask_term_exercise against the CPU's mask_term_cpu (attention.cuh) on masks of 1, 3 and 2 heads
// (T 16, 65, 256), a fifth of their entries far out (±20 to ±100), launched as the project launches
// mask_term_kernel1. check.h says what is checked and how.
#include "dev/exercises/check/check.h"
#include EXERCISE  // mask_term_exercise

COURSE_SAME_SIGNATURE(mask_term_exercise, mask_term_kernel1);

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "MASK_HEADS,T");
    std::vector<std::pair<int, int>> shapes = {{1, 16}, {3, 65}, {2, 256}};  // (mask heads, T)
    if (opt.shape && (sscanf(opt.shape, "%d,%d", &shapes[0].first, &shapes[0].second) != 2 || shapes[0].first < 1 ||
                      shapes[0].second < 1)) {
        fprintf(stderr, "usage: %s [--shape MASK_HEADS,T]\n", argv[0]);
        return 2;
    }
    if (opt.shape) shapes.resize(1);
    course_begin("step 1, the mask term log σ(M)", EXERCISE, "mask_term_cpu, attention.cuh");
    for (const auto& [heads, T] : shapes) {
        const int count = heads * T * T;
        Rng rng(1);
        std::vector<float> mask = dev_random(count, rng, 4);
        for (int m = 0; m < count; m += 5) mask[m] = (m % 2 ? 1 : -1) * rng.uniform(20, 100);  // held open, shut
        std::vector<float> expected(count);
        mask_term_cpu(expected.data(), mask.data(), count);
        const std::vector<Output> outputs = {{"log σ(M)", expected, nan_filled(count), "hij", {heads, T, T}}};
        const std::string label = "a mask of " + std::to_string(heads) + " head(s), T " + std::to_string(T);
        const bool ok = check_case(label, outputs, [&] {
            DevBuffer g_mask(mask), g_term(nan_filled(count));
            launch_kernel<mask_term_exercise>(ceil_div(count, 128), 128, 0, g_term.ptr, g_mask.ptr, count);
            return Outputs{g_term.get()};
        });
        if (!ok)
            course_failed("thread m = blockIdx.x * blockDim.x + threadIdx.x writes entry m if m < count; log σ(x) = "
                          "min(x, 0) - log1p(exp(-|x|)) (float: fminf, log1pf, expf, fabsf)");
    }
    return course_passed("log σ(M) matches the CPU's at every entry, the far ones included, in every thread order");
}
