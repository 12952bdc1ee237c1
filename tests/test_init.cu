// The initialisations (docs/method.md, "The inits") and what measures them: the linear algebra of
// qk-svd, the attention backward with a given dS that qk-opt uses, each init's first attention
// against the target pattern, the persistence metrics on hand-made cases, and the PNG writer.
#define STB_IMAGE_STATIC
#include "tasks/image_folder.h"  // stb_image (stbi_load), compiled once there
#include "test_util.h"
#include "prior/init.cuh"
#include "prior/persistence.cuh"
#include "run/pictures.h"
#include "tasks/boolean.h"

static Matrix random_matrix(int rows, int cols, Rng& rng) {
    Matrix m(rows, cols);
    for (double& x : m.a) x = rng.uniform(-1, 1);
    return m;
}

static double max_abs_difference(const Matrix& x, const Matrix& y) {
    double worst = 0;
    for (size_t i = 0; i < x.a.size(); i++) worst = std::max(worst, std::fabs(x.a[i] - y.a[i]));
    return worst;
}

TEST_CASE("SVD, pseudo-inverse and low-rank factors") {
    Rng rng(4);
    for (auto [m, n] : {std::pair{7, 5}, std::pair{5, 7}}) {
        Matrix A = random_matrix(m, n, rng);
        Svd d = svd(A);
        Matrix US = d.U;  // U diag(S)
        for (int i = 0; i < US.rows; i++)
            for (int k = 0; k < US.cols; k++) US(i, k) *= d.S[k];
        CHECK(max_abs_difference(multiply(US, transpose(d.V)), A) < 1e-12);
        Matrix UtU = multiply(transpose(d.U), d.U);
        for (int i = 0; i < UtU.rows; i++)
            for (int j = 0; j < UtU.cols; j++) CHECK(UtU(i, j) == doctest::Approx(i == j ? 1.0 : 0.0).epsilon(1e-12));
        for (size_t k = 1; k < d.S.size(); k++) CHECK(d.S[k - 1] >= d.S[k]);
        Matrix P = pseudo_inverse(A, 1e-10);  // A A⁺ A = A
        CHECK(max_abs_difference(multiply(multiply(A, P), A), A) < 1e-12);
    }
    // rank 2 (6,4) plus noise at 1e-9: the cutoff drops the noise, so A⁺ stays small
    Matrix A = multiply(random_matrix(6, 2, rng), random_matrix(2, 4, rng)), noisy = A;
    for (double& x : noisy.a) x += 1e-9 * rng.uniform(-1, 1);
    Matrix P = pseudo_inverse(noisy, 1e-5);
    double biggest = 0;
    for (double x : P.a) biggest = std::max(biggest, std::fabs(x));
    CHECK(biggest < 100);
    CHECK(max_abs_difference(multiply(multiply(A, P), A), A) < 1e-6);
    // a rank-3 (5,5) matrix is rebuilt exactly from rank-3 factors; rank 2 misses by σ_3 (Eckart-Young)
    Matrix R = multiply(random_matrix(5, 3, rng), random_matrix(3, 5, rng)), X, Y;
    low_rank_factors(R, 3, X, Y);
    CHECK(max_abs_difference(multiply(transpose(X), Y), R) < 1e-12);
    low_rank_factors(R, 2, X, Y);
    Matrix diff = multiply(transpose(X), Y);
    for (size_t i = 0; i < diff.a.size(); i++) diff.a[i] -= R.a[i];
    CHECK(svd(diff).S[0] == doctest::Approx(svd(R).S[2]).epsilon(1e-9));
}

TEST_CASE("attention backward with dS given computes dq and dk as the full backward does") {
    AttentionShape s = {2, 5, 2, 3, 0, false};
    Rng rng(8);
    auto qkv = random_vector<double>((size_t)s.B * s.T * 3 * s.NH * s.HS, rng);
    auto dout = random_vector<double>((size_t)s.B * s.T * s.NH * s.HS, rng);
    std::vector<double> out(dout.size()), att((size_t)s.B * s.NH * s.T * s.T), dS(att.size());
    attention_forward_cpu(out.data(), att.data(), qkv.data(), (const double*)nullptr, (double*)nullptr, s);
    std::vector<double> full(qkv.size(), 0.0), given(qkv.size(), 0.0);
    attention_backward_cpu(full.data(), (double*)nullptr, dS.data(), dout.data(), qkv.data(), att.data(),
                           (const double*)nullptr, s);
    attention_backward_cpu(given.data(), (double*)nullptr, dS.data(), (const double*)nullptr, qkv.data(),
                           att.data(), (const double*)nullptr, s);
    const int row = 3 * s.NH * s.HS;
    for (size_t i = 0; i < qkv.size(); i++) {
        bool is_v = (int)(i % row) >= 2 * s.NH * s.HS;
        CHECK(given[i] == (is_v ? 0.0 : full[i]));
    }
}

