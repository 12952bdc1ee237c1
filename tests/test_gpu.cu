// GPU kernels against their CPU reference, on awkward shapes and on the real ones; a whole
// training step GPU vs CPU; a short GPU run that must learn. Every case
// skips itself when there is no GPU; make gpu-check runs them on a GPU, and make test runs them
// on the CPU emulation of CUDA (emu/), built as tests/emulated_tests.
#include <fstream>
#include "test_util.h"
#include "gpu_test_util.h"  // GpuBuffer, expect_close, ELEMENTWISE, REDUCTION
#include "prior/init.cuh"
#include "run/step.cuh"         // model_update, model_clip_gradients
#include "run/safetensors.h"
#include "tasks/arithmetic.h"
#include "tasks/boolean.h"

static const bool NO_GPU = !gpu_available();

struct GpuTokens {
    int* ptr = nullptr;
    explicit GpuTokens(const std::vector<int>& host) {
        cudaCheck(cudaMalloc(&ptr, host.size() * sizeof(int)));
        cudaCheck(cudaMemcpy(ptr, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice));
    }
    ~GpuTokens() { cudaCheck(cudaFree(ptr)); }
};

// A batch's rows grouped by token on the device (layers/embedding.cuh), for kernel 2 of the embeddings
struct GpuTokenRows {
    TokenRows rows;
    GpuTokenRows(const std::vector<int>& tokens, int V) {
        cudaCheck(cudaMalloc(&rows.device, token_rows_capacity((int)tokens.size(), V) * sizeof(int)));
        token_rows_build(rows, tokens.data(), (int)tokens.size(), V);
        device_copy(rows.device, rows.host.data(), rows.host.size() * sizeof(int), cudaMemcpyHostToDevice);
    }
    ~GpuTokenRows() { cudaCheck(cudaFree(rows.device)); }
};

// kernel 1 everywhere, and the layers' second versions
static Kernels with_fast_layers(bool fast) {
    Kernels k;
    k.fast_layers = fast;
    return k;
}

// log.jsonl and the checkpoint's tensors of a finished run folder
static std::string run_record(const std::string& dir) {
    StFile f = safetensors_read(dir + "/model.safetensors");
    std::string record = read_file(dir + "/log.jsonl");
    for (const StTensor& t : f.tensors)
        record += t.name + std::string((const char*)t.data.data(), t.data.size() * sizeof(float));
    return record;
}

// The real shapes' batches: a GPU runs them whole. The emulation runs a block's threads as host
// fibers, where they cost minutes of make check's three emulated runs (one under AddressSanitizer)
// and add only more blocks of the same kernels; there they are cut to batches that keep every
// loop's edges: 67 x 16 rows are 34 row groups of column_sums (its stage 2's first lanes add two
// partials; the last group is partial), 41 rows six groups of attention version 3's dM
// (MASK_GROUP_ROWS 8, the last partial), and 9 rows at T 65 two of them. (Version 4's dM lanes
// that add two groups' sums have a small shape of their own in the attention case.)
#ifdef MASKPRIOR_CUDA_EMULATION
constexpr int REAL_BATCH = 67, REAL_ATTENTION_BATCH = 41, LONG_ATTENTION_BATCH = 9;
#else
constexpr int REAL_BATCH = 256, REAL_ATTENTION_BATCH = 256, LONG_ATTENTION_BATCH = 32;
#endif

struct Shape { int B, T, C, OC; };
static const Shape SHAPES[] = {{3, 7, 13, 29}, {1, 1, 1, 1}, {64, 16, 32, 96}, {REAL_BATCH, 16, 256, 768}};

