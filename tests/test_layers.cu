// Finite-difference checks, in double precision, of every CPU layer but attention
// (test_attention.cu): each backward against central differences of its forward.
#include "test_util.h"
#include "layers/embedding.cuh"
#include "layers/layernorm.cuh"
#include "layers/loss.cuh"
#include "layers/matmul.cuh"
#include "layers/pointwise.cuh"
#include "layers/adamw.cuh"

TEST_CASE("embedding backward matches finite differences") {
    const int B = 3, T = 5, C = 4, V = 6;
    Rng rng(1);
    std::vector<int> tokens(B * T);
    for (auto& t : tokens) t = rng.below(V);
    auto wte = random_vector<double>(V * C, rng), wpe = random_vector<double>(T * C, rng);
    auto w = random_vector<double>(B * T * C, rng);
    std::vector<double> out(B * T * C), dwte(V * C, 0), dwpe(T * C, 0);
    auto loss = [&] {
        embedding_forward_cpu(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
        return weighted_sum(out, w);
    };
    embedding_backward_cpu(dwte.data(), dwpe.data(), w.data(), tokens.data(), B, T, C);
    check_gradient("dwte", wte, dwte, loss);
    check_gradient("dwpe", wpe, dwpe, loss);
}

TEST_CASE("scalar embedding backward matches finite differences; valued tokens leave wte alone") {
    const int B = 3, T = 5, C = 4, V = 6;
    const std::vector<float> value = {-1, 0, 2.5f, 0, 0.5f, -3};  // tokens 1 and 3 have no value
    Rng rng(9);
    std::vector<int> tokens(B * T);
    for (auto& t : tokens) t = rng.below(V);
    tokens[0] = 1;  // at least one token of each kind
    tokens[1] = 2;
    auto wte = random_vector<double>(V * C, rng), wval = random_vector<double>(C, rng);
    auto wpe = random_vector<double>(T * C, rng), w = random_vector<double>(B * T * C, rng);
    std::vector<double> out(B * T * C), dwte(V * C, 0), dwval(C, 0), dwpe(T * C, 0);
    auto loss = [&] {
        scalar_embedding_forward_cpu(out.data(), tokens.data(), value.data(), wte.data(), wval.data(), wpe.data(),
                                     B, T, C);
        return weighted_sum(out, w);
    };
    loss();
    CHECK(out[C + 1] == doctest::Approx(2.5 * wval[1] + wpe[C + 1]));  // token 2 at position 1, by hand
    CHECK(out[2] == doctest::Approx(wte[1 * C + 2] + wpe[2]));          // token 1 (no value) at position 0
    scalar_embedding_backward_cpu(dwte.data(), dwval.data(), dwpe.data(), w.data(), tokens.data(), value.data(),
                                  B, T, C);
    check_gradient("dwte", wte, dwte, loss);
    check_gradient("dwval", wval, dwval, loss);
    check_gradient("dwpe", wpe, dwpe, loss);
    for (int v = 0; v < V; v++)
        if (value[v] != 0)
            for (int c = 0; c < C; c++) CHECK(dwte[v * C + c] == 0.0);
}

TEST_CASE("layernorm backward matches finite differences") {
    const int N = 7, C = 9;
    Rng rng(2);
    auto inp = random_vector<double>(N * C, rng, 2.0f), weight = random_vector<double>(C, rng);
    auto bias = random_vector<double>(C, rng), w = random_vector<double>(N * C, rng);
    std::vector<double> out(N * C), mean(N), rstd(N), dinp(N * C, 0), dweight(C, 0), dbias(C, 0);
    auto loss = [&] {
        layernorm_forward_cpu(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
        return weighted_sum(out, w);
    };
    loss();
    layernorm_backward_cpu(dinp.data(), dweight.data(), dbias.data(), w.data(), inp.data(), weight.data(),
                           mean.data(), rstd.data(), N, C);
    check_gradient("dinp", inp, dinp, loss);
    check_gradient("dweight", weight, dweight, loss);
    check_gradient("dbias", bias, dbias, loss);
}

TEST_CASE("layernorm forward normalises each row") {
    const int N = 3, C = 8;
    Rng rng(3);
    auto inp = random_vector<double>(N * C, rng, 5.0f);
    std::vector<double> weight(C, 1.0), bias(C, 0.0), out(N * C), mean(N), rstd(N);
    layernorm_forward_cpu(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += out[n * C + c] / C;
        for (int c = 0; c < C; c++) v += (out[n * C + c] - m) * (out[n * C + c] - m) / C;
        CHECK(std::fabs(m) < 1e-12);
        CHECK(v == doctest::Approx(1.0).epsilon(1e-4));  // eps 1e-5 keeps it just below 1
    }
}

TEST_CASE("matmul backward matches finite differences, with and without bias") {
    const int N = 6, C = 5, OC = 7;
    for (bool with_bias : {true, false}) {
        Rng rng(4);
        auto inp = random_vector<double>(N * C, rng), weight = random_vector<double>(OC * C, rng);
        auto bias = random_vector<double>(OC, rng), w = random_vector<double>(N * OC, rng);
        std::vector<double> out(N * OC), dinp(N * C, 0), dweight(OC * C, 0), dbias(OC, 0);
        const double* b = with_bias ? bias.data() : nullptr;
        auto loss = [&] {
            matmul_forward_cpu(out.data(), inp.data(), weight.data(), b, N, C, OC);
            return weighted_sum(out, w);
        };
        matmul_backward_cpu(dinp.data(), dweight.data(), with_bias ? dbias.data() : nullptr, w.data(), inp.data(),
                            weight.data(), N, C, OC);
        check_gradient("dinp", inp, dinp, loss);
        check_gradient("dweight", weight, dweight, loss);
        if (with_bias) check_gradient("dbias", bias, dbias, loss);
    }
}

TEST_CASE("matmul forward is inp W^T + b") {
    // 1x2 input, 3x2 weight (PyTorch layout), by hand
    std::vector<double> inp = {1, 2}, weight = {1, 0, 0, 1, 1, 1}, bias = {0.5, -0.5, 0}, out(3);
    matmul_forward_cpu(out.data(), inp.data(), weight.data(), bias.data(), 1, 2, 3);
    CHECK(out == std::vector<double>{1.5, 1.5, 3});
}

TEST_CASE("gelu backward matches finite differences; forward matches known values") {
    const size_t n = 50;
    Rng rng(5);
    auto inp = random_vector<double>(n, rng, 4.0f), w = random_vector<double>(n, rng);
    std::vector<double> out(n), dinp(n, 0);
    auto loss = [&] {
        gelu_forward_cpu(out.data(), inp.data(), n);
        return weighted_sum(out, w);
    };
    gelu_backward_cpu(dinp.data(), inp.data(), w.data(), n);
    check_gradient("dinp", inp, dinp, loss);
    CHECK(gelu_value(1.0) == doctest::Approx(0.8411919906).epsilon(1e-9));  // torch gelu(tanh) of 1
    CHECK(gelu_value(-2.0) == doctest::Approx(-0.0454023059).epsilon(1e-8));
}

TEST_CASE("residual forward adds its inputs") {
    std::vector<double> a = {1, 2}, b = {3, 4}, out(2);
    residual_forward_cpu(out.data(), a.data(), b.data(), 2);
    CHECK(out == std::vector<double>{4, 6});
}

TEST_CASE("the position pick reads one position and its backward writes only there") {
    const int B = 2, T = 3, C = 2;
    for (int pos : {0, T - 1}) {
        Rng rng(6);
        auto inp = random_vector<double>(B * T * C, rng), w = random_vector<double>(B * C, rng);
        std::vector<double> out(B * C), dinp(B * T * C, 0);
        auto loss = [&] {
            pick_position_forward_cpu(out.data(), inp.data(), B, T, C, pos);
            return weighted_sum(out, w);
        };
        pick_position_backward_cpu(dinp.data(), w.data(), B, T, C, pos);
        check_gradient("dinp", inp, dinp, loss);
        CHECK(out[C] == inp[(T + pos) * C]);  // row 1 reads its position pos
    }
}

TEST_CASE("mse backward matches finite differences") {
    const int N = 8;
    Rng rng(7);
    auto pred = random_vector<double>(N, rng);
    auto targets = random_vector<float>(N, rng);
    std::vector<double> losses(N), dpred(N, 0);
    auto loss = [&] {
        mse_forward_cpu(losses.data(), pred.data(), targets.data(), N);
        double s = 0;
        for (double l : losses) s += l;
        return s / N;
    };
    mse_backward_cpu(dpred.data(), pred.data(), targets.data(), N);
    check_gradient("dpred", pred, dpred, loss);
}

TEST_CASE("logistic loss backward matches finite differences") {
    const int N = 8;
    Rng rng(10);
    auto pred = random_vector<double>(N, rng, 3.0f);
    std::vector<float> targets(N);
    for (auto& y : targets) y = rng.uniform(-1, 1) > 0 ? 1.0f : -1.0f;
    std::vector<double> losses(N), dpred(N, 0);
    auto loss = [&] {
        logistic_forward_cpu(losses.data(), pred.data(), targets.data(), N);
        double s = 0;
        for (double l : losses) s += l;
        return s / N;
    };
    logistic_backward_cpu(dpred.data(), pred.data(), targets.data(), N);
    check_gradient("dpred", pred, dpred, loss);
}

TEST_CASE("logistic loss: values by hand, finite for any prediction") {
    CHECK(logistic_loss(0.0, 1.0) == doctest::Approx(std::log(2.0)));
    CHECK(logistic_loss(2.0, -1.0) == doctest::Approx(std::log1p(std::exp(2.0))));
    CHECK(logistic_slope(0.0, -1.0) == doctest::Approx(0.5));
    CHECK(logistic_slope(1.5, 1.0) == doctest::Approx(-1.0 / (1.0 + std::exp(1.5))));
    // far out, where exp(y * pred) overflows a float
    CHECK(logistic_loss(200.0f, -1.0f) == doctest::Approx(200.0f));
    CHECK(logistic_loss(200.0f, 1.0f) == 0.0f);
    CHECK(logistic_slope(-200.0f, 1.0f) == -1.0f);
    CHECK(logistic_slope(200.0f, 1.0f) == doctest::Approx(0.0f));
    CHECK(std::isfinite(logistic_slope(1e30f, -1.0f)));
}

TEST_CASE("cross-entropy backward matches finite differences, with a loss mask and label smoothing") {
    const int N = 5, V = 4;
    Rng rng(8);
    auto logits = random_vector<double>(N * V, rng, 3.0f);
    std::vector<float> targets(N), weights = {1, 0, 1, 1, 0};
    for (auto& t : targets) t = (float)rng.below(V);
    for (float smoothing : {0.0f, 0.1f, 0.3f})
        for (const float* row_weight : {(const float*)nullptr, (const float*)weights.data()}) {
            CAPTURE(smoothing);
            float count = row_weight ? 3.0f : (float)N;
            std::vector<double> losses(N), probs(N * V), dlogits(N * V, 0);
            auto loss = [&] {
                crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), targets.data(), row_weight, N, V,
                                         smoothing);
                double s = 0;
                for (double l : losses) s += l;
                return s / count;
            };
            loss();
            crossentropy_backward_cpu(dlogits.data(), probs.data(), targets.data(), row_weight, count, N, V,
                                      smoothing);
            check_gradient("dlogits", logits, dlogits, loss);
        }
}

