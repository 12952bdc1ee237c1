// The fused kernels (Kernels::fast_layers, --fast-kernels; layers/fused.cuh) and the warp-per-row cross-entropy
// against the CPU, bias + GELU against the separate kernels bit for bit, and training steps with
// every faster kernel on (attention kernel 3 too) against the CPU. Included after test_gpu.cu and
// test_gpu_language.cu, whose helpers it uses; make gpu-check runs it on a GPU, make test on the
// emulation.

// The kernels with the other layers' second versions on (--fast-kernels), attention version 1
static Kernels fast_layers() {
    Kernels kernels;
    kernels.fast_layers = true;
    return kernels;
}

TEST_CASE("GPU fused kernels match the CPU; bias + GELU gives the separate kernels' bits" * doctest::skip(NO_GPU)) {
    for (Shape s : SHAPES) {
        CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.C); CAPTURE(s.OC);
        const int N = s.B * s.T;
        Rng rng(21);
        auto a = random_vector<float>((size_t)N * s.C, rng), b = random_vector<float>((size_t)N * s.C, rng);
        auto w = random_vector<float>(s.C, rng), bias = random_vector<float>(s.C, rng);
        std::vector<float> residual((size_t)N * s.C), out((size_t)N * s.C), mean(N), rstd(N);
        residual_layernorm_forward(DEVICE_CPU, Kernels{}, residual.data(), out.data(), mean.data(), rstd.data(),
                                   a.data(), b.data(), w.data(), bias.data(), N, s.C);
        GpuBuffer g_a(a), g_b(b), g_w(w), g_bias(bias);
        GpuBuffer g_residual{std::vector<float>(residual.size(), NAN)}, g_out{std::vector<float>(out.size(), NAN)};
        GpuBuffer g_mean{std::vector<float>(N, NAN)}, g_rstd{std::vector<float>(N, NAN)};
        residual_layernorm_forward(DEVICE_GPU, fast_layers(), g_residual.ptr, g_out.ptr, g_mean.ptr, g_rstd.ptr,
                                   g_a.ptr, g_b.ptr, g_w.ptr, g_bias.ptr, N, s.C);
        expect_close("residual", g_residual.get(), residual, ELEMENTWISE);
        expect_close("layernorm out", g_out.get(), out, REDUCTION);
        expect_close("layernorm mean", g_mean.get(), mean, REDUCTION);
        expect_close("layernorm rstd", g_rstd.get(), rstd, REDUCTION);

        auto inp = random_vector<float>((size_t)N * s.C, rng), weight = random_vector<float>((size_t)s.OC * s.C, rng);
        auto fc_bias = random_vector<float>(s.OC, rng);
        std::vector<float> pre((size_t)N * s.OC), gelu(pre.size());
        matmul_bias_gelu_forward(DEVICE_CPU, Kernels{}, pre.data(), gelu.data(), inp.data(), weight.data(),
                                 fc_bias.data(), N, s.C, s.OC);
        GpuBuffer g_inp(inp), g_weight(weight), g_fc_bias(fc_bias);
        std::vector<float> gpu[2][2];  // [fused][pre, gelu]
        for (bool on : {false, true}) {
            GpuBuffer g_pre{std::vector<float>(pre.size(), NAN)}, g_gelu{std::vector<float>(pre.size(), NAN)};
            matmul_bias_gelu_forward(DEVICE_GPU, on ? fast_layers() : Kernels{}, g_pre.ptr, g_gelu.ptr, g_inp.ptr,
                                     g_weight.ptr, g_fc_bias.ptr, N, s.C, s.OC);
            gpu[on][0] = g_pre.get();
            gpu[on][1] = g_gelu.get();
        }
        expect_close("fc pre-activation", gpu[1][0], pre, REDUCTION);
        expect_close("fc gelu", gpu[1][1], gelu, REDUCTION);
        for (int k = 0; k < 2; k++)
            CHECK(memcmp(gpu[0][k].data(), gpu[1][k].data(), gpu[0][k].size() * sizeof(float)) == 0);
    }
}

TEST_CASE("GPU cross-entropy with a warp per row (--fast-kernels) matches the CPU" * doctest::skip(NO_GPU)) {
    for (int N : {1, 7, 130})
        for (int V : {3, 11, 1200})
            for (float smoothing : {0.0f, 0.1f}) {
                CAPTURE(N); CAPTURE(V); CAPTURE(smoothing);
                Rng rng(22);
                auto logits = random_vector<float>((size_t)N * V, rng, 4), weights = random_vector<float>(N, rng);
                std::vector<float> classes(N);
                for (int n = 0; n < N; n++) { classes[n] = (float)rng.below(V); weights[n] = weights[n] > 0; }
                std::vector<float> losses(N), probs((size_t)N * V);
                GpuBuffer g_logits(logits), g_classes(classes), g_weights(weights);
                GpuBuffer g_losses{std::vector<float>(N, NAN)}, g_probs{std::vector<float>(probs.size(), NAN)};
                crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), classes.data(), weights.data(), N,
                                         V, smoothing);
                crossentropy_forward(DEVICE_GPU, fast_layers(), g_losses.ptr, g_probs.ptr, g_logits.ptr,
                                     g_classes.ptr, g_weights.ptr, N, V, smoothing);
                expect_close("cross-entropy losses", g_losses.get(), losses, REDUCTION);
                expect_close("cross-entropy probs", g_probs.get(), probs, REDUCTION);
            }
}