// A CPU model on 2parity's inputs, its default init, and the first attention's inputs E.
struct InitFixture {
    BooleanTask task{"2parity"};
    Config c;
    Model model;
    std::vector<float> host;
    std::vector<int> tokens;
    AttentionInputs E;
    Structure G;
    static constexpr int N = 256;

    InitFixture() {
        c.V = task.vocab; c.T = task.seq_len; c.C = 32; c.L = 2; c.NH = 2; c.HS = 16; c.MLP = 32;
        model_build(model, c, DEVICE_CPU, 64);
        host.resize(model.num_params);
        Rng rng(1);
        init_default(c, host.data(), rng);
        upload();
        EpochOrder order(1, task.train_size());
        tokens.resize((size_t)N * c.T);
        float target;
        for (int k = 0; k < N; k++)
            task.train_example(order.example(k), 0, token_slot(&tokens[(size_t)k * c.T], &target));
        E = first_attention_inputs(model, tokens.data(), N);
        G = {1, c.T, task.structure()};
    }
    ~InitFixture() { model_free(model); }
    void upload() { buffer_copy(model.params_mem, DEVICE_CPU, host.data(), DEVICE_CPU, model.num_params); }
};

TEST_CASE("qk-svd: the first attention starts at softmax(c·G)") {
    InitFixture f;
    CHECK(f.E.distinct.rows == 1 + 2 * 15);  // CLS, and each bit position with token 0 and 1
    init_qk_svd(f.c, f.host.data(), f.E, f.G, 6.0f);
    f.upload();
    InitCheck check = init_check(f.model, f.tokens.data(), InitFixture::N, f.G, 6.0f);
    MESSAGE("qk-svd: prior mass " << check.prior_mass << " (P " << check.target_mass << "), mean |A - P| "
                                  << check.mean_abs_diff << ", max " << check.max_abs_diff);
    // the rows are LayerNormed wpe[t] + wte[v]: not independent, so least squares, close not exact
    CHECK(check.mean_abs_diff < 0.01);
    CHECK(std::fabs(check.prior_mass - check.target_mass) < 0.02);
    ParamTensors p = param_bind(f.c, f.host.data());
    for (int o = 0; o < 2 * f.c.attention_width(); o++) CHECK(p.qkvb[o] == 0.0f);  // q and k biases
}

TEST_CASE("qk-svd is exact where the first attention's inputs are independent") {
    // token t at position t: T distinct rows in C > T dimensions, so E W E^T = S can be met exactly
    Config c;
    c.V = 6; c.T = 6; c.C = 16; c.L = 1; c.NH = 2; c.HS = 8; c.MLP = 8;
    Model model;
    model_build(model, c, DEVICE_CPU, 4);
    std::vector<float> host(model.num_params);
    Rng rng(2);
    init_default(c, host.data(), rng);
    buffer_copy(model.params_mem, DEVICE_CPU, host.data(), DEVICE_CPU, model.num_params);
    std::vector<int> tokens(4 * c.T);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (int)(i % c.T);
    AttentionInputs E = first_attention_inputs(model, tokens.data(), 4);
    REQUIRE(E.distinct.rows == c.T);
    Structure G = {2, c.T, std::vector<float>(2 * c.T * c.T)};  // one random G per head, self always
    for (int k = 0; k < 2 * c.T * c.T; k++) G.g[k] = (k % c.T == k / c.T % c.T) || rng.uniform() < 0.3f;
    init_qk_svd(c, host.data(), E, G, 4.0f);
    buffer_copy(model.params_mem, DEVICE_CPU, host.data(), DEVICE_CPU, model.num_params);
    InitCheck check = init_check(model, tokens.data(), 4, G, 4.0f);
    CHECK(check.max_abs_diff < 1e-4);
    model_free(model);
}