TEST_CASE("cross-entropy: a row the loss mask leaves out costs 0 even where its target's p underflows") {
    // row 0: the target's logit is 200 below the others, so p underflows to 0 in float and
    // -log(p) is inf; with weight 0 the row must add 0 (inf * 0 would be NaN). Row 1 counts.
    const int N = 2, V = 3;
    std::vector<float> logits = {100.0f, 100.0f, -100.0f, 0.5f, -0.25f, 1.0f}, targets = {2, 0}, weights = {0, 1};
    std::vector<float> losses(N), probs(N * V), dlogits(N * V, 0.0f);
    crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), targets.data(), weights.data(), N, V);
    REQUIRE(probs[2] == 0.0f);  // the underflow this case is about
    CHECK(losses[0] == 0.0f);
    CHECK(losses[1] == doctest::Approx(-std::log(probs[3])));
    crossentropy_backward_cpu(dlogits.data(), probs.data(), targets.data(), weights.data(), 1.0f, N, V);
    for (int v = 0; v < V; v++) CHECK(dlogits[v] == 0.0f);  // the left-out row gets no gradient
    for (float g : dlogits) CHECK(std::isfinite(g));
}

TEST_CASE("adamw: first step moves each weight by lr against its gradient's sign, plus decay") {
    std::vector<double> p = {1.0, -2.0}, m = {0, 0}, v = {0, 0}, g = {0.3, -0.01};
    AdamWSettings s;
    s.lr = 0.1f;
    adamw_cpu(p.data(), m.data(), v.data(), g.data(), 2, s, 0.5f, 1);
    // mhat = g, vhat = g^2, so the step is lr * (sign(g) + wd * p) up to eps
    CHECK(p[0] == doctest::Approx(1.0 - 0.1 * (1 + 0.5 * 1.0)).epsilon(1e-6));
    CHECK(p[1] == doctest::Approx(-2.0 - 0.1 * (-1 + 0.5 * -2.0)).epsilon(1e-5));
}