TEST_CASE("GPU embedding, layernorm, gelu, residual and position pick match the CPU" * doctest::skip(NO_GPU)) {
    for (Shape s : SHAPES) {
        CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.C);
        const int V = 5, N = s.B * s.T;
        Rng rng(1);
        std::vector<int> tokens(N);
        for (auto& t : tokens) t = rng.below(V);
        auto wte = random_vector<float>(V * s.C, rng), wpe = random_vector<float>(s.T * s.C, rng);
        auto x = random_vector<float>((size_t)N * s.C, rng, 2), dout = random_vector<float>((size_t)N * s.C, rng);
        auto w = random_vector<float>(s.C, rng), b = random_vector<float>(s.C, rng);
        auto acc = random_vector<float>((size_t)N * s.C, rng);  // backward accumulates into this
        GpuTokens g_tokens(tokens);
        GpuBuffer g_wte(wte), g_wpe(wpe), g_x(x), g_dout(dout), g_w(w), g_b(b);

        std::vector<float> out((size_t)N * s.C), dwte(V * s.C, 0), dwpe(s.T * s.C, 0);
        GpuBuffer g_out(out);
        embedding_forward_cpu(out.data(), tokens.data(), wte.data(), wpe.data(), s.B, s.T, s.C);
        embedding_forward(DEVICE_GPU, g_out.ptr, g_tokens.ptr, g_wte.ptr, g_wpe.ptr, s.B, s.T, s.C);
        expect_close("embedding out", g_out.get(), out, ELEMENTWISE);
        embedding_backward_cpu(dwte.data(), dwpe.data(), dout.data(), tokens.data(), s.B, s.T, s.C);
        GpuTokenRows by_token(tokens, V);
        for (bool fast : {false, true}) {  // kernel 1, then kernel 2 (column sums, rows by token)
            CAPTURE(fast);
            GpuBuffer g_dwte_k(std::vector<float>(V * s.C, 0)), g_dwpe_k(std::vector<float>(s.T * s.C, 0));
            embedding_backward(DEVICE_GPU, with_fast_layers(fast), g_dwte_k.ptr, g_dwpe_k.ptr, g_dout.ptr,
                               g_tokens.ptr, by_token.rows, s.B, s.T, s.C);
            expect_close("dwte", g_dwte_k.get(), dwte, REDUCTION);
            expect_close("dwpe", g_dwpe_k.get(), dwpe, REDUCTION);
        }

        std::vector<float> mean(N), rstd(N), dx = acc, dw(s.C, 0.5f), db(s.C, -0.5f);
        GpuBuffer g_mean(mean), g_rstd(rstd), g_dx(dx), g_dw(dw), g_db(db);
        layernorm_forward_cpu(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, s.C);
        layernorm_forward(DEVICE_GPU, Kernels{}, g_out.ptr, g_mean.ptr, g_rstd.ptr, g_x.ptr, g_w.ptr, g_b.ptr, N, s.C);
        expect_close("layernorm out", g_out.get(), out, REDUCTION);
        expect_close("layernorm rstd", g_rstd.get(), rstd, REDUCTION);
        layernorm_backward_cpu(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                               rstd.data(), N, s.C);
        layernorm_backward(DEVICE_GPU, Kernels{}, g_dx.ptr, g_dw.ptr, g_db.ptr, g_dout.ptr, g_x.ptr, g_w.ptr,
                           g_mean.ptr, g_rstd.ptr, N, s.C);
        expect_close("layernorm dinp", g_dx.get(), dx, REDUCTION);
        expect_close("layernorm dweight", g_dw.get(), dw, REDUCTION);
        expect_close("layernorm dbias", g_db.get(), db, REDUCTION);

        size_t n = (size_t)N * s.C;
        std::vector<float> dgelu = acc;
        GpuBuffer g_dgelu(dgelu);
        gelu_forward_cpu(out.data(), x.data(), n);
        gelu_forward(DEVICE_GPU, g_out.ptr, g_x.ptr, n);
        expect_close("gelu out", g_out.get(), out, ELEMENTWISE);
        gelu_backward_cpu(dgelu.data(), x.data(), dout.data(), n);
        gelu_backward(DEVICE_GPU, g_dgelu.ptr, g_x.ptr, g_dout.ptr, n);
        expect_close("gelu dinp", g_dgelu.get(), dgelu, ELEMENTWISE);

        GpuBuffer g_acc(acc);
        residual_forward_cpu(out.data(), x.data(), acc.data(), n);
        residual_forward(DEVICE_GPU, g_out.ptr, g_x.ptr, g_acc.ptr, n);
        expect_close("residual out", g_out.get(), out, ELEMENTWISE);

        for (int pos : {0, s.T - 1}) {
            std::vector<float> picked((size_t)s.B * s.C), dpick = acc;
            GpuBuffer g_picked(picked), g_dpick(dpick);
            pick_position_forward_cpu(picked.data(), x.data(), s.B, s.T, s.C, pos);
            pick_position_forward(DEVICE_GPU, g_picked.ptr, g_x.ptr, s.B, s.T, s.C, pos);
            expect_close("pick out", g_picked.get(), picked, ELEMENTWISE);
            pick_position_backward_cpu(dpick.data(), x.data(), s.B, s.T, s.C, pos);  // x as dout (B,C) rows
            pick_position_backward(DEVICE_GPU, g_dpick.ptr, g_x.ptr, s.B, s.T, s.C, pos);
            expect_close("pick dinp", g_dpick.get(), dpick, ELEMENTWISE);
        }
    }
}