TEST_CASE("qk-opt lowers its fitting loss and lands on softmax(c·G)") {
    InitFixture f;
    QkFit fit = init_qk_opt(f.model, f.host.data(), f.E, f.G, 6.0f, 500);
    MESSAGE("qk-opt KL " << fit.kl_start << " -> " << fit.kl_end);
    CHECK(fit.kl_end < 0.02 * fit.kl_start);
    f.upload();
    InitCheck check = init_check(f.model, f.tokens.data(), InitFixture::N, f.G, 6.0f);
    CHECK(check.mean_abs_diff < 0.01);
    CHECK(std::fabs(check.prior_mass - check.target_mass) < 0.02);
}

// Layer l's value-output product Σ_h Wv_h^T Wo_h^T (C,C): what the layer adds to x when every
// head attends to itself (out = Σ_h A_h x Wv_h^T Wo_h^T)
static Matrix value_output_product(const Config& c, const std::vector<float>& host, int l) {
    const BlockParams block = block_params(c, param_bind(c, const_cast<float*>(host.data())), l);
    const int AW = c.attention_width();
    const float* wv = block.qkvw + (size_t)2 * AW * c.C;  // (AW,C) value rows, head after head
    Matrix P(c.C, c.C);
    for (int k = 0; k < AW; k++)  // k = h·HS + d: head h's dim d
        for (int i = 0; i < c.C; i++)
            for (int j = 0; j < c.C; j++) P(i, j) += (double)wv[(size_t)k * c.C + i] * block.projw[(size_t)j * AW + k];
    return P;
}

TEST_CASE("the value-output split: Σ_h Wv_h^T Wo_h^T is the layer's one 0.4 Z - 0.4 I, exact when NH·HS >= C") {
    // NH·HS = C, > C, < C; named, not bound (auto [NH, HS]): CAPTURE's lambda cannot take a binding in C++17
    for (const std::pair<int, int>& heads : {std::pair{2, 16}, std::pair{3, 16}, std::pair{1, 16}}) {
        const int NH = heads.first, HS = heads.second;
        Config c;
        c.V = 3; c.T = 4; c.C = 32; c.L = 2; c.NH = NH; c.HS = HS; c.MLP = 8;
        std::vector<float> host(param_count(c));
        Rng rng(6);
        init_default(c, host.data(), rng);
        Rng replay = rng;  // draws M again as set_layer_value_output does
        set_layer_value_output(c, host.data(), 1, rng);
        Matrix M(c.C, c.C);
        const float bound = std::sqrt(3.0f / c.C);
        for (int i = 0; i < c.C; i++)
            for (int j = 0; j < c.C; j++) M(i, j) = 0.4 * replay.uniform(-bound, bound) - (i == j ? 0.4 : 0);
        const Matrix P = value_output_product(c, host, 1);
        CAPTURE(NH);
        double diag = 0;
        for (int i = 0; i < c.C; i++) diag += M(i, i) / c.C;
        CHECK(diag == doctest::Approx(-0.4).epsilon(0.1));
        if (NH * HS >= c.C) {
            CHECK(max_abs_difference(P, M) < 1e-5);
        } else {  // no exact split: M's best rank-NH·HS approximation, off by σ_{NH·HS+1} (Eckart-Young)
            Matrix diff = P;
            for (size_t i = 0; i < diff.a.size(); i++) diff.a[i] -= M.a[i];
            CHECK(svd(diff).S[0] == doctest::Approx(svd(M).S[NH * HS]).epsilon(1e-4));
        }
        CHECK(value_output_product(c, host, 0).a != P.a);  // layer 0 was left at its default
    }
}

