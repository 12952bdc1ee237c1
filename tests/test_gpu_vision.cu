// The image path's kernels against the CPU loops (patchify, assemble, mean pooling), and three
// training steps of an image model on both devices (mean pooling, label smoothing, gradient
// clipping). Uses test_gpu.cu's helpers (one translation unit); runs on a GPU and on the CUDA
// emulation.
#include "layers/patch_embedding.cuh"

// the shapes: B, channels, H, W, P, C; an awkward one, Fashion-MNIST's and CIFAR's
struct ImageShapeCase {
    int B, channels, H, W, P, C;
};
static const ImageShapeCase IMAGE_SHAPES[] = {{3, 2, 6, 9, 3, 5}, {4, 1, 28, 28, 4, 16}, {2, 3, 32, 32, 4, 24}};

TEST_CASE("GPU patchify, assemble and mean pooling match the CPU" * doctest::skip(NO_GPU)) {
    for (const ImageShapeCase& s : IMAGE_SHAPES) {
        const int NP = (s.H / s.P) * (s.W / s.P), T = NP + 1, K = s.channels * s.P * s.P;
        Rng rng(31);
        const auto pixels = random_vector<float>((size_t)s.B * s.channels * s.H * s.W, rng);
        const auto embedded = random_vector<float>((size_t)s.B * NP * s.C, rng);
        const auto cls = random_vector<float>(s.C, rng), wpe = random_vector<float>((size_t)T * s.C, rng);
        const auto dout = random_vector<float>((size_t)s.B * T * s.C, rng);
        const auto dpooled = random_vector<float>((size_t)s.B * s.C, rng);
        // CPU
        std::vector<float> patches((size_t)s.B * NP * K), out((size_t)s.B * T * s.C), pooled((size_t)s.B * s.C);
        std::vector<float> dembedded((size_t)s.B * NP * s.C, 0.5f), dcls(s.C, 0.5f), dwpe((size_t)T * s.C, 0.5f);
        std::vector<float> dx((size_t)s.B * T * s.C, 0.5f);  // 0.5: the backward must accumulate
        patchify_forward_cpu(patches.data(), pixels.data(), s.B, s.channels, s.H, s.W, s.P);
        assemble_forward_cpu(out.data(), embedded.data(), cls.data(), wpe.data(), s.B, T, s.C);
        assemble_backward_cpu(dembedded.data(), dcls.data(), dwpe.data(), dout.data(), s.B, T, s.C);
        mean_pool_forward_cpu(pooled.data(), out.data(), s.B, T, s.C);
        mean_pool_backward_cpu(dx.data(), dpooled.data(), s.B, T, s.C);
        // GPU
        auto filled = [](size_t n, float v) { return std::vector<float>(n, v); };
        GpuBuffer g_pixels(pixels), g_patches(filled(patches.size(), 0)), g_embedded(embedded), g_cls(cls), g_wpe(wpe);
        GpuBuffer g_out(filled(out.size(), 0)), g_pooled(filled(pooled.size(), 0)), g_dout(dout), g_dpooled(dpooled);
        GpuBuffer g_dx(filled(dx.size(), 0.5f));
        patchify_forward(DEVICE_GPU, g_patches.ptr, g_pixels.ptr, s.B, s.channels, s.H, s.W, s.P);
        assemble_forward(DEVICE_GPU, g_out.ptr, g_embedded.ptr, g_cls.ptr, g_wpe.ptr, s.B, T, s.C);
        for (bool fast : {false, true}) {  // kernel 1, then kernel 2 (column sums)
            CAPTURE(fast);
            Kernels kernels;
            kernels.fast_layers = fast;
            GpuBuffer g_dembedded(filled(dembedded.size(), 0.5f)), g_dcls(filled(s.C, 0.5f));
            GpuBuffer g_dwpe(filled(dwpe.size(), 0.5f));
            assemble_backward(DEVICE_GPU, kernels, g_dembedded.ptr, g_dcls.ptr, g_dwpe.ptr, g_dout.ptr, s.B, T, s.C);
            expect_close("dembedded", g_dembedded.get(), dembedded, ELEMENTWISE);
            expect_close("dcls", g_dcls.get(), dcls, REDUCTION);
            expect_close("dwpe", g_dwpe.get(), dwpe, REDUCTION);
        }
        mean_pool_forward(DEVICE_GPU, g_pooled.ptr, g_out.ptr, s.B, T, s.C);
        mean_pool_backward(DEVICE_GPU, g_dx.ptr, g_dpooled.ptr, s.B, T, s.C);
        expect_close("patches", g_patches.get(), patches, 0);  // a copy: exact
        expect_close("assembled", g_out.get(), out, ELEMENTWISE);
        expect_close("pooled", g_pooled.get(), pooled, REDUCTION);
        expect_close("dx", g_dx.get(), dx, ELEMENTWISE);
    }
}

// Three AdamW steps of a small ViT (3x8x8 images, patch 2, mean pooling, per-head mask) with
// label smoothing and clipping, on random pixels: the two devices agree, and the GPU twice gives
// the same bits.
TEST_CASE("a training step of an image model (mean pooling, smoothing, clipping): GPU matches the CPU" *
          doctest::skip(NO_GPU)) {
    Config c;
    c.V = 0; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.OUT = 10; c.readout = READOUT_CLASS;
    c.channels = 3; c.height = 8; c.width = 8; c.patch = 2; c.T = 1 + 16; c.pool = POOL_MEAN; c.mask_heads = 3;
    const int B = 16;
    Rng rng(41);
    std::vector<float> init(param_count(c));
    init_default(c, init.data(), rng);
    const auto pixels = random_vector<float>((size_t)B * c.image_size(), rng);
    std::vector<float> y(B), cpu, gpu, gpu_again;
    for (auto& v : y) v = (float)rng.below(c.OUT);
    const float cpu_loss = three_steps(c, DEVICE_CPU, Kernels{}, init, pixels.data(), B, y, cpu, nullptr, 0.1f, 0.5f);
    const float gpu_loss = three_steps(c, DEVICE_GPU, Kernels{}, init, pixels.data(), B, y, gpu, nullptr, 0.1f, 0.5f);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-4));
    three_steps(c, DEVICE_GPU, Kernels{}, init, pixels.data(), B, y, gpu_again, nullptr, 0.1f, 0.5f);
    CHECK(memcmp(gpu.data(), gpu_again.data(), gpu.size() * sizeof(float)) == 0);
    expect_key_biases_within_adam_noise(c, gpu, cpu);
    expect_close("parameters after 3 steps", gpu, cpu, REDUCTION);
}