TEST_CASE("adam with L2: the decay joins the gradient, so the first step is lr * sign(g + wd p)") {
    std::vector<double> p = {1.0, -2.0}, m = {0, 0}, v = {0, 0}, g = {0.3, 0.5};
    AdamWSettings s;
    s.lr = 0.1f;
    s.decoupled = false;
    adamw_cpu(p.data(), m.data(), v.data(), g.data(), 2, s, 0.5f, 1);
    CHECK(p[0] == doctest::Approx(1.0 - 0.1).epsilon(1e-6));   // g + wd p = 0.8 > 0
    CHECK(p[1] == doctest::Approx(-2.0 + 0.1).epsilon(1e-6));  // g + wd p = -0.5 < 0
}

// ----------------------------------------------------------------------------
// label smoothing and gradient clipping (the training recipe of a Vision Transformer)
#include "layers/clip.cuh"

TEST_CASE("cross-entropy with label smoothing: a 3-class row by hand") {
    // logits 0, ln 2, ln 4: p = 1/7, 2/7, 4/7. Target 2, ε = 0.3: q = 0.1, 0.1, 0.8, so
    // loss = -(0.1 ln(1/7) + 0.1 ln(2/7) + 0.8 ln(4/7)) = ln 7 - 1.7 ln 2, and dlogits = p - q.
    std::vector<double> logits = {0.0, std::log(2.0), std::log(4.0)}, losses(1), probs(3), dlogits(3, 0.0);
    std::vector<float> target = {2};
    crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), target.data(), nullptr, 1, 3, 0.3f);
    CHECK(losses[0] == doctest::Approx(std::log(7.0) - 1.7 * std::log(2.0)).epsilon(1e-7));
    crossentropy_backward_cpu(dlogits.data(), probs.data(), target.data(), nullptr, 1.0f, 1, 3, 0.3f);
    CHECK(dlogits[0] == doctest::Approx(1.0 / 7 - 0.1).epsilon(1e-7));
    CHECK(dlogits[1] == doctest::Approx(2.0 / 7 - 0.1).epsilon(1e-7));
    CHECK(dlogits[2] == doctest::Approx(4.0 / 7 - 0.8).epsilon(1e-7));
}

