// Drop-path (recipe/drop_path.cuh, --drop-path): the factors' law (each 0 or 1/(1-p), mean 1, the
// drop rate p_l a linspace over depth, a pure function of the draw's indices), the layer's
// gradient by finite differences in double, the model's gradient with drop-path on at a fixed
// step, evaluation without drops, rate 0 as before; on the GPU (the emulation, or make gpu-check)
// the layer against the CPU, a training step against the CPU, and a graphed step against call by
// call. The CPU cases use test_model.cu's helpers, so they run in tests/unit_tests alone; the GPU
// cases use test_gpu.cu's and test_gpu_graph.cu's, and run in tests/emulated_tests too.
#include "test_util.h"
#include "recipe/drop_path.cuh"
#include "run/step.cuh"  // training_step

#ifndef MASKPRIOR_EMULATED_TESTS  // the CPU cases: tests/unit_tests alone
// One training step's forward pass (with its drop-path draws at `step`) and its loss, on the
// model's B rows: what training_step runs before the backward pass
static float drop_path_training_loss(Model& model, ModelInput input, const float* targets, int64_t step) {
    StepScalars scalars;
    scalars.step = step;
    model_set_batch(model, input, targets, model.B, nullptr, scalars);
    model_forward_state(model, model.B, true, false, true);
    model_forward_pass(model, model.B, true);
    return model_read_loss(model);
}

TEST_CASE("drop-path factors: 0 or 1/(1-p_l), mean 1, drop rate p_l = R·l/(L-1), from (seed, step, layer, branch, "
          "row) alone") {
    const int L = 4;
    const float R = 0.3f;
    CHECK(drop_path_rate_of(R, 0, L) == 0.0f);
    CHECK(drop_path_rate_of(R, 3, L) == R);
    CHECK(drop_path_rate_of(R, 1, L) == doctest::Approx(0.1));
    CHECK(drop_path_rate_of(R, 0, 1) == 0.0f);  // one layer alone: no drop
    const int draws = 40000;
    for (int l = 0; l < L; l++)
        for (int branch = 0; branch < 2; branch++) {
            CAPTURE(l);
            CAPTURE(branch);
            const double p = drop_path_rate_of(R, l, L);
            double sum = 0;
            int dropped = 0;
            for (int i = 0; i < draws; i++) {
                const float f = drop_path_factor(7, i / 64, l, branch, i % 64, R, L);
                REQUIRE((f == 0.0f || f == 1.0f / (1.0f - (float)p)));
                dropped += f == 0.0f;
                sum += f;
            }
            const double sigma = std::sqrt(p * (1 - p) / draws);  // of the dropped fraction
            CHECK(std::fabs((double)dropped / draws - p) <= 5 * sigma + 1e-12);
            CHECK(std::fabs(sum / draws - 1) <= 5 * sigma / (1 - p) + 1e-12);  // the mean factor: 1
        }
    // each index changes the draws; the same indices give the same factor
    auto pattern = [&](uint64_t seed, int64_t step, int l, int branch) {
        std::vector<float> f;
        for (int row = 0; row < 64; row++) f.push_back(drop_path_factor(seed, step, l, branch, row, R, L));
        return f;
    };
    const std::vector<float> base = pattern(7, 5, 3, 0);
    CHECK(base == pattern(7, 5, 3, 0));
    CHECK(base != pattern(8, 5, 3, 0));
    CHECK(base != pattern(7, 6, 3, 0));
    CHECK(base != pattern(7, 5, 2, 0));
    CHECK(base != pattern(7, 5, 3, 1));
}