TEST_CASE("GPU matmul (cuBLAS) matches the CPU loops, with and without bias" * doctest::skip(NO_GPU)) {
    for (Shape s : SHAPES)
        for (bool with_bias : {true, false}) {
            CAPTURE(s.C); CAPTURE(s.OC); CAPTURE(with_bias);
            const int N = s.B * s.T;
            Rng rng(2);
            auto x = random_vector<float>((size_t)N * s.C, rng), W = random_vector<float>((size_t)s.OC * s.C, rng);
            auto bias = random_vector<float>(s.OC, rng), dout = random_vector<float>((size_t)N * s.OC, rng);
            std::vector<float> out((size_t)N * s.OC), dx = random_vector<float>((size_t)N * s.C, rng);
            std::vector<float> dW = random_vector<float>((size_t)s.OC * s.C, rng), db = random_vector<float>(s.OC, rng);
            GpuBuffer g_x(x), g_W(W), g_bias(bias), g_dout(dout), g_out(out), g_dx(dx), g_dW(dW), g_db(db);
            matmul_forward_cpu(out.data(), x.data(), W.data(), with_bias ? bias.data() : nullptr, N, s.C, s.OC);
            matmul_forward(DEVICE_GPU, Kernels{}, g_out.ptr, g_x.ptr, g_W.ptr, with_bias ? g_bias.ptr : nullptr, N, s.C,
                           s.OC);
            expect_close("matmul out", g_out.get(), out, REDUCTION);
            matmul_backward_cpu(dx.data(), dW.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(),
                                W.data(), N, s.C, s.OC);
            matmul_backward(DEVICE_GPU, Kernels{}, g_dx.ptr, g_dW.ptr, with_bias ? g_db.ptr : nullptr, g_dout.ptr,
                            g_x.ptr, g_W.ptr, N, s.C, s.OC);
            expect_close("matmul dinp", g_dx.get(), dx, REDUCTION);
            expect_close("matmul dweight", g_dW.get(), dW, REDUCTION);
            expect_close("matmul dbias", g_db.get(), db, REDUCTION);
        }
}

TEST_CASE("GPU losses and AdamW match the CPU" * doctest::skip(NO_GPU)) {
    for (int N : {1, 7, 256}) {
        const int V = 11;
        Rng rng(3);
        auto pred = random_vector<float>(N, rng), targets = random_vector<float>(N, rng);
        auto logits = random_vector<float>((size_t)N * V, rng, 4), weights = random_vector<float>(N, rng);
        std::vector<float> classes(N);
        for (int n = 0; n < N; n++) { classes[n] = (float)rng.below(V); weights[n] = weights[n] > 0; }
        std::vector<float> losses(N), dpred = random_vector<float>(N, rng);
        GpuBuffer g_pred(pred), g_targets(targets), g_losses(losses), g_dpred(dpred);
        mse_forward_cpu(losses.data(), pred.data(), targets.data(), N);
        mse_forward(DEVICE_GPU, g_losses.ptr, g_pred.ptr, g_targets.ptr, N);
        expect_close("mse losses", g_losses.get(), losses, ELEMENTWISE);
        mse_backward_cpu(dpred.data(), pred.data(), targets.data(), N);
        mse_backward(DEVICE_GPU, g_dpred.ptr, g_pred.ptr, g_targets.ptr, N);
        expect_close("mse dpred", g_dpred.get(), dpred, ELEMENTWISE);

        std::vector<float> probs((size_t)N * V), dlogits = random_vector<float>((size_t)N * V, rng);
        GpuBuffer g_logits(logits), g_classes(classes), g_weights(weights), g_probs(probs), g_dlogits(dlogits);
        GpuBuffer g_count(std::vector<float>{3.0f});  // the loss's denominator, on the device
        crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), classes.data(), weights.data(), N, V);
        crossentropy_forward(DEVICE_GPU, Kernels{}, g_losses.ptr, g_probs.ptr, g_logits.ptr, g_classes.ptr,
                             g_weights.ptr, N, V);
        expect_close("cross-entropy losses", g_losses.get(), losses, REDUCTION);
        expect_close("cross-entropy probs", g_probs.get(), probs, REDUCTION);
        crossentropy_backward_cpu(dlogits.data(), probs.data(), classes.data(), weights.data(), 3.0f, N, V);
        crossentropy_backward(DEVICE_GPU, g_dlogits.ptr, g_probs.ptr, g_classes.ptr, g_weights.ptr, g_count.ptr, N, V);
        expect_close("cross-entropy dlogits", g_dlogits.get(), dlogits, REDUCTION);

        auto p = random_vector<float>(N, rng), m = random_vector<float>(N, rng), v = random_vector<float>(N, rng, 1);
        for (auto& x : v) x = std::fabs(x);
        auto g = random_vector<float>(N, rng);
        for (bool decoupled : {true, false}) {
            std::vector<float> p2 = p, m2 = m, v2 = v;
            GpuBuffer g_p(p2), g_m(m2), g_v(v2), g_g(g);
            AdamWSettings settings;
            settings.decoupled = decoupled;
            adamw_cpu(p2.data(), m2.data(), v2.data(), g.data(), N, settings, 0.01f, 7);
            adamw_update(DEVICE_GPU, g_p.ptr, g_m.ptr, g_v.ptr, g_g.ptr, N, settings, 0.01f, 7);
            expect_close("adamw params", g_p.get(), p2, ELEMENTWISE);
            expect_close("adamw m", g_m.get(), m2, ELEMENTWISE);
            expect_close("adamw v", g_v.get(), v2, ELEMENTWISE);
        }
    }
}