TEST_CASE("cross-entropy with smoothing 0 is the plain cross-entropy, bit for bit") {
    // the plain cross-entropy's float arithmetic written out here, against both calls: without
    // the smoothing argument and with 0. Row 2's target underflows (loss inf); row 3 is left out.
    const int N = 4, V = 5;
    Rng rng(12);
    auto logits = random_vector<float>(N * V, rng, 4.0f);
    logits[2 * V + 1] = -200.0f;
    std::vector<float> targets = {0, 3, 1, 4}, weights = {1, 1, 1, 0};
    std::vector<float> want_losses(N), want_probs(N * V), want_dlogits(N * V, 0.5f);
    for (int n = 0; n < N; n++) {
        const float* z = &logits[n * V];
        float* p = &want_probs[n * V];
        float zmax = z[0];
        for (int v = 1; v < V; v++) zmax = z[v] > zmax ? z[v] : zmax;
        float sum = 0;
        for (int v = 0; v < V; v++) { p[v] = std::exp(z[v] - zmax); sum += p[v]; }
        for (int v = 0; v < V; v++) p[v] /= sum;
        want_losses[n] = weights[n] == 0.0f ? 0.0f : -std::log(p[(int)targets[n]]) * weights[n];
        for (int v = 0; v < V; v++)
            want_dlogits[n * V + v] += (p[v] - float(v == (int)targets[n])) * (weights[n] / 3.0f);
    }
    REQUIRE(std::isinf(want_losses[2]));
    for (bool explicit_zero : {false, true}) {
        CAPTURE(explicit_zero);
        std::vector<float> losses(N), probs(N * V), dlogits(N * V, 0.5f);
        if (explicit_zero) {
            crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), targets.data(), weights.data(), N, V,
                                     0.0f);
            crossentropy_backward_cpu(dlogits.data(), probs.data(), targets.data(), weights.data(), 3.0f, N, V, 0.0f);
        } else {
            crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), targets.data(), weights.data(), N, V);
            crossentropy_backward_cpu(dlogits.data(), probs.data(), targets.data(), weights.data(), 3.0f, N, V);
        }
        CHECK(memcmp(losses.data(), want_losses.data(), N * sizeof(float)) == 0);
        CHECK(memcmp(probs.data(), want_probs.data(), N * V * sizeof(float)) == 0);
        CHECK(memcmp(dlogits.data(), want_dlogits.data(), N * V * sizeof(float)) == 0);
    }
}