TEST_CASE("drop-path layer: out = f[b]·branch, and its gradient f[b]·dout matches finite differences in double") {
    Rng rng(31);
    const int B = 3;
    const size_t per_example = 5;
    const std::vector<double> factor = {0.0, 1.25, 1.0};
    std::vector<double> branch = random_vector<double>(B * per_example, rng);
    const std::vector<double> w = random_vector<double>(B * per_example, rng);
    std::vector<double> out(B * per_example), dbranch(B * per_example, 7.0);  // written, not accumulated
    auto loss = [&] {  // sum of w · out
        drop_path_scale_cpu(out.data(), branch.data(), factor.data(), B, per_example);
        double s = 0;
        for (size_t i = 0; i < out.size(); i++) s += w[i] * out[i];
        return s;
    };
    loss();
    for (int b = 0; b < B; b++) CHECK(out[b * per_example + 2] == factor[b] * branch[b * per_example + 2]);
    drop_path_scale_cpu(dbranch.data(), w.data(), factor.data(), B, per_example);  // the backward: f · dout
    const double h = 1e-6;
    for (size_t i = 0; i < branch.size(); i++) {
        const double keep = branch[i];
        branch[i] = keep + h;
        const double up = loss();
        branch[i] = keep - h;
        const double down = loss();
        branch[i] = keep;
        CHECK(std::fabs((up - down) / (2 * h) - dbranch[i]) <= 1e-8);
    }
}

TEST_CASE("whole-model gradient with drop-path on (the factors of a fixed step) matches finite differences; "
          "evaluation drops nothing") {
    Config c = tiny_config(1, false);
    c.L = 3;
    const int B = 4;
    const int64_t step = 3;
    const float R = 0.6f;
    Model model;
    ModelOwner owner{model};
    model_build(model, c, DEVICE_CPU, B);
    drop_path_build(model.drop_path, DEVICE_CPU, c, B, R, 5);
    init_model(model, 11, 2.0f);
    Rng rng(12);
    std::vector<int> tokens;
    std::vector<float> y;
    random_batch(c, B, rng, tokens, y);
    // the draws of this step drop some branches and keep others
    int dropped = 0, kept = 0;
    for (int l = 0; l < c.L; l++)
        for (int k = 0; k < 2; k++)
            for (int b = 0; b < B; b++) (drop_path_factor(5, step, l, k, b, R, c.L) == 0 ? dropped : kept)++;
    REQUIRE(dropped >= 3);
    REQUIRE(kept >= 3);
    const float no_drop = model_forward(model, tokens.data(), y.data(), B);  // evaluation: no draws
    CHECK(!model.drop_path.applied);
    const float with_drop = drop_path_training_loss(model, tokens.data(), y.data(), step);
    CHECK(model.drop_path.applied);
    CHECK(with_drop != no_drop);
    model_zero_grad(model);
    model_backward(model, B);
    const std::vector<float> grads = model_download(model, model.grads_mem);
    const float h = 1e-2f;
    int checked = 0;
    for (size_t i = 0; i < model.num_params; i += 3) {
        const float keep = model.params_mem[i];
        model.params_mem[i] = keep + h;
        const double up = drop_path_training_loss(model, tokens.data(), y.data(), step);
        model.params_mem[i] = keep - h;
        const double down = drop_path_training_loss(model, tokens.data(), y.data(), step);
        model.params_mem[i] = keep;
        const double numeric = (up - down) / (2 * h);
        REQUIRE(std::isfinite(grads[i]));
        CHECK_MESSAGE(std::fabs(numeric - grads[i]) <= 2e-3 + 2e-2 * std::fabs(numeric),
                      "parameter " << i << ": analytic " << grads[i] << " numeric " << numeric);
        checked++;
    }
    CHECK(checked > 100);
    // the same forward pass without training: the loss of no drop, bit for bit
    CHECK(model_forward(model, tokens.data(), y.data(), B) == no_drop);
}

TEST_CASE("drop-path rate 0 trains the bits of a model without it; a rate above 0 changes them") {
    const Config c = tiny_config(1, false);
    const int B = 4;
    Rng rng(13);
    std::vector<int> tokens;
    std::vector<float> y;
    random_batch(c, B, rng, tokens, y);
    auto trained = [&](bool build, float rate) {
        Model model;
        ModelOwner owner{model};
        model_build(model, c, DEVICE_CPU, B);
        if (build) drop_path_build(model.drop_path, DEVICE_CPU, c, B, rate, 1);
        init_model(model, 11, 2.0f);
        for (int step = 0; step < 3; step++)
            training_step(model, tokens.data(), y.data(), nullptr, 1e-2f, 0.0f, step);
        return model_download(model, model.params_mem);
    };
    const std::vector<float> before = trained(false, 0);
    CHECK(trained(true, 0.0f) == before);
    CHECK(trained(true, 0.5f) != before);
}