TEST_CASE("mimetic: per head Wq^T Wk ≈ 0.7 Z + 0.7 I; per layer Σ_h Wv_h^T Wo_h^T = 0.4 Z' - 0.4 I, full rank") {
    Config c;
    c.V = 3; c.T = 4; c.C = 32; c.L = 2; c.NH = 2; c.HS = 32; c.MLP = 8;  // HS = C: no truncation
    std::vector<float> host(param_count(c));
    Rng rng(6);
    init_default(c, host.data(), rng);
    init_mimetic(c, host.data(), rng);
    ParamTensors p = param_bind(c, host.data());
    const int AW = c.attention_width();
    for (int h = 0; h < c.NH; h++) {
        double qk_diag = 0, qk_off = 0;
        for (int i = 0; i < c.C; i++)
            for (int j = 0; j < c.C; j++) {
                double qk = 0;  // (Wq_h^T Wk_h)_ij
                for (int d = 0; d < c.HS; d++)
                    qk += p.qkvw[(size_t)(h * c.HS + d) * c.C + i] * p.qkvw[(size_t)(AW + h * c.HS + d) * c.C + j];
                if (i == j) qk_diag += qk / c.C;
                else qk_off += qk * qk / (c.C * (c.C - 1));
            }
        CHECK(qk_diag == doctest::Approx(0.7).epsilon(0.1));
        CHECK(std::sqrt(qk_off) == doctest::Approx(0.7 / std::sqrt(32.0)).epsilon(0.15));  // the Z part
    }
    Matrix first;
    for (int l = 0; l < c.L; l++) {
        const Matrix P = value_output_product(c, host, l);
        double diag = 0, off = 0;
        for (int i = 0; i < c.C; i++)
            for (int j = 0; j < c.C; j++) {
                if (i == j) diag += P(i, j) / c.C;
                else off += P(i, j) * P(i, j) / (c.C * (c.C - 1));
            }
        CHECK(diag == doctest::Approx(-0.4).epsilon(0.1));  // one matrix per head, summed, gave -0.4·NH
        CHECK(std::sqrt(off) == doctest::Approx(0.4 / std::sqrt(32.0)).epsilon(0.15));  // the Z part
        const Svd d = svd(P);
        CHECK(d.S[c.C - 1] > 1e-4 * d.S[0]);  // full rank C
        if (l == 0) first = P;
        else CHECK(max_abs_difference(P, first) > 0.1);  // a fresh Z for each layer
    }
}

TEST_CASE("--pe-scale S: wpe times S, every row; S = 1 leaves the buffer as it was") {
    Config c;
    c.channels = 1; c.height = 4; c.width = 4; c.patch = 2;
    c.T = 1 + c.patches(); c.C = 8; c.L = 1; c.NH = 2; c.HS = 4; c.MLP = 8;
    c.readout = READOUT_CLASS; c.OUT = 2;
    std::vector<float> host(param_count(c));
    Rng rng(2);
    init_default(c, host.data(), rng);
    const std::vector<float> drawn = host;
    scale_position_embedding(c, host.data(), 1.0f);
    CHECK(host == drawn);
    scale_position_embedding(c, host.data(), 18.0f);
    const size_t wpe = param_bind(c, host.data()).wpe - host.data(), n = (size_t)c.T * c.C;
    for (size_t i = 0; i < host.size(); i++)
        if (i >= wpe && i < wpe + n) CHECK(host[i] == 18.0f * drawn[i]);
        else CHECK(host[i] == drawn[i]);
}