TEST_CASE("gradient norm: the chunked sum matches a plain double loop, and sets the clipping factor") {
    for (size_t n : {(size_t)1, (size_t)4095, (size_t)4096, (size_t)4097, (size_t)100003}) {
        CAPTURE(n);
        Rng rng(13);
        auto grads = random_vector<float>(n, rng);
        std::vector<float> scratch(grad_norm_scratch_size(n));
        double want = 0;
        for (float g : grads) want += (double)g * g;
        double got = grad_norm_of(DEVICE_CPU, grads.data(), n, scratch.data());
        CHECK(std::fabs(got * got - want) <= 1e-12 * want);
        CHECK(grad_norm_result(scratch.data(), n)->factor == 1.0f);  // max_norm 0: no clipping
        grad_norm(DEVICE_CPU, grads.data(), n, 0.5f * (float)got, scratch.data());
        CHECK(grad_norm_result(scratch.data(), n)->factor == (float)(0.5f * (float)got / (got + 1e-6)));
    }
}

TEST_CASE("gradient norm on the CPU: the same bits at 1 and 2 threads") {
    const size_t n = 5000003;  // enough work for worth_threads to take the threads
    REQUIRE(worth_threads(n * 2));
    Rng rng(14);
    auto grads = random_vector<float>(n, rng);
    std::vector<float> scratch(grad_norm_scratch_size(n));
    double at[2];
#ifdef _OPENMP
    const int keep = omp_get_max_threads();
    for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        at[threads - 1] = grad_norm_of(DEVICE_CPU, grads.data(), n, scratch.data());
    }
    omp_set_num_threads(keep);
#else
    at[0] = at[1] = grad_norm_of(DEVICE_CPU, grads.data(), n, scratch.data());
#endif
    CHECK(memcmp(&at[0], &at[1], sizeof(double)) == 0);
    CHECK(std::isfinite(at[0]));
}

TEST_CASE("clipping: scale_buffer_cpu scales; a gradient above max_norm is scaled to it, one below is left alone") {
    std::vector<float> x = {1, -2, 0.5f};
    scale_buffer_cpu(x.data(), 3, 0.5f);
    CHECK(x == std::vector<float>{0.5f, -1, 0.25f});

    std::vector<float> grads = {3, 4}, scratch(grad_norm_scratch_size(2));  // norm 5
    CHECK(clip_grad_norm(DEVICE_CPU, grads.data(), 2, 10.0f, scratch.data()) == 5.0);
    CHECK(grads == std::vector<float>{3, 4});
    CHECK(clip_grad_norm(DEVICE_CPU, grads.data(), 2, 1.0f, scratch.data()) == 5.0);
    CHECK(grads[0] == doctest::Approx(0.6 * 5 / (5 + 1e-6)).epsilon(1e-7));
    CHECK(grads[1] == doctest::Approx(0.8 * 5 / (5 + 1e-6)).epsilon(1e-7));
    CHECK(grad_norm_of(DEVICE_CPU, grads.data(), 2, scratch.data()) == doctest::Approx(1.0));
}

TEST_CASE("--profile's lower bounds on an H200, its serial marks and the kernel names it reads") {
    CHECK(profiled_kernel_name<add_bias_kernel1>() == "add_bias_kernel1");  // the nvcc build's signature too
    CHECK(lower_bound_seconds({4.8e9, 0, 1}, H200, false) == doctest::Approx(1e-3));  // 4.8 GB at 4.8 TB/s
    CHECK(lower_bound_seconds({0, 67e9, 1}, H200, false) == doctest::Approx(1e-3));   // 67 GFLOP at 67 TFLOP/s
    CHECK(lower_bound_seconds({0, 495e9, 1}, H200, true) == doctest::Approx(1e-3));   // TF32 tensor cores
    CHECK(lower_bound_seconds({400, 100, 1}, H200, false) == H200.launch_seconds);    // a small launch: its latency
    ProfiledCall call;
    call.grid[0] = 1, call.grid[1] = 1, call.grid[2] = 1;
    call.block[0] = 64, call.block[1] = 1, call.block[2] = 1;
    call.cost.walk = 4096;
    CHECK(is_serial_launch(call, H200));  // 64 threads, each walking 4096 rows
    call.cost.walk = SERIAL_WALK;
    CHECK_FALSE(is_serial_launch(call, H200));  // a short walk
    call.cost.walk = 4096;
    call.grid[0] = 1000, call.block[0] = 256;
    CHECK_FALSE(is_serial_launch(call, H200));  // enough threads to fill the GPU
}