TEST_CASE("--drop-path and --ema: checked, and recorded in the checkpoint, whose run refuses other values") {
    expect_error("--task maj3 --drop-path 1", "--drop-path must be below 1, got 1");
    expect_error("--task maj3 --ema 1.5", "--ema must be below 1, got 1.5");
    expect_error("--task maj3 --ema -0.1", "--ema must be at least 0");
    expect_error("--task maj3 --drop-path x", "--drop-path expects a number, got 'x'");
    const std::string dir = TMP_PREFIX + "drop_path_meta";
    const std::string run = TINY + "--task maj3 --layers 2 --steps 3 --eval-every 100 --out " + dir + " ";
    REQUIRE(run_command(run + "--drop-path 0.2").exit_code == 0);
    StFile saved = safetensors_read(dir + "/model.safetensors");
    CHECK(saved.metadata["drop_path"] == "0.2");
    CHECK(saved.metadata.count("ema") == 0);  // off: not written
    expect_error("--task maj3 --layers 2 --steps 5 --resume " + dir + "/model.safetensors", "drop_path=0.2; this run "
                 "asks for drop_path=0");
    expect_error("--task maj3 --layers 2 --steps 5 --drop-path 0.1 --resume " + dir + "/model.safetensors",
                 "asks for drop_path=0.1");
    // a run without the flags writes no key for them, and a run with one refuses its checkpoint
    REQUIRE(run_command(run).exit_code == 0);
    saved = safetensors_read(dir + "/model.safetensors");
    CHECK(saved.metadata.count("drop_path") == 0);
    expect_error("--task maj3 --layers 2 --steps 5 --drop-path 0.1 --resume " + dir + "/model.safetensors",
                 "drop_path=0; this run asks for drop_path=0.1");
}
#endif

// ----------------------------------------------------------------------------
// the GPU

TEST_CASE("GPU drop-path: the factors and the scaling give the CPU's bits" * doctest::skip(NO_GPU)) {
    Config c;
    c.L = 5;
    c.T = 3;
    c.C = 7;
    const int B = 37;
    DropPath cpu, gpu;
    drop_path_build(cpu, DEVICE_CPU, c, B, 0.4f, 9);
    drop_path_build(gpu, DEVICE_GPU, c, B, 0.4f, 9);
    drop_path_set(cpu, true);
    drop_path_set(gpu, true);
    const int64_t step = 123456789012LL;
    int64_t* step_on_gpu = nullptr;
    cudaCheck(cudaMalloc(&step_on_gpu, sizeof step));
    device_copy(step_on_gpu, &step, sizeof step, cudaMemcpyHostToDevice);
    drop_path_draw(DEVICE_CPU, cpu, &step, c.L, B);
    drop_path_draw(DEVICE_GPU, gpu, step_on_gpu, c.L, B);
    const size_t n = (size_t)c.L * 2 * B;
    std::vector<float> from_gpu(n);
    buffer_copy(from_gpu.data(), DEVICE_CPU, gpu.factors, DEVICE_GPU, n);
    CHECK(memcmp(from_gpu.data(), cpu.factors, n * sizeof(float)) == 0);
    Rng rng(3);
    const size_t per_example = (size_t)c.T * c.C;
    const std::vector<float> branch = random_vector<float>(B * per_example, rng);
    std::vector<float> out(branch);
    drop_path_forward(DEVICE_CPU, cpu, 0, 1, out.data(), B, per_example);  // layer 0's MLP branch, in place
    GpuBuffer on_gpu(branch);
    drop_path_forward(DEVICE_GPU, gpu, 0, 1, on_gpu.ptr, B, per_example);
    expect_close("drop_path_forward", on_gpu.get(), out, ELEMENTWISE);
    const float* dbranch_cpu = drop_path_backward(DEVICE_CPU, cpu, 0, 0, branch.data(), B, per_example);
    GpuBuffer dout(branch);
    const float* dbranch_gpu = drop_path_backward(DEVICE_GPU, gpu, 0, 0, dout.ptr, B, per_example);
    std::vector<float> from_gpu_grad(branch.size());
    buffer_copy(from_gpu_grad.data(), DEVICE_CPU, dbranch_gpu, DEVICE_GPU, branch.size());
    expect_close("drop_path_backward", from_gpu_grad,
                 std::vector<float>(dbranch_cpu, dbranch_cpu + branch.size()), ELEMENTWISE);
    cudaCheck(cudaFree(step_on_gpu));
    drop_path_free(DEVICE_CPU, cpu);
    drop_path_free(DEVICE_GPU, gpu);
}

