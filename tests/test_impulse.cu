// The impulse init (prior/impulse.cuh): each head's offset on the patch grid, the attention its
// query and key weights give the patch tokens at step 0 (with a negative control: Wq and Wk
// swapped attend to the mirror offset), the weights' norms, the layer's one value-output matrix,
// the position scale that lets the offsets show through the patches' content, its own structure
// for the step-0 check, and its refusal of a token model. Uses test_init.cu's value_output_product
// (one translation unit).
#include "test_util.h"
#include "thrown.h"
#include "prior/impulse.cuh"

// A small ViT: a 1x8x8 image in 2x2 patches, a 4x4 grid, N = 16 patch tokens, T = 17.
static Config impulse_test_config() {
    Config c;
    c.channels = 1; c.height = 8; c.width = 8; c.patch = 2;
    c.T = 1 + c.patches(); c.C = 32; c.L = 2; c.NH = 3; c.HS = 16; c.MLP = 32;
    c.readout = READOUT_CLASS; c.OUT = 10;
    return c;
}

// The default init, with wpe ~ N(0, 0.02²) as the vision default draws it, then the impulse init.
static std::vector<float> impulse_test_params(const Config& c, uint64_t seed) {
    std::vector<float> host(param_count(c));
    Rng rng(seed);
    init_default(c, host.data(), rng);
    float* wpe = param_bind(c, host.data()).wpe;
    for (int i = 0; i < c.T * c.C; i++) wpe[i] = 0.02f * rng.normal();
    init_impulse(c, host.data(), rng);
    return host;
}

// Head h's query rows (or key rows) of layer l as a matrix (HS,C).
static Matrix impulse_head_rows(const Config& c, const std::vector<float>& host, int l, int h, bool key) {
    const float* w = block_params(c, param_bind(c, const_cast<float*>(host.data())), l).qkvw;  // (3·NH·HS,C)
    Matrix rows(c.HS, c.C);
    for (int d = 0; d < c.HS; d++)
        for (int i = 0; i < c.C; i++)
            rows(d, i) = w[(size_t)((key ? c.attention_width() : 0) + h * c.HS + d) * c.C + i];
    return rows;
}

// The mean attention mass that patch queries put on the key at offset (m, n), over the queries
// whose key is inside the grid: A = softmax_rows(Pe Wq^T Wk Pe^T / sqrt(HS)) over the N patch
// tokens, Pe the rows 1..N of the model's own ln1(wpe) (position_rows, ln1 = 1, 0 here).
static double impulse_offset_mass(const Config& c, const std::vector<float>& host, const Matrix& Wq,
                                  const Matrix& Wk, int m, int n) {
    const int N = c.patches(), rows = c.patch_rows(), cols = c.patch_cols();
    const Matrix E = position_rows(c, host);  // (T,C)
    Matrix Pe(N, c.C);
    for (int p = 0; p < N; p++)
        for (int i = 0; i < c.C; i++) Pe(p, i) = E(1 + p, i);
    const Matrix q = multiply(Pe, transpose(Wq)), k = multiply(Pe, transpose(Wk));  // (N,HS)
    const Matrix S = multiply(q, transpose(k));                                     // (N,N) before 1/sqrt(HS)
    double mass = 0;
    int counted = 0;
    for (int p = 0; p < N; p++) {
        const int r = p / cols + m, col = p % cols + n;
        if (r < 0 || r >= rows || col < 0 || col >= cols) continue;
        double biggest = S(p, 0), sum = 0;
        for (int key = 0; key < N; key++) biggest = std::max(biggest, S(p, key));
        for (int key = 0; key < N; key++) sum += std::exp((S(p, key) - biggest) / std::sqrt((double)c.HS));
        mass += std::exp((S(p, r * cols + col) - biggest) / std::sqrt((double)c.HS)) / sum;
        counted++;
    }
    return mass / counted;
}

TEST_CASE("impulse: head h takes the 3x3 kernel's entries in the order 4 1 5 3 7 0 2 6 8") {
    const std::pair<int, int> expected[9] = {{0, 0},  {-1, 0}, {0, 1},  {0, -1}, {1, 0},
                                             {-1, -1}, {-1, 1}, {1, -1}, {1, 1}};
    for (int h = 0; h < 9; h++) CHECK(impulse_offset(h) == expected[h]);
    CHECK(impulse_offset(9) == impulse_offset(0));
    CHECK(impulse_offset(13) == impulse_offset(4));
}

TEST_CASE("impulse: each head's patch queries attend to the patch at its offset, not the mirror one") {
    const Config c = impulse_test_config();
    const std::vector<float> host = impulse_test_params(c, 3);
    for (int l = 0; l < c.L; l++)
        for (int h = 0; h < c.NH; h++) {
            const int m = impulse_offset(h).first, n = impulse_offset(h).second;
            const Matrix Wq = impulse_head_rows(c, host, l, h, false), Wk = impulse_head_rows(c, host, l, h, true);
            const double target = impulse_offset_mass(c, host, Wq, Wk, m, n);
            const double mirror = impulse_offset_mass(c, host, Wq, Wk, -m, -n);
            const double swapped = impulse_offset_mass(c, host, Wk, Wq, m, n);  // Wq, Wk exchanged
            INFO("layer " << l << " head " << h << " offset (" << m << "," << n << "): mass on target " << target
                             << ", on mirror " << mirror << "; Wq, Wk swapped: on target " << swapped);
            CHECK(target >= 0.9);
            if (h == 0) continue;  // the centre is its own mirror
            CHECK(mirror < 0.05);
            CHECK(swapped < 0.05);  // the negative control: the transposed pattern fails the test above
        }
}