TEST_CASE("persistence metrics on hand-made cases") {
    // one layer, one head, T = 3, zero QK weights: the attention is the mask's pattern alone
    Config c;
    c.V = 3; c.T = 3; c.C = 4; c.L = 1; c.NH = 1; c.HS = 2; c.MLP = 4; c.mask_heads = 1;
    Model model;
    model_build(model, c, DEVICE_CPU, 2);
    std::vector<float> host(model.num_params);
    Rng rng(3);
    init_default(c, host.data(), rng);
    ParamTensors p = param_bind(c, host.data());
    for (int i = 0; i < c.qkv_width() * c.C; i++) p.qkvw[i] = 0;
    for (int i = 0; i < c.qkv_width(); i++) p.qkvb[i] = 0;
    Structure G = {1, 3, {1, 1, 0, 0, 1, 0, 0, 0, 1}};
    init_mask_from_structure(c, host.data(), G, 2.0f);
    buffer_copy(model.params_mem, DEVICE_CPU, host.data(), DEVICE_CPU, model.num_params);

    // prior mass: a row with k allowed keys of 3 puts k e^2 / (k e^2 + 3 - k) on them
    const double e2 = std::exp(2.0);
    const double by_hand = (2 * e2 / (2 * e2 + 1) + 2 * (e2 / (e2 + 2))) / 3;
    std::vector<int> tokens = {0, 1, 2, 2, 1, 0};
    std::vector<float> y = {0.5f, -0.5f};
    model_forward(model, tokens.data(), y.data(), 2);
    CHECK(attention_prior_mass(model_activations(model, 2).att, G, 2, 1, 3) == doctest::Approx(by_hand));

    // mask drift: every M doubled, so log σ(±2) became log σ(±4)
    PersistenceReference ref = {host, Matrix(3, c.C)};
    for (double& x : ref.E.a) x = rng.uniform(-1, 1);
    for (int i = 0; i < 9; i++) model.params.mask[i] *= 2;
    auto log_sigmoid_of = [](double x) { return -std::log1p(std::exp(-x)); };
    const double up = log_sigmoid_of(4) - log_sigmoid_of(2), down = log_sigmoid_of(-4) - log_sigmoid_of(-2);
    const double drift = std::sqrt((4 * up * up + 5 * down * down) /  // G has 4 ones and 5 zeros
                                   (4 * std::pow(log_sigmoid_of(2), 2) + 5 * std::pow(log_sigmoid_of(-2), 2)));
    // gradients: 0.5 on every mask entry, 1 on every q and k weight and bias, 7 elsewhere
    for (size_t i = 0; i < model.num_params; i++) model.grads_mem[i] = 7;
    for (int i = 0; i < 9; i++) model.grads.mask[i] = 0.5f;
    for (int i = 0; i < 2 * c.attention_width() * c.C; i++) model.grads.qkvw[i] = 1;
    for (int i = 0; i < 2 * c.attention_width(); i++) model.grads.qkvb[i] = 1;
    // QK pattern: with random q, k weights at step 0, the step-t weights Wq·3 (same pattern) or -Wq
    for (float* params : {ref.params0.data(), model.params_mem}) {
        ParamTensors q = param_bind(c, params);
        for (int i = 0; i < 2 * c.attention_width() * c.C; i++) q.qkvw[i] = (float)(i % 5) - 1.5f;
    }
    for (int i = 0; i < c.attention_width() * c.C; i++) model.params.qkvw[i] *= 3;
    Persistence pe = persistence_metrics(model, ref);
    CHECK(pe.mask_drift[0] == doctest::Approx(drift));
    CHECK(pe.grad_norm_mask[0] == doctest::Approx(0.5 * 3));  // sqrt(9 · 0.25)
    CHECK(pe.grad_norm_qk[0] == doctest::Approx(std::sqrt(2.0 * c.attention_width() * c.C + 2 * c.attention_width())));
    CHECK(pe.qk_cosine[0] == doctest::Approx(1.0));
    for (int i = 0; i < c.attention_width() * c.C; i++) model.params.qkvw[i] *= -1;
    CHECK(persistence_metrics(model, ref).qk_cosine[0] == doctest::Approx(-1.0));
    model_free(model);
}

TEST_CASE("the PNG writer makes a decodable picture of the right size and colours") {
    Heatmap h;
    h.T = 4;
    h.grid_rows = 2;
    h.grid_cols = 3;
    for (int k = 0; k < 6 * 16; k++) h.values.push_back((float)(k % 16) / 15);  // 0 .. 1 in each panel
    write_heatmap(TMP_PREFIX + "heatmap.png", h);
    int width = 0, height = 0, channels = 0;
    unsigned char* image = stbi_load((TMP_PREFIX + "heatmap.png").c_str(), &width, &height, &channels, 3);
    REQUIRE(image);
    const int cell = heatmap_cell(4), panel = 4 * cell;  // 64 pixels an entry, 256 a panel
    CHECK(width == 3 * panel + 2 * HEATMAP_GAP);
    CHECK(height == 2 * panel + HEATMAP_GAP);
    auto pixel = [&](int x, int y) {
        const unsigned char* p = image + (y * width + x) * 3;
        return std::vector<int>(p, p + 3);
    };
    CHECK(pixel(0, 0) == std::vector<int>{68, 1, 84});                          // entry (0,0) = 0: viridis' start
    CHECK(pixel(panel - 1, panel - 1) == std::vector<int>{253, 231, 37});        // entry (3,3) = 1: its end
    CHECK(pixel(panel + HEATMAP_GAP / 2, 10) == std::vector<int>{255, 255, 255});  // the gap is white
    stbi_image_free(image);
}