// An image classifier with three blocks, its weights and four batches
struct DropPathRun {
    Config c;
    int B = 8;
    std::vector<float> init;
    std::vector<std::vector<float>> pixels, targets;
    DropPathRun() {
        c.V = 0; c.C = 16; c.L = 3; c.NH = 2; c.HS = 8; c.MLP = 32; c.OUT = 5; c.readout = READOUT_CLASS;
        c.channels = 1; c.height = 8; c.width = 8; c.patch = 4; c.T = 1 + 4; c.mask_heads = 1;
        Rng rng(71);
        init.resize(param_count(c));
        init_default(c, init.data(), rng);
        for (int k = 0; k < 4; k++) {
            pixels.push_back(random_vector<float>((size_t)B * c.image_size(), rng));
            targets.push_back(std::vector<float>(B));
            for (float& y : targets.back()) y = (float)rng.below(c.OUT);
        }
    }
    // four training steps (10 to 13) at the default learning rate, with drop-path at 0.5 and the
    // moving average at 0.8
    Trained train(Device dev, const Kernels& kernels, std::vector<float>* ema = nullptr) const {
        Model model;
        ModelOwner owner{model};
        model_build(model, c, dev, B);
        model.kernels = kernels;
        model_upload(model, model.params_mem, init);
        drop_path_build(model.drop_path, dev, c, B, 0.5f, 4);
        weight_average_start(model.ema, dev, model.params_mem, model.num_params, 0.8f);
        for (int k = 0; k < 4; k++)
            training_step(model, pixels[k].data(), targets[k].data(), nullptr, AdamWSettings().lr, 1.0f, 10 + k);
        if (ema) *ema = model_download(model, model.ema.weights);
        return {model_download(model, model.params_mem), model_download(model, model.m_mem),
                model_download(model, model.v_mem), model_read_step_log(model)};
    }
};

// (the key biases, and so their average, within Adam's noise: test_gpu.cu)
TEST_CASE("GPU training steps with drop-path and the moving average match the CPU's" * doctest::skip(NO_GPU)) {
    const DropPathRun run;
    std::vector<float> cpu_ema, gpu_ema;
    Trained cpu = run.train(DEVICE_CPU, Kernels{}, &cpu_ema);
    for (bool fast : {false, true}) {
        CAPTURE(fast);
        Trained gpu = run.train(DEVICE_GPU, with_fast_layers(fast), &gpu_ema);
        expect_key_biases_within_adam_noise(run.c, gpu.params, cpu.params);
        expect_key_biases_within_adam_noise(run.c, gpu_ema, cpu_ema);
        expect_close("params", gpu.params, cpu.params, REDUCTION);
        expect_close("m", gpu.m, cpu.m, REDUCTION);
        expect_close("ema", gpu_ema, cpu_ema, REDUCTION);
    }
}

TEST_CASE("a graphed training step with drop-path and the moving average gives the bits of call by call" *
          doctest::skip(NO_GPU)) {
    const DropPathRun run;
    for (bool fast : {false, true}) {
        CAPTURE(fast);
        std::vector<float> direct_ema, replayed_ema;
        const Trained direct = run.train(DEVICE_GPU, with_graph(with_fast_layers(fast), false), &direct_ema);
        const Trained replayed = run.train(DEVICE_GPU, with_graph(with_fast_layers(fast), true), &replayed_ema);
        expect_same_bits(direct, replayed);
        CHECK(memcmp(direct_ema.data(), replayed_ema.data(), direct_ema.size() * sizeof(float)) == 0);
    }
}