// The default kernels with attention version v
static Kernels attention_version(int v) {
    Kernels kernels;
    kernels.attention = v;
    return kernels;
}

TEST_CASE("GPU attention matches the CPU at every kernel version, mask gradient included" * doctest::skip(NO_GPU)) {
    // the last shape: 34 groups of version 4's dM (SHORT_GROUP_ROWS 4), so its stage 2's first lanes add two
    const AttentionShape shapes[] = {{3, 7, 3, 5, 0, false}, {3, 7, 3, 5, 1, false}, {2, 9, 2, 4, 2, true},
                                     {1, 1, 1, 1, 1, false}, {64, 16, 2, 16, 1, false},
                                     {REAL_ATTENTION_BATCH, 16, 6, 64, 6, false},
                                     {LONG_ATTENTION_BATCH, 65, 3, 64, 1, false}, {16, 33, 4, 8, 4, true},
                                     {9, 40, 2, 100, 1, true}, {133, 4, 2, 8, 2, false}};
    for (AttentionShape s : shapes) {
        CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.NH); CAPTURE(s.HS); CAPTURE(s.mask_heads); CAPTURE(s.causal);
        Rng rng(4);
        const size_t rows = (size_t)s.B * s.T, att_n = (size_t)s.B * s.NH * s.T * s.T;
        const auto qkv = random_vector<float>(rows * 3 * s.NH * s.HS, rng);
        const auto mask = random_vector<float>((size_t)std::max(1, s.mask_heads) * s.T * s.T, rng, 4);
        const auto dout = random_vector<float>(rows * s.NH * s.HS, rng);
        const auto dqkv0 = random_vector<float>(qkv.size(), rng), dmask0 = random_vector<float>(mask.size(), rng);
        // the CPU's results, once a shape: the reference every version is held to
        std::vector<float> out(rows * s.NH * s.HS), att(att_n), dscores(att_n), mask_term(mask.size());
        std::vector<float> dqkv = dqkv0, dmask = dmask0;  // the backward accumulates onto random gradients
        const float* m = s.mask_heads ? mask.data() : nullptr;
        attention_forward_cpu(out.data(), att.data(), qkv.data(), m, mask_term.data(), s);
        attention_backward_cpu(dqkv.data(), dmask.data(), dscores.data(), dout.data(), qkv.data(), att.data(), m, s);
        // dS given (dout = nullptr), as the qk-opt fit runs it: dq and dk from the CPU's dS
        AttentionShape no_mask = s;
        no_mask.mask_heads = 0;
        std::vector<float> given(qkv.size(), 0.0f);
        attention_backward_cpu(given.data(), (float*)nullptr, dscores.data(), (const float*)nullptr, qkv.data(),
                               att.data(), (const float*)nullptr, no_mask);
        for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
            if (!attention_kernel_runs(version, s.HS, s.T)) continue;  // version 4: T 65, and T 40 with HS 100
            CAPTURE(version);
            const Kernels chosen = attention_version(version);
            GpuBuffer g_qkv(qkv), g_mask(mask), g_dout(dout), g_out{std::vector<float>(out.size())};
            GpuBuffer g_att{std::vector<float>(att_n)};
            GpuBuffer g_dscores{std::vector<float>(att_n, NAN)};  // dS is scratch the backward writes before reading
            GpuBuffer g_dqkv(dqkv0), g_dmask(dmask0), g_mask_term{std::vector<float>(mask.size())};
            const float* gm = s.mask_heads ? g_mask.ptr : nullptr;
            attention_forward(DEVICE_GPU, chosen, g_out.ptr, g_att.ptr, g_qkv.ptr, gm, g_mask_term.ptr, s);
            expect_close("attention out", g_out.get(), out, REDUCTION);
            expect_close("attention weights", g_att.get(), att, REDUCTION);
            attention_backward(DEVICE_GPU, chosen, g_dqkv.ptr, g_dmask.ptr, g_dscores.ptr, g_dout.ptr, g_qkv.ptr,
                               g_att.ptr, gm, s);
            expect_close("attention dqkv", g_dqkv.get(), dqkv, REDUCTION);
            expect_close("attention dmask", g_dmask.get(), dmask, REDUCTION);
            GpuBuffer g_given{std::vector<float>(qkv.size(), 0.0f)}, g_ds(dscores);
            attention_backward(DEVICE_GPU, chosen, g_given.ptr, nullptr, g_ds.ptr, nullptr, g_qkv.ptr, g_att.ptr,
                               nullptr, no_mask);
            expect_close("attention dqkv, dS given", g_given.get(), given, REDUCTION);
        }
    }
}