TEST_CASE("GPU LayerNorm a warp per row and bias and LayerNorm gradients over row groups (--fast-kernels)" *
          doctest::skip(NO_GPU)) {
    for (Shape s : SHAPES) {
        CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.C); CAPTURE(s.OC);
        const int N = s.B * s.T;
        Rng rng(23);
        auto x = random_vector<float>((size_t)N * s.C, rng, 2), dout = random_vector<float>((size_t)N * s.C, rng);
        auto w = random_vector<float>(s.C, rng), b = random_vector<float>(s.C, rng);
        std::vector<float> out((size_t)N * s.C), mean(N), rstd(N);
        layernorm_forward_cpu(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, s.C);
        auto dx = random_vector<float>(x.size(), rng), dw = random_vector<float>(s.C, rng);
        auto db = random_vector<float>(s.C, rng);
        GpuBuffer g_x(x), g_dout(dout), g_w(w), g_b(b), g_mean(mean), g_rstd(rstd);
        GpuBuffer g_out{std::vector<float>(out.size(), NAN)}, g_mean2{std::vector<float>(N, NAN)};
        GpuBuffer g_rstd2{std::vector<float>(N, NAN)};
        layernorm_forward(DEVICE_GPU, fast_layers(), g_out.ptr, g_mean2.ptr, g_rstd2.ptr, g_x.ptr, g_w.ptr, g_b.ptr, N,
                          s.C);
        expect_close("layernorm out", g_out.get(), out, REDUCTION);
        expect_close("layernorm mean", g_mean2.get(), mean, REDUCTION);
        expect_close("layernorm rstd", g_rstd2.get(), rstd, REDUCTION);
        std::vector<float> runs[2][3];  // [run][dweight, dbias, dx]
        for (auto& run : runs) {
            GpuBuffer g_dx(dx), g_dw(dw), g_db(db);
            layernorm_backward(DEVICE_GPU, fast_layers(), g_dx.ptr, g_dw.ptr, g_db.ptr, g_dout.ptr, g_x.ptr, g_w.ptr,
                               g_mean.ptr, g_rstd.ptr, N, s.C);
            run[0] = g_dw.get();
            run[1] = g_db.get();
            run[2] = g_dx.get();
        }
        layernorm_backward_cpu(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                               rstd.data(), N, s.C);
        expect_close("layernorm dweight", runs[0][0], dw, REDUCTION);
        expect_close("layernorm dbias", runs[0][1], db, REDUCTION);
        expect_close("layernorm dx", runs[0][2], dx, REDUCTION);
        for (int k = 0; k < 3; k++)
            CHECK(memcmp(runs[0][k].data(), runs[1][k].data(), runs[0][k].size() * sizeof(float)) == 0);

        auto inp = random_vector<float>((size_t)N * s.C, rng), weight = random_vector<float>((size_t)s.OC * s.C, rng);
        auto mdout = random_vector<float>((size_t)N * s.OC, rng), dweight = random_vector<float>(weight.size(), rng);
        auto dbias = random_vector<float>(s.OC, rng);
        GpuBuffer g_inp(inp), g_weight(weight), g_mdout(mdout), g_dweight(dweight), g_dbias(dbias);
        matmul_backward(DEVICE_GPU, fast_layers(), nullptr, g_dweight.ptr, g_dbias.ptr, g_mdout.ptr, g_inp.ptr,
                        g_weight.ptr, N, s.C, s.OC);
        matmul_backward_cpu((float*)nullptr, dweight.data(), dbias.data(), mdout.data(), inp.data(), weight.data(), N,
                            s.C, s.OC);
        expect_close("matmul dbias", g_dbias.get(), dbias, REDUCTION);
    }
}

TEST_CASE("training steps with every faster kernel on (attention 3, fused): GPU matches the CPU" *
          doctest::skip(NO_GPU)) {
    Kernels fastest = fast_layers();
    fastest.attention = 3;
    BooleanTask task("cyclic3");
    Config c;
    c.V = 3; c.T = 16; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.mask_heads = 3;
    BothDevices run = expect_devices_agree(task, c, 5, fastest);
    std::vector<float> gpu_again;
    three_steps(c, DEVICE_GPU, fastest, run.init, run.tokens.data(), 32, run.y, gpu_again);
    CHECK(memcmp(run.gpu.data(), gpu_again.data(), run.gpu.size() * sizeof(float)) == 0);
    expect_lm_devices_agree(false, fastest);  // cross-entropy over V 1200, a causal decoder, ALiBi-shaped masks
}