TEST_CASE("impulse: every head's query and key rows have Frobenius norm 7, their biases 0") {
    const Config c = impulse_test_config();
    const std::vector<float> host = impulse_test_params(c, 5);
    const ParamTensors p = param_bind(c, const_cast<float*>(host.data()));
    for (int l = 0; l < c.L; l++)
        for (int h = 0; h < c.NH; h++)
            for (bool key : {false, true}) {
                double norm = 0;
                for (double x : impulse_head_rows(c, host, l, h, key).a) norm += x * x;
                CHECK(std::sqrt(norm) == doctest::Approx(7.0).epsilon(1e-4));
            }
    for (int l = 0; l < c.L; l++)
        for (int o = 0; o < 2 * c.attention_width(); o++) CHECK(p.qkvb[(size_t)l * c.qkv_width() + o] == 0.0f);
}

TEST_CASE("impulse: each layer's Σ_h Wv_h^T Wo_h^T is one full-rank 0.4 Z - 0.4 I") {
    const Config c = impulse_test_config();  // NH·HS = 48 >= C = 32: the split is exact
    const std::vector<float> host = impulse_test_params(c, 5);
    for (int l = 0; l < c.L; l++) {
        const Matrix P = value_output_product(c, host, l);
        double diag = 0;
        for (int i = 0; i < c.C; i++) diag += P(i, i) / c.C;
        CHECK(diag == doctest::Approx(-0.4).epsilon(0.1));  // a matrix per head, cut to rank HS: about -0.7
        const Svd d = svd(P);
        CHECK(d.S[c.C - 1] > 1e-4 * d.S[0]);
    }
}

TEST_CASE("impulse: its own structure is each head's offset, patch queries only") {
    const Config c = impulse_test_config();  // a 4x4 grid, T = 17
    const Structure G = impulse_structure(c);
    REQUIRE(G.heads == c.NH);
    for (int h = 0; h < c.NH; h++) {
        const auto [m, n] = impulse_offset(h);
        int keys = 0;
        for (int ij = 0; ij < c.T * c.T; ij++) keys += G.head(h)[ij] != 0;
        CHECK(keys == (4 - std::abs(m)) * (4 - std::abs(n)));  // the patches whose offset stays on the grid
        for (int j = 0; j < c.T; j++) CHECK(G.head(h)[j] + G.head(h)[j * c.T] == 0.0f);  // CLS: no row, no column
    }
    CHECK(G.head(1)[(1 + 4) * c.T + 1] == 1.0f);  // head 1, offset (-1, 0): patch (1, 0) sees patch (0, 0)
}

TEST_CASE("impulse: fitted on wpe x18 and kept, the heads' offsets show through the patches' content") {
    Config c = impulse_test_config();
    c.channels = 3; c.height = 16; c.width = 16; c.patch = 4;  // a 4x4 grid again, content of 48 > C pixels
    const int B = 16;
    Rng pixel_rng(11);
    std::vector<float> pixels((size_t)B * c.image_size());  // normalised pixels: the content
    for (float& x : pixels) x = pixel_rng.normal();
    Structure shifted = impulse_structure(c);  // the heads with an offset: head 0's (the centre) emptied
    std::fill(shifted.g.begin(), shifted.g.begin() + c.T * c.T, 0.0f);
    double mass[2];
    for (int k = 0; k < 2; k++) {
        const float S = k == 0 ? 1.0f : 18.0f;
        std::vector<float> host(param_count(c));
        Rng rng(3);
        init_default(c, host.data(), rng);  // wpe ~ N(0, 0.02²)
        scale_position_embedding(c, host.data(), S);
        const std::vector<float> scaled = host;
        init_impulse(c, host.data(), rng);
        const ParamTensors p = param_bind(c, host.data()), q = param_bind(c, const_cast<float*>(scaled.data()));
        CHECK(std::equal(p.wpe, p.wpe + c.T * c.C, q.wpe));  // kept: the fit does not undo the scale
        double sum_sq = 0;
        for (int i = 0; i < c.T * c.C; i++) sum_sq += (double)p.wpe[i] * p.wpe[i];
        CHECK(std::sqrt(sum_sq / (c.T * c.C)) == doctest::Approx(0.02 * S).epsilon(0.15));
        Model model;
        model_build(model, c, DEVICE_CPU, B);
        buffer_copy(model.params_mem, DEVICE_CPU, host.data(), DEVICE_CPU, model.num_params);
        mass[k] = init_check(model, pixels.data(), B, shifted, 6.0f, &shifted).own_mass;
        model_free(model);
    }
    MESSAGE("layer 0's shifted heads' mass on their offsets: wpe x1 " << mass[0] << ", x18 " << mass[1]);
    CHECK(mass[1] > 0.25);  // 0.36 here; unscaled the content picks the keys: 0.07
    CHECK(mass[1] > 3 * mass[0]);
}

TEST_CASE("impulse: a token model is refused") {
    Config c;  // the default: a token model, patch 0
    std::vector<float> host(param_count(c));
    Rng rng(1);
    init_default(c, host.data(), rng);
    CHECK(message_of<InputError>([&] { init_impulse(c, host.data(), rng); }).find("images") != std::string::npos);
}