TEST_CASE("GPU attention gives the same bits at every run, at every kernel version" * doctest::skip(NO_GPU)) {
    const AttentionShape s = {24, 33, 3, 16, 1, false};  // 3 groups of batch rows for version 3's dM
    Rng rng(6);
    const size_t rows = (size_t)s.B * s.T, att_n = (size_t)s.B * s.NH * s.T * s.T;
    GpuBuffer g_qkv(random_vector<float>(rows * 3 * s.NH * s.HS, rng)), g_mask(random_vector<float>(s.T * s.T, rng, 4));
    GpuBuffer g_dout(random_vector<float>(rows * s.NH * s.HS, rng)), g_out{std::vector<float>(rows * s.NH * s.HS)};
    GpuBuffer g_att{std::vector<float>(att_n)}, g_dscores{std::vector<float>(att_n)};
    GpuBuffer g_mask_term{std::vector<float>(s.T * s.T)};
    for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
        CAPTURE(version);
        const Kernels chosen = attention_version(version);
        std::vector<float> runs[2][2];  // [run][out, dmask ++ dqkv]
        for (auto& run : runs) {
            GpuBuffer g_dqkv{std::vector<float>(rows * 3 * s.NH * s.HS, 0.0f)}, g_dmask{std::vector<float>(s.T * s.T)};
            attention_forward(DEVICE_GPU, chosen, g_out.ptr, g_att.ptr, g_qkv.ptr, g_mask.ptr, g_mask_term.ptr, s);
            attention_backward(DEVICE_GPU, chosen, g_dqkv.ptr, g_dmask.ptr, g_dscores.ptr, g_dout.ptr, g_qkv.ptr,
                               g_att.ptr, g_mask.ptr, s);
            run[0] = g_out.get();
            run[1] = g_dmask.get();
            const std::vector<float> dqkv = g_dqkv.get();
            run[1].insert(run[1].end(), dqkv.begin(), dqkv.end());
        }
        for (int k = 0; k < 2; k++) {
            REQUIRE(runs[0][k].size() == runs[1][k].size());
            CHECK(memcmp(runs[0][k].data(), runs[1][k].data(), runs[0][k].size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("the qk-opt fit on the GPU matches the CPU's" * doctest::skip(NO_GPU)) {
    BooleanTask task("2parity");
    Config c;
    c.V = 3; c.T = 16; c.C = 32; c.L = 2; c.NH = 2; c.HS = 16; c.MLP = 32;
    std::vector<float> init(param_count(c));
    Rng rng(5);
    init_default(c, init.data(), rng);
    std::vector<int> tokens(64 * c.T);
    float target;
    for (int b = 0; b < 64; b++) task.train_example(b * 101, 0, token_slot(&tokens[b * c.T], &target));
    const Structure G = {1, c.T, task.structure()};
    QkFit fits[2];
    InitCheck checks[2];
    for (Device dev : {DEVICE_CPU, DEVICE_GPU}) {
        Model model;
        model_build(model, c, dev, 64);
        std::vector<float> host = init;
        buffer_copy(model.params_mem, dev, host.data(), DEVICE_CPU, model.num_params);
        AttentionInputs E = first_attention_inputs(model, tokens.data(), 64);
        fits[dev] = init_qk_opt(model, host.data(), E, G, 6.0f, 200);
        buffer_copy(model.params_mem, dev, host.data(), DEVICE_CPU, model.num_params);
        checks[dev] = init_check(model, tokens.data(), 64, G, 6.0f);
        model_free(model);
    }
    CHECK(fits[DEVICE_GPU].kl_start == doctest::Approx(fits[DEVICE_CPU].kl_start).epsilon(1e-4));
    CHECK(fits[DEVICE_GPU].kl_end == doctest::Approx(fits[DEVICE_CPU].kl_end).epsilon(0.05));
    CHECK(checks[DEVICE_GPU].mean_abs_diff < 0.01);
    CHECK(checks[DEVICE_GPU].prior_mass == doctest::Approx(checks[DEVICE_CPU].prior_mass).epsilon(1e-3));
}

// B training examples of a task, spread over its training set: tokens (B,T), targets y
// (B, targets_per_example).
static void task_batch(const Task& task, int B, std::vector<int>& tokens, std::vector<float>& y) {
    const int P = task.targets_per_example();
    tokens.resize((size_t)B * task.seq_len);
    y.resize((size_t)B * P);
    for (int b = 0; b < B; b++)
        task.train_example(b * 37 % task.train_size(), 0, token_slot(&tokens[b * task.seq_len], &y[b * P]));
}

// Three AdamW steps of model config c from the weights `init` on one device, with the GPU's
// `kernels`, on one batch of B examples (loss_mask (B,T) or nullptr): returns the last loss, and the
// parameters after the steps in `params`. With clip > 0 the gradient is clipped to that global norm
// before each update.
static float three_steps(const Config& c, Device dev, const Kernels& kernels, const std::vector<float>& init,
                         ModelInput input, int B, const std::vector<float>& y, std::vector<float>& params,
                         const float* loss_mask = nullptr, float label_smoothing = 0.0f, float clip = 0.0f) {
    Model model;
    model_build(model, c, dev, B);
    model.kernels = kernels;
    model.label_smoothing = label_smoothing;
    buffer_copy(model.params_mem, model.dev, init.data(), DEVICE_CPU, model.num_params);
    float loss = 0;
    for (int step = 0; step < 3; step++) {
        loss = model_forward(model, input, y.data(), B, loss_mask);
        model_zero_grad(model);
        model_backward(model, B);
        if (clip > 0) model_clip_gradients(model, clip);
        model_update(model);
    }
    params.resize(model.num_params);
    buffer_copy(params.data(), DEVICE_CPU, model.params_mem, model.dev, model.num_params);
    model_free(model);
    return loss;
}

// The key biases bk get a gradient that is zero up to rounding: bk adds q_i . bk to every score
// of query i's row, which the softmax ignores. Adam scales that rounding noise up to steps of
// about lr, so after a few steps the two devices' key biases may part by a few lr (seen under
// the CUDA emulation: up to 9e-4 after 3 steps, where every other parameter agreed to 2e-7).
// Checks them against that bound and leaves them out of the close comparison that follows.
static void expect_key_biases_within_adam_noise(const Config& c, std::vector<float>& gpu, std::vector<float>& cpu) {
    const float lr = AdamWSettings().lr, steps = 3;
    ParamTensors on_gpu = param_bind(c, gpu.data()), on_cpu = param_bind(c, cpu.data());
    for (int l = 0; l < c.L; l++)
        for (int o = c.attention_width(); o < 2 * c.attention_width(); o++) {  // the k rows
            float& g = on_gpu.qkvb[(size_t)l * c.qkv_width() + o];
            const float h = on_cpu.qkvb[(size_t)l * c.qkv_width() + o];
            CHECK(std::fabs(g - h) <= 2 * steps * lr);
            g = h;
        }
}

// One batch of a task (32 examples; the next-token readout's loss mask from the task), weights
// from the default init with the mask at c = 1.5 from the task's G, and the parameters after
// three steps from them on each device (the GPU with `kernels`); the last losses and parameters
// must agree (the key biases within Adam's noise, above).
struct BothDevices {
    std::vector<float> init, y, loss_mask, cpu, gpu;
    std::vector<int> tokens;
};

static BothDevices expect_devices_agree(const Task& task, const Config& c, uint64_t seed, const Kernels& kernels) {
    BothDevices run;
    run.init.resize(param_count(c));
    Rng rng(seed);
    init_default(c, run.init.data(), rng);
    init_mask_from_structure(c, run.init.data(), Structure{1, c.T, task.structure()}, 1.5f);
    task_batch(task, 32, run.tokens, run.y);
    const float* mask = nullptr;
    if (task.next_token) {
        for (int b = 0; b < 32; b++) for (float w : task.loss_positions()) run.loss_mask.push_back(w);
        mask = run.loss_mask.data();
    }
    float cpu_loss = three_steps(c, DEVICE_CPU, kernels, run.init, run.tokens.data(), 32, run.y, run.cpu, mask);
    float gpu_loss = three_steps(c, DEVICE_GPU, kernels, run.init, run.tokens.data(), 32, run.y, run.gpu, mask);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-4));
    std::vector<float> gpu = run.gpu, cpu = run.cpu;
    expect_key_biases_within_adam_noise(c, gpu, cpu);
    expect_close("parameters after 3 steps", gpu, cpu, REDUCTION);
    return run;
}

// Three AdamW steps of the same model from the same weights on both devices.
TEST_CASE("a whole training step on the GPU matches the CPU; two GPU runs are bit-identical; every kernel version" *
          doctest::skip(NO_GPU)) {
    BooleanTask task("cyclic3");
    Config c;
    c.V = 3; c.T = 16; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.mask_heads = 3;
    for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
        CAPTURE(version);
        const Kernels chosen = attention_version(version);
        BothDevices run = expect_devices_agree(task, c, 5, chosen);
        std::vector<float> gpu_again;
        three_steps(c, DEVICE_GPU, chosen, run.init, run.tokens.data(), 32, run.y, gpu_again);
        CHECK(memcmp(run.gpu.data(), gpu_again.data(), run.gpu.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("GPU embedding with scalar encoding, and the logistic loss, match the CPU" * doctest::skip(NO_GPU)) {
    const std::vector<float> value = {-1, 1, 0, 0.5f, 0};  // tokens 2 and 4 have no value
    const int V = (int)value.size();
    for (Shape s : SHAPES) {
        CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.C);
        const int N = s.B * s.T;
        Rng rng(6);
        std::vector<int> tokens(N);
        for (auto& t : tokens) t = rng.below(V);
        auto wte = random_vector<float>(V * s.C, rng), wval = random_vector<float>(s.C, rng);
        auto wpe = random_vector<float>(s.T * s.C, rng), dout = random_vector<float>((size_t)N * s.C, rng);
        std::vector<float> out((size_t)N * s.C);  // the backward accumulates into random gradients
        auto dwte = random_vector<float>(V * s.C, rng), dwval = random_vector<float>(s.C, rng);
        auto dwpe = random_vector<float>(s.T * s.C, rng);
        GpuTokens g_tokens(tokens);
        GpuBuffer g_value(value), g_wte(wte), g_wval(wval), g_wpe(wpe), g_dout(dout), g_out(out);
        GpuBuffer g_dwte(dwte), g_dwval(dwval), g_dwpe(dwpe);
        scalar_embedding_forward_cpu(out.data(), tokens.data(), value.data(), wte.data(), wval.data(), wpe.data(),
                                     s.B, s.T, s.C);
        scalar_embedding_forward(DEVICE_GPU, g_out.ptr, g_tokens.ptr, g_value.ptr, g_wte.ptr, g_wval.ptr, g_wpe.ptr,
                                 s.B, s.T, s.C);
        expect_close("scalar embedding out", g_out.get(), out, ELEMENTWISE);
        scalar_embedding_backward_cpu(dwte.data(), dwval.data(), dwpe.data(), dout.data(), tokens.data(),
                                      value.data(), s.B, s.T, s.C);
        GpuTokenRows by_token(tokens, V);
        for (bool fast : {false, true}) {  // kernel 1, then kernel 2
            CAPTURE(fast);
            GpuBuffer g_dwte_k(g_dwte.get()), g_dwval_k(g_dwval.get()), g_dwpe_k(g_dwpe.get());  // the random start
            scalar_embedding_backward(DEVICE_GPU, with_fast_layers(fast), g_dwte_k.ptr, g_dwval_k.ptr, g_dwpe_k.ptr,
                                      g_dout.ptr, g_tokens.ptr, g_value.ptr, by_token.rows, s.B, s.T, s.C);
            expect_close("scalar dwte", g_dwte_k.get(), dwte, REDUCTION);
            expect_close("scalar dwval", g_dwval_k.get(), dwval, REDUCTION);
            expect_close("scalar dwpe", g_dwpe_k.get(), dwpe, REDUCTION);
        }
    }
    for (int N : {1, 7, 256}) {
        Rng rng(7);
        auto pred = random_vector<float>(N, rng, 8), dpred = random_vector<float>(N, rng);
        std::vector<float> labels(N), losses(N);
        for (auto& y : labels) y = rng.uniform(-1, 1) > 0 ? 1.0f : -1.0f;
        GpuBuffer g_pred(pred), g_labels(labels), g_losses(losses), g_dpred(dpred);
        logistic_forward_cpu(losses.data(), pred.data(), labels.data(), N);
        logistic_forward(DEVICE_GPU, g_losses.ptr, g_pred.ptr, g_labels.ptr, N);
        expect_close("logistic losses", g_losses.get(), losses, ELEMENTWISE);
        logistic_backward_cpu(dpred.data(), pred.data(), labels.data(), N);
        logistic_backward(DEVICE_GPU, g_dpred.ptr, g_pred.ptr, g_labels.ptr, N);
        expect_close("logistic dpred", g_dpred.get(), dpred, ELEMENTWISE);
    }
}

// The same with scalar encoding and the logistic loss, on maj3 (±1 targets); the wte rows of
// the bit tokens must stay exactly 0 on both devices.
TEST_CASE("a training step with scalar encoding and logistic loss: GPU matches the CPU" * doctest::skip(NO_GPU)) {
    BooleanTask task("maj3");
    Config c;
    c.V = 3; c.T = 16; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.mask_heads = 1;
    c.encoding = ENCODING_SCALAR;
    c.token_value = task.token_values();
    c.loss = LOSS_LOGISTIC;
    BothDevices run = expect_devices_agree(task, c, 8, Kernels{});
    for (const std::vector<float>* params : {&run.cpu, &run.gpu}) {
        ParamTensors p = param_bind(c, (float*)params->data());
        for (int i = 0; i < 2 * c.C; i++) CHECK(p.wte[i] == 0.0f);  // tokens 0 and 1: the bits
    }
}

// The causal decoder: next-token readout at every position, loss on the answer tokens only.
TEST_CASE("a training step of the causal decoder on add3: GPU matches the CPU" * doctest::skip(NO_GPU)) {
    ArithmeticData data;
    data.data_frac = 0.002;
    ArithmeticTask task("add3", data);
    Config c;
    c.V = task.vocab; c.T = task.seq_len; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.mask_heads = 1;
    c.OUT = task.vocab;
    c.readout = READOUT_NEXT_TOKEN;
    c.causal = true;
    expect_devices_agree(task, c, 9, Kernels{});
}

TEST_CASE("a short GPU training run on maj3 fits the seen domain" * doctest::skip(NO_GPU)) {
    CommandResult r = run_command(GPU_BINARY + " --device cuda --task maj3 --init mask --steps 400 --eval-every 400 "
                                  "--out " + TMP_PREFIX + "gpu_run");
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    std::ifstream f(TMP_PREFIX + "gpu_run/metrics.json");
    nlohmann::json metrics = nlohmann::json::parse(f);
    CHECK(metrics["final_loss"].get<double>() < 0.05);
    CHECK(metrics["device"].get<std::string>().find("CUDA") != std::string::npos);
}

// ----------------------------------------------------------------------------
// label smoothing and gradient clipping (the training recipe of a Vision Transformer)
#include "layers/clip.cuh"

TEST_CASE("GPU cross-entropy with label smoothing matches the CPU" * doctest::skip(NO_GPU)) {
    for (int N : {1, 7, 256})
        for (float smoothing : {0.0f, 0.1f}) {
            CAPTURE(N); CAPTURE(smoothing);
            const int V = 11;
            Rng rng(15);
            auto logits = random_vector<float>((size_t)N * V, rng, 4), weights = random_vector<float>(N, rng);
            std::vector<float> classes(N);
            for (int n = 0; n < N; n++) { classes[n] = (float)rng.below(V); weights[n] = weights[n] > 0; }
            std::vector<float> losses(N), probs((size_t)N * V), dlogits = random_vector<float>((size_t)N * V, rng);
            GpuBuffer g_logits(logits), g_classes(classes), g_weights(weights), g_losses(losses), g_probs(probs);
            GpuBuffer g_dlogits(dlogits), g_count(std::vector<float>{3.0f});
            crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), classes.data(), weights.data(), N, V,
                                     smoothing);
            crossentropy_forward(DEVICE_GPU, Kernels{}, g_losses.ptr, g_probs.ptr, g_logits.ptr, g_classes.ptr,
                                 g_weights.ptr, N, V, smoothing);
            expect_close("cross-entropy losses", g_losses.get(), losses, REDUCTION);
            expect_close("cross-entropy probs", g_probs.get(), probs, REDUCTION);
            crossentropy_backward_cpu(dlogits.data(), probs.data(), classes.data(), weights.data(), 3.0f, N, V,
                                      smoothing);
            crossentropy_backward(DEVICE_GPU, g_dlogits.ptr, g_probs.ptr, g_classes.ptr, g_weights.ptr, g_count.ptr, N,
                                  V, smoothing);
            expect_close("cross-entropy dlogits", g_dlogits.get(), dlogits, REDUCTION);
        }
}

TEST_CASE("GPU gradient norm and clipping match the CPU; the GPU norm is the same bits every run" *
          doctest::skip(NO_GPU)) {
    for (size_t n : {(size_t)1, (size_t)255, (size_t)257, (size_t)100003}) {
        CAPTURE(n);
        Rng rng(16);
        auto grads = random_vector<float>(n, rng);
        std::vector<float> cpu_scratch(grad_norm_scratch_size(n)), scratch_init(grad_norm_scratch_size(n));
        GpuBuffer g_grads(grads), g_scratch(scratch_init);
        const double cpu = grad_norm_of(DEVICE_CPU, grads.data(), n, cpu_scratch.data());
        const double gpu = grad_norm_of(DEVICE_GPU, g_grads.ptr, n, g_scratch.ptr);
        const double again = grad_norm_of(DEVICE_GPU, g_grads.ptr, n, g_scratch.ptr);
        CHECK(std::fabs(gpu - cpu) <= 1e-12 * cpu);  // the same squares, summed in another order
        CHECK(memcmp(&gpu, &again, sizeof(double)) == 0);

        const float max_norm = 0.5f * (float)cpu;  // half the norm: every gradient is scaled
        const double cpu_norm = clip_grad_norm(DEVICE_CPU, grads.data(), n, max_norm, cpu_scratch.data());
        const double gpu_norm = clip_grad_norm(DEVICE_GPU, g_grads.ptr, n, max_norm, g_scratch.ptr);
        CHECK(std::fabs(gpu_norm - cpu_norm) <= 1e-12 * cpu_norm);
        expect_close("clipped gradient", g_grads.get(), grads, ELEMENTWISE);
    }
}
