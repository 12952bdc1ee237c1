// dev/exercises/check/step8.cu: the kernel course's step 8 (make exercise STEP=8): the file EXERCISE's
// three LayerNorm kernels, launched as kernel 1's are (layernorm_forward, layernorm_backward), against
// the CPU's layernorm_forward_cpu and layernorm_backward_cpu (layers/layernorm.cuh) at N x C = 7 x 3,
// 300 x 33, make run's 1024 x 32 and 64 x 256 (or --shape N,C): out, mean and rstd; dinp, dweight
// and dbias, from the CPU's mean and rstd. check.h says what is checked and how.
#include "dev/exercises/check/check.h"
#include "layers/layernorm.cuh"  // the CPU's loops, and kernel 1's signatures
#include EXERCISE  // layernorm_forward_exercise, layernorm_backward_dinp_exercise, layernorm_backward_params_exercise

COURSE_SAME_SIGNATURE(layernorm_forward_exercise, layernorm_forward_kernel1);
COURSE_SAME_SIGNATURE(layernorm_backward_dinp_exercise, layernorm_backward_dinp_kernel1);
COURSE_SAME_SIGNATURE(layernorm_backward_params_exercise, layernorm_backward_params_kernel1);

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "N,C");
    std::vector<std::pair<int, int>> shapes = {{7, 3}, {300, 33}, {1024, 32}, {64, 256}};  // (N, C)
    if (opt.shape && (sscanf(opt.shape, "%d,%d", &shapes[0].first, &shapes[0].second) != 2 || shapes[0].first < 1 ||
                      shapes[0].second < 1)) {
        fprintf(stderr, "usage: %s [--shape N,C]\n", argv[0]);
        return 2;
    }
    if (opt.shape) shapes.resize(1);
    course_begin("step 8, LayerNorm forward and backward", EXERCISE,
                 "layernorm_forward_cpu, layernorm_backward_cpu, layers/layernorm.cuh");
    for (const auto& [N, C] : shapes) {
        Rng rng(8);
        const size_t NC = (size_t)N * C;
        const std::vector<float> inp = dev_random(NC, rng, 3), dout = dev_random(NC, rng), bias = dev_random(C, rng);
        std::vector<float> weight = dev_random(C, rng);
        for (float& w : weight) w += 1.0f;  // around 1, as trained weights are
        const std::vector<float> dinp_start = dev_random(NC, rng), dweight_start = dev_random(C, rng);
        const std::vector<float> dbias_start = dev_random(C, rng);
        std::vector<float> out(NC), mean(N), rstd(N), dinp = dinp_start, dweight = dweight_start, dbias = dbias_start;
        layernorm_forward_cpu(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
        layernorm_backward_cpu(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                               mean.data(), rstd.data(), N, C);
        const std::vector<Output> outputs = {{"out", out, nan_filled(NC), "nc", {N, C}},
                                             {"mean", mean, nan_filled(N), "n", {N}},
                                             {"rstd", rstd, nan_filled(N), "n", {N}},
                                             {"dinp", dinp, dinp_start, "nc", {N, C}},
                                             {"dweight", dweight, dweight_start, "c", {C}},
                                             {"dbias", dbias, dbias_start, "c", {C}}};
        const std::string label = "N " + std::to_string(N) + " rows, C " + std::to_string(C) + " channels";
        const bool ok = check_case(label, outputs, [&] {
            DevBuffer g_inp(inp), g_weight(weight), g_bias(bias), g_dout(dout), g_out(nan_filled(NC));
            DevBuffer g_mean(nan_filled(N)), g_rstd(nan_filled(N)), g_cpu_mean(mean), g_cpu_rstd(rstd);
            DevBuffer g_dinp(dinp_start), g_dweight(dweight_start), g_dbias(dbias_start);
            launch_kernel<layernorm_forward_exercise>(ceil_div(N, BLOCK), BLOCK, 0, g_out.ptr, g_mean.ptr, g_rstd.ptr,
                                                      g_inp.ptr, g_weight.ptr, g_bias.ptr, N, C);
            launch_kernel<layernorm_backward_dinp_exercise>(ceil_div(N, BLOCK), BLOCK, 0, g_dinp.ptr, g_dout.ptr,
                                                            g_inp.ptr, g_weight.ptr, g_cpu_mean.ptr, g_cpu_rstd.ptr, N, C);
            launch_kernel<layernorm_backward_params_exercise>(ceil_div(C, 64), 64, 0, g_dweight.ptr, g_dbias.ptr,
                                                              g_dout.ptr, g_inp.ptr, g_cpu_mean.ptr, g_cpu_rstd.ptr, N,
                                                              C);
            return Outputs{g_out.get(), g_mean.get(), g_rstd.get(), g_dinp.get(), g_dweight.get(), g_dbias.get()};
        });
        if (!ok)
            course_failed("row n = blockIdx.x * blockDim.x + threadIdx.x (if n < N): mean, then the variance about it, "
                          "rstd = 1.0f / sqrtf(var + LN_EPS), then out; backward: the two means over the row, then "
                          "dx += ...; channel c (if c < C): dweight and dbias summed over the rows in order, then added");
    }
    return course_passed("out, mean, rstd, dinp, dweight and dbias match the CPU's at every shape, in every thread order");
}
