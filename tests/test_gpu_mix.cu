// Mixed batches (mixup, cutmix: recipe/mix.h) on the GPU: the soft-target cross-entropy's kernels
// against the CPU loops, and training steps of an image model on mixed and unmixed batches: the
// GPU's against the CPU's, and a replayed graph's against the same steps call by call. Uses
// test_gpu.cu's and test_gpu_graph.cu's helpers (one translation unit); runs on a GPU and on the
// CUDA emulation.
#include "recipe/mix.h"

TEST_CASE("GPU soft-target cross-entropy (mixed rows) matches the CPU, under both kernel versions" *
          doctest::skip(NO_GPU)) {
    for (int N : {1, 7, 256})
        for (float smoothing : {0.0f, 0.1f})
            for (bool fast : {false, true}) {
                CAPTURE(N); CAPTURE(smoothing); CAPTURE(fast);
                const int V = 11;
                Rng rng(91);
                auto logits = random_vector<float>((size_t)N * V, rng, 4), weights = random_vector<float>(N, rng);
                std::vector<float> classes(N), mix(2 * N);
                for (int n = 0; n < N; n++) {
                    classes[n] = (float)rng.below(V);
                    mix[2 * n] = (float)rng.below(V);
                    mix[2 * n + 1] = rng.uniform(0, 1);
                    weights[n] = weights[n] > 0;
                }
                Kernels kernels;
                kernels.fast_layers = fast;
                std::vector<float> losses(N), probs((size_t)N * V), dlogits = random_vector<float>((size_t)N * V, rng);
                GpuBuffer g_logits(logits), g_classes(classes), g_weights(weights), g_losses(losses), g_probs(probs);
                GpuBuffer g_dlogits(dlogits), g_count(std::vector<float>{3.0f}), g_mix(mix);
                crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), classes.data(), weights.data(), N,
                                         V, smoothing, mix.data());
                crossentropy_forward(DEVICE_GPU, kernels, g_losses.ptr, g_probs.ptr, g_logits.ptr, g_classes.ptr,
                                     g_weights.ptr, N, V, smoothing, g_mix.ptr);
                expect_close("mixed cross-entropy losses", g_losses.get(), losses, REDUCTION);
                expect_close("mixed cross-entropy probs", g_probs.get(), probs, REDUCTION);
                crossentropy_backward_cpu(dlogits.data(), probs.data(), classes.data(), weights.data(), 3.0f, N, V,
                                          smoothing, mix.data());
                crossentropy_backward(DEVICE_GPU, g_dlogits.ptr, g_probs.ptr, g_classes.ptr, g_weights.ptr, g_count.ptr,
                                      N, V, smoothing, g_mix.ptr);
                expect_close("mixed cross-entropy dlogits", g_dlogits.get(), dlogits, REDUCTION);
            }
}

// Four training steps (10 to 13) of an image model from the weights init on `dev`, step k on batch
// k with mix[k] (empty: unmixed), label smoothing 0.1 and clipping; what they leave.
static Trained four_mixed_steps(const Config& c, Device dev, const Kernels& kernels, const std::vector<float>& init,
                                int B, const std::vector<std::vector<float>>& pixels,
                                const std::vector<std::vector<float>>& targets,
                                const std::vector<std::vector<float>>& mix) {
    Model model;
    model_build(model, c, dev, B);
    model.kernels = kernels;
    model.label_smoothing = 0.1f;
    buffer_copy(model.params_mem, dev, init.data(), DEVICE_CPU, model.num_params);
    for (int k = 0; k < 4; k++)
        training_step(model, pixels[k].data(), targets[k].data(), nullptr, 1e-3f * (k + 1), 0.5f, 10 + k,
                      mix[k].empty() ? nullptr : mix[k].data());
    Trained t{model_download(model, model.params_mem), model_download(model, model.m_mem),
              model_download(model, model.v_mem), model_read_step_log(model)};
    CHECK(model.graphs.by_shape.size() == (kernels.graph ? 2u : 0u));  // a capture for mixed steps, one for unmixed
    model_free(model);
    return t;
}

TEST_CASE("training steps on mixed batches: the GPU matches the CPU, and a replayed graph gives the call-by-call "
          "bits" * doctest::skip(NO_GPU)) {
    Config c;
    c.V = 0; c.C = 16; c.L = 2; c.NH = 2; c.HS = 8; c.MLP = 32; c.OUT = 5; c.readout = READOUT_CLASS;
    c.channels = 2; c.height = 8; c.width = 8; c.patch = 2; c.T = 1 + 16; c.mask_heads = 2;
    const int B = 8;
    Rng rng(93);
    std::vector<float> init(param_count(c));
    init_default(c, init.data(), rng);
    MixSettings settings;
    settings.mixup_alpha = 0.8f;
    settings.cutmix_alpha = 1.0f;
    std::vector<std::vector<float>> pixels(4), targets(4, std::vector<float>(B)), mix(4);
    for (int k = 0; k < 4; k++) {
        pixels[k] = random_vector<float>((size_t)B * c.image_size(), rng);
        for (float& y : targets[k]) y = (float)rng.below(c.OUT);
        if (k == 2) continue;  // an unmixed batch between mixed ones
        MixDraw d = mix_draw(settings, 1, k, c.height, c.width);
        if (k == 0) d.cutmix = false, d.lambda = 0.3f;  // a mixup step, whatever the draw
        if (k == 1) cutmix_box(d, 0.6, c.height, c.width, 17), d.cutmix = true;  // a cutmix step
        REQUIRE(d.lambda != 1.0f);
        mix[k].resize(2 * B);
        mix_batch(d, {c.channels, c.height, c.width}, B, pixels[k].data(), targets[k].data(), mix[k].data());
    }
    const Trained cpu = four_mixed_steps(c, DEVICE_CPU, Kernels{}, init, B, pixels, targets, mix);
    const Trained gpu = four_mixed_steps(c, DEVICE_GPU, Kernels{}, init, B, pixels, targets, mix);
    CHECK(std::isfinite(cpu.log.loss));
    CHECK(gpu.log.loss == doctest::Approx(cpu.log.loss).epsilon(1e-4));
    CHECK(gpu.log.correct == cpu.log.correct);  // hits against each row's own class
    CHECK(gpu.log.seen == 4 * B);
    std::vector<float> gpu_params = gpu.params, cpu_params = cpu.params;
    expect_key_biases_within_adam_noise(c, gpu_params, cpu_params);
    expect_close("parameters after 4 mixed steps", gpu_params, cpu_params, REDUCTION);
    Kernels fast;
    fast.fast_layers = true;
    for (const Kernels& kernels : {Kernels{}, fast}) {
        CAPTURE(kernels.fast_layers);
        const Trained direct = four_mixed_steps(c, DEVICE_GPU, with_graph(kernels, false), init, B, pixels, targets,
                                                mix);
        const Trained replayed = four_mixed_steps(c, DEVICE_GPU, with_graph(kernels, true), init, B, pixels, targets,
                                                  mix);
        expect_same_bits(direct, replayed);
    }
}
