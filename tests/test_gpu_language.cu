// The language model on the GPU: three training steps of an LM with a vocabulary in the
// thousands and the ALiBi-shaped mask, GPU against CPU; a frozen mask that stays put on the GPU;
// and (MASKPRIOR_LARGE_TESTS=1, ~18 GB of GPU memory, make test-large) the logits' kernels past
// 2^31 elements. Uses test_gpu.cu's helpers (one translation unit). Skipped without a GPU.
#include <cstdlib>
#include "text_fixture.h"
#include "run/step.cuh"       // model_update, model_clip_gradients
#include "tasks/language.h"  // LanguageTask

static const bool LARGE_TESTS = getenv("MASKPRIOR_LARGE_TESTS") && std::string(getenv("MASKPRIOR_LARGE_TESTS")) == "1";

// Three steps of a language model on both devices from the same weights (default GPT-2 init, the
// ALiBi-shaped mask at c = 1.5); with freeze, the mask must come out of every step unchanged.
static void expect_lm_devices_agree(bool freeze, const Kernels& kernels) {
    const std::string dir = write_walk_folder(TMP_PREFIX + "gpu_lm", 1200, 4000, 400);
    LanguageSettings s;
    s.seq_len = 16;
    LanguageTask task(dir, s);
    Config c;
    c.V = c.OUT = task.vocab; c.T = task.seq_len; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40;
    c.mask_heads = c.NH;
    c.readout = READOUT_NEXT_TOKEN;
    c.causal = true;
    const int B = 8;
    std::vector<float> init(param_count(c)), y, out[2];
    std::vector<int> tokens;
    Rng rng(13);
    init_default(c, init.data(), rng, WEIGHTS_GPT2);
    init_mask_alibi(c, init.data(), 1.5f);
    task_batch(task, B, tokens, y);
    float loss[2];
    for (Device dev : {DEVICE_CPU, DEVICE_GPU}) {
        Model model;
        model_build(model, c, dev, B);
        model.kernels = kernels;
        model.freeze_mask = freeze;
        buffer_copy(model.params_mem, dev, init.data(), DEVICE_CPU, model.num_params);
        for (int step = 0; step < 3; step++) {
            loss[dev] = model_forward(model, tokens.data(), y.data(), B);
            model_zero_grad(model);
            model_backward(model, B);
            model_clip_gradients(model, 1.0f);
            model_update(model);
        }
        out[dev].resize(model.num_params);
        buffer_copy(out[dev].data(), DEVICE_CPU, model.params_mem, dev, model.num_params);
        model_free(model);
    }
    CHECK(loss[DEVICE_GPU] == doctest::Approx(loss[DEVICE_CPU]).epsilon(1e-4));
    expect_key_biases_within_adam_noise(c, out[DEVICE_GPU], out[DEVICE_CPU]);
    expect_close("LM parameters after 3 steps", out[DEVICE_GPU], out[DEVICE_CPU], REDUCTION);
    if (!freeze) return;
    for (const TensorInfo& t : param_layout(c))
        if (t.field == &ParamTensors::mask)
            for (size_t i = t.offset; i < t.offset + t.numel * t.slices; i++) CHECK(out[DEVICE_GPU][i] == init[i]);
}

TEST_CASE("a training step of a language model (V 1200, ALiBi-shaped mask): GPU matches the CPU, every kernel version" *
          doctest::skip(NO_GPU)) {
    for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
        CAPTURE(version);
        expect_lm_devices_agree(false, attention_version(version));
    }
}

TEST_CASE("a frozen mask stays what it was on the GPU, and the rest trains as on the CPU" * doctest::skip(NO_GPU)) {
    expect_lm_devices_agree(true, Kernels{});
}

// The logits of a language model are B·T·V floats, which pass 2^31 at, e.g., B 64, T 1024, V 32768:
// the bias add and both cross-entropy kernels index them in 64 bits. Rows N with N·V > 2^31 of
// zero logits except the last rows, set by hand past the 2^31-th float, checked against the CPU.
TEST_CASE("the logits' kernels index past 2^31 floats (MASKPRIOR_LARGE_TESTS=1)" *
          doctest::skip(NO_GPU || !LARGE_TESTS)) {
    const int V = 32768, N = 65600, tail = 4;  // N·V = 2,149,580,800 > 2^31 = 2,147,483,648
    const size_t total = (size_t)N * V, tail_at = (size_t)(N - tail) * V;
    REQUIRE(tail_at > (size_t)1 << 31);
    Rng rng(21);
    const std::vector<float> tail_logits = random_vector<float>((size_t)tail * V, rng, 5.0f);
    const std::vector<float> bias = random_vector<float>(V, rng);
    std::vector<float> targets(N, 0.0f);
    for (int r = 0; r < tail; r++) targets[N - tail + r] = (float)rng.below(V);
    float* logits = buffer_alloc(DEVICE_GPU, total);
    float* probs = buffer_alloc(DEVICE_GPU, total);
    buffer_zero(DEVICE_GPU, logits, total);
    GpuBuffer g_bias(bias), g_targets(targets), g_losses(std::vector<float>(N, 0.0f));
    GpuBuffer g_count(std::vector<float>{(float)N});  // the loss's denominator, on the device
    // logits += bias over all N rows (the matmul's bias kernel), then the tail rows get their values
    launch_kernel<add_bias_kernel1>(ceil_div(total, BLOCK), BLOCK, 0, logits, (const float*)g_bias.ptr, N, V);
    std::vector<float> tail_in((size_t)tail * V);
    buffer_copy(tail_in.data(), DEVICE_CPU, logits + tail_at, DEVICE_GPU, tail_in.size());
    for (int v = 0; v < V; v++) CHECK(tail_in[(size_t)(tail - 1) * V + v] == bias[v]);
    buffer_copy(logits + tail_at, DEVICE_GPU, tail_logits.data(), DEVICE_CPU, tail_logits.size());
    crossentropy_forward(DEVICE_GPU, Kernels{}, g_losses.ptr, probs, logits, g_targets.ptr, nullptr, N, V);
    buffer_zero(DEVICE_GPU, logits, total);  // now the gradient's buffer
    crossentropy_backward(DEVICE_GPU, logits, probs, g_targets.ptr, nullptr, g_count.ptr, N, V);
    // the CPU on the tail rows alone
    std::vector<float> losses(tail), cpu_probs((size_t)tail * V), dlogits((size_t)tail * V, 0.0f);
    crossentropy_forward_cpu(losses.data(), cpu_probs.data(), tail_logits.data(), &targets[N - tail], nullptr, tail, V);
    crossentropy_backward_cpu(dlogits.data(), cpu_probs.data(), &targets[N - tail], nullptr, (float)N, tail, V);
    std::vector<float> gpu_losses = g_losses.get(), gpu_probs((size_t)tail * V), gpu_dlogits((size_t)tail * V);
    buffer_copy(gpu_probs.data(), DEVICE_CPU, probs + tail_at, DEVICE_GPU, gpu_probs.size());
    buffer_copy(gpu_dlogits.data(), DEVICE_CPU, logits + tail_at, DEVICE_GPU, gpu_dlogits.size());
    expect_close("losses of the rows past 2^31", std::vector<float>(gpu_losses.end() - tail, gpu_losses.end()), losses,
                 ELEMENTWISE);
    expect_close("probabilities past 2^31", gpu_probs, cpu_probs, ELEMENTWISE);
    expect_close("dlogits past 2^31", gpu_dlogits, dlogits, ELEMENTWISE);
    buffer_free(DEVICE_GPU, logits);
    buffer_free(DEVICE_GPU, probs);
}
