// The whole model: gradient check against finite differences, bit-reproducibility, a short
// CPU training run that must learn, and the mask init.
#include <cstring>
#include <set>
#include "test_util.h"
#include "prior/init.cuh"
#include "run/step.cuh"  // model_update, model_adamw_groups
#include "tasks/boolean.h"

static Config tiny_config(int mask_heads, bool causal, ReadoutType readout = READOUT_REGRESSION,
                          Encoding encoding = ENCODING_TOKEN, LossType loss = LOSS_MSE) {
    Config c;
    c.V = 3; c.T = 6; c.C = 8; c.L = 2; c.NH = 2; c.HS = 3; c.MLP = 10;
    c.OUT = readout == READOUT_REGRESSION ? 1 : readout == READOUT_CLASS ? 4 : c.V;
    c.readout = readout;
    c.mask_heads = mask_heads;
    c.causal = causal;
    c.encoding = encoding;
    if (encoding == ENCODING_SCALAR) c.token_value = {-1.5f, 0.75f, 0.0f};  // token 2 has no value
    c.loss = loss;
    return c;
}

// Random tokens, and targets: values in [-1, 1) for regression (their sign, ±1, for the
// logistic loss), class ids for classification, a token id per position for the next-token
// readout, whose loss mask then counts a random half of the positions (loss_mask; else empty).
static void random_batch(const Config& c, int B, Rng& rng, std::vector<int>& tokens, std::vector<float>& y,
                         std::vector<float>* loss_mask = nullptr) {
    tokens.resize(c.image_input() ? 0 : (size_t)B * c.T);
    y.resize((size_t)B * c.readout_rows());
    for (auto& t : tokens) t = rng.below(c.V);
    for (auto& v : y) {
        v = c.readout == READOUT_REGRESSION ? rng.uniform(-1, 1) : (float)rng.below(c.OUT);
        if (c.loss == LOSS_LOGISTIC) v = v > 0 ? 1.0f : -1.0f;
    }
    if (!loss_mask) return;
    loss_mask->clear();
    if (c.readout != READOUT_NEXT_TOKEN) return;
    for (size_t r = 0; r < y.size(); r++) loss_mask->push_back((float)rng.below(2));
    (*loss_mask)[1] = 1.0f;  // at least one position counts
}

static void init_model(Model& model, uint64_t seed, float mask_scale) {
    std::vector<float> host(model.num_params);
    Rng rng(seed);
    init_default(model.cfg, host.data(), rng);
    if (model.cfg.image_input()) {  // CLS 0 and positions of 0.02 would make CLS's LayerNorm input tiny and
                                    // its finite differences inexact: rows of size 1 instead
        ParamTensors p = param_bind(model.cfg, host.data());
        for (int i = 0; i < model.cfg.C; i++) p.cls[i] = rng.uniform(-1, 1);
        for (int i = 0; i < model.cfg.T * model.cfg.C; i++) p.wpe[i] = rng.uniform(-1, 1);
    }
    if (model.cfg.mask_heads) {  // a random mask, so its gradient is not scaled to nothing
        float* mask = param_bind(model.cfg, host.data()).mask;
        for (int i = 0; i < model.cfg.prior_layer_count() * model.cfg.mask_heads * model.cfg.T * model.cfg.T; i++)
            mask[i] = rng.uniform(-mask_scale, mask_scale);
    }
    buffer_copy(model.params_mem, model.dev, host.data(), DEVICE_CPU, model.num_params);
}

// The model runs in float, so the central difference uses a larger step; the layer-level checks
// in double (test_layers, test_attention) are the tight ones, and torch_reference.py checks this
// same backward against PyTorch's autograd.
// c: any config, token or image (random pixels in [-1, 1)); label_smoothing for the class readouts.
static void check_model_gradient_of(const Config& c, float label_smoothing = 0.0f) {
    const int B = 4;
    Model model;
    model_build(model, c, DEVICE_CPU, B);
    model.label_smoothing = label_smoothing;
    init_model(model, 11, 2.0f);
    Rng rng(12);
    std::vector<int> tokens;
    std::vector<float> y, loss_mask;
    random_batch(c, B, rng, tokens, y, &loss_mask);
    const std::vector<float> pixels = random_vector<float>(c.image_input() ? (size_t)B * c.image_size() : 0, rng);
    const ModelInput input = c.image_input() ? ModelInput(pixels.data()) : ModelInput(tokens.data());
    const float* mask = loss_mask.empty() ? nullptr : loss_mask.data();
    model_forward(model, input, y.data(), B, mask);
    model_zero_grad(model);
    model_backward(model, B);
    std::vector<float> grads(model.num_params);
    buffer_copy(grads.data(), DEVICE_CPU, model.grads_mem, DEVICE_CPU, model.num_params);
    const float h = 1e-2f;
    int checked = 0;
    for (size_t i = 0; i < model.num_params; i += 3) {  // every third parameter, all tensors
        float keep = model.params_mem[i];
        model.params_mem[i] = keep + h;
        double up = model_forward(model, input, y.data(), B, mask);
        model.params_mem[i] = keep - h;
        double down = model_forward(model, input, y.data(), B, mask);
        model.params_mem[i] = keep;
        double numeric = (up - down) / (2 * h);
        REQUIRE(std::isfinite(grads[i]));
        CHECK_MESSAGE(std::fabs(numeric - grads[i]) <= 2e-3 + 2e-2 * std::fabs(numeric),
                      "parameter " << i << ": analytic " << grads[i] << " numeric " << numeric);
        checked++;
    }
    CHECK(checked > 100);
    model_free(model);
}

static void check_model_gradient(int mask_heads, bool causal, ReadoutType readout = READOUT_REGRESSION,
                                 Encoding encoding = ENCODING_TOKEN, LossType loss = LOSS_MSE,
                                 PriorLayers prior_layers = PRIOR_ALL_LAYERS) {
    Config c = tiny_config(mask_heads, causal, readout, encoding, loss);
    c.prior_layers = prior_layers;
    check_model_gradient_of(c);
}

TEST_CASE("whole-model gradient matches finite differences") {
    SUBCASE("no mask") { check_model_gradient(0, false); }
    SUBCASE("shared mask") { check_model_gradient(1, false); }
    SUBCASE("per-head mask, causal") { check_model_gradient(2, true); }
    SUBCASE("classification readout (cross-entropy), shared mask") { check_model_gradient(1, false, READOUT_CLASS); }
    SUBCASE("next-token readout (causal decoder, loss mask), per-head mask") {
        check_model_gradient(2, true, READOUT_NEXT_TOKEN);
    }
    SUBCASE("next-token readout, shared mask in the first layer only") {
        check_model_gradient(1, true, READOUT_NEXT_TOKEN, ENCODING_TOKEN, LOSS_MSE, PRIOR_FIRST_LAYER);
    }
    SUBCASE("mask in the first layer only") {
        check_model_gradient(1, false, READOUT_REGRESSION, ENCODING_TOKEN, LOSS_MSE, PRIOR_FIRST_LAYER);
    }
    SUBCASE("scalar encoding, logistic loss, shared mask") {
        check_model_gradient(1, false, READOUT_REGRESSION, ENCODING_SCALAR, LOSS_LOGISTIC);
    }
    SUBCASE("scalar encoding, MSE, no mask, causal") {
        check_model_gradient(0, true, READOUT_REGRESSION, ENCODING_SCALAR, LOSS_MSE);
    }
}

TEST_CASE("scalar encoding: wval is drawn last, valued tokens' wte rows start at 0 and stay 0") {
    Config token = tiny_config(1, false), scalar = tiny_config(1, false, READOUT_REGRESSION, ENCODING_SCALAR);
    REQUIRE(param_count(scalar) == param_count(token) + scalar.C);
    std::vector<float> a(param_count(token)), b(param_count(scalar));
    Rng r1(4), r2(4);
    init_default(token, a.data(), r1);
    init_default(scalar, b.data(), r2);
    ParamTensors pa = param_bind(token, a.data()), pb = param_bind(scalar, b.data());
    CHECK(pa.wval == nullptr);
    for (int i = 0; i < 2 * scalar.C; i++) CHECK(pb.wte[i] == 0.0f);          // tokens 0 and 1 have values
    for (int i = 2 * scalar.C; i < 3 * scalar.C; i++) CHECK(pb.wte[i] == pa.wte[i]);  // token 2 has none
    for (size_t i = pa.wpe - a.data(); i < a.size(); i++)  // every other weight: the same for one seed
        REQUIRE(a[i] == b[i + scalar.C]);
    CHECK(pb.wval[0] != 0.0f);

    for (bool decoupled : {true, false}) {  // AdamW and Adam with L2: zero gradient, zero weight, no step
        Model model;
        model_build(model, scalar, DEVICE_CPU, 8);
        model.adam.decoupled = decoupled;
        init_model(model, 21, 3.0f);
        Rng rng(22);
        std::vector<int> tokens;
        std::vector<float> y;
        for (int step = 0; step < 5; step++) {
            random_batch(scalar, 8, rng, tokens, y);
            model_forward(model, tokens.data(), y.data(), 8);
            model_zero_grad(model);
            model_backward(model, 8);
            model_update(model);
        }
        for (int i = 0; i < 2 * scalar.C; i++) CHECK(model.params.wte[i] == 0.0f);
        CHECK(model.params.wte[2 * scalar.C] != 0.0f);
        model_free(model);
    }
}

TEST_CASE("the mask init writes +c on G and -c elsewhere, in every layer, and nothing else changes") {
    Config c = tiny_config(2, false);
    Structure G = {1, c.T, std::vector<float>(c.T * c.T, 0.0f)};
    G.g[0] = G.g[7] = 1;
    std::vector<float> plain(param_count(c)), masked(param_count(c));
    Rng r1(5), r2(5);
    init_default(c, plain.data(), r1);
    init_default(c, masked.data(), r2);
    init_mask_from_structure(c, masked.data(), G, 6.0f);
    ParamTensors p = param_bind(c, masked.data());
    for (int lh = 0; lh < c.L * c.mask_heads; lh++)
        for (int ij = 0; ij < c.T * c.T; ij++) CHECK(p.mask[lh * c.T * c.T + ij] == (G.g[ij] ? 6.0f : -6.0f));
    size_t mask_begin = p.mask - masked.data(), mask_end = mask_begin + c.L * c.mask_heads * c.T * c.T;
    for (size_t i = 0; i < plain.size(); i++)
        if (i < mask_begin || i >= mask_end) REQUIRE(plain[i] == masked[i]);
}

TEST_CASE("default init: embeddings ~ N(0,1), Linear ~ U(±1/sqrt(fan_in)), LayerNorm 1 and 0") {
    Config c = tiny_config(0, false);
    c.C = 64; c.MLP = 128; c.V = 50;
    std::vector<float> host(param_count(c));
    Rng rng(3);
    init_default(c, host.data(), rng);
    ParamTensors p = param_bind(c, host.data());
    double sum = 0, sq = 0;
    for (int i = 0; i < c.V * c.C; i++) { sum += p.wte[i]; sq += p.wte[i] * p.wte[i]; }
    CHECK(std::fabs(sum / (c.V * c.C)) < 0.1);
    CHECK(sq / (c.V * c.C) == doctest::Approx(1.0).epsilon(0.1));
    float bound = 1 / std::sqrt((float)c.MLP), biggest = 0;
    for (int i = 0; i < c.L * c.C * c.MLP; i++) biggest = std::max(biggest, std::fabs(p.mlp_projw[i]));
    CHECK(biggest <= bound);
    CHECK(biggest > 0.9f * bound);
    CHECK(p.ln1w[0] == 1.0f);
    CHECK(p.ln2b[c.C - 1] == 0.0f);
}

// The parameters after `steps` training steps of a model of config c on random batches of B
// rows, the init drawn from `seed` and the batches from seed + 1.
static std::vector<float> trained_params(const Config& c, int B, int steps, uint64_t seed) {
    Model model;
    model_build(model, c, DEVICE_CPU, B);
    init_model(model, seed, 3.0f);
    Rng rng(seed + 1);
    std::vector<int> tokens;
    std::vector<float> y;
    for (int step = 0; step < steps; step++) {
        random_batch(c, B, rng, tokens, y);
        model_forward(model, tokens.data(), y.data(), B);
        model_zero_grad(model);
        model_backward(model, B);
        model_update(model);
    }
    std::vector<float> params(model.params_mem, model.params_mem + model.num_params);
    model_free(model);
    return params;
}

TEST_CASE("two CPU runs from one seed are bit-identical") {
    Config c = tiny_config(1, false);
    std::vector<float> result[2];
    for (int run = 0; run < 2; run++) result[run] = trained_params(c, 8, 5, 21);
    CHECK(memcmp(result[0].data(), result[1].data(), result[0].size() * sizeof(float)) == 0);
}

TEST_CASE("a model wide enough to use the threads trains to the same bits at 1 and at 2 threads") {
    Config c = tiny_config(1, false);
    c.T = 16; c.C = 128; c.NH = 4; c.HS = 32; c.MLP = 512;  // its matmuls pass worth_threads
    const int B = 64;
    REQUIRE(worth_threads((size_t)B * c.T * c.C * c.qkv_width()));
    std::vector<float> result[2];
#ifdef _OPENMP
    const int keep = omp_get_max_threads();
#endif
    for (int run = 0; run < 2; run++) {
#ifdef _OPENMP
        omp_set_num_threads(run + 1);
#endif
        result[run] = trained_params(c, B, 2, 23);
    }
#ifdef _OPENMP
    omp_set_num_threads(keep);
#endif
    CHECK(memcmp(result[0].data(), result[1].data(), result[0].size() * sizeof(float)) == 0);
}

TEST_CASE("a short CPU training run on maj3 fits the seen domain") {
    BooleanTask task("maj3");
    Config c;
    c.V = task.vocab; c.T = task.seq_len; c.C = 16; c.L = 1; c.NH = 2; c.HS = 8; c.MLP = 16;
    const int B = 32;
    Model model;
    model_build(model, c, DEVICE_CPU, B);
    init_model(model, 1, 0);
    EpochOrder order(1, task.train_size());
    std::vector<int> tokens((size_t)B * c.T);
    std::vector<float> y(B);
    double first = 0, last = 0;
    for (int step = 0; step < 400; step++) {
        for (int b = 0; b < B; b++)
            task.train_example(order.example((int64_t)step * B + b), 0, token_slot(&tokens[b * c.T], &y[b]));
        float loss = model_forward(model, tokens.data(), y.data(), B);
        REQUIRE(std::isfinite(loss));
        if (step < 20) first += loss / 20;
        if (step >= 380) last += loss / 20;
        model_zero_grad(model);
        model_backward(model, B);
        model_update(model);
    }
    MESSAGE("mean loss over the first 20 steps " << first << ", over the last 20 " << last);
    CHECK(first > 0.5);
    CHECK(last < 0.1 * first);
    model_free(model);
}

TEST_CASE("model_backward refuses to run after a forward pass without targets, or on other rows") {
    Config c = tiny_config(1, false);
    Model model;
    model_build(model, c, DEVICE_CPU, 4);
    init_model(model, 5, 1.0f);
    Rng rng(6);
    std::vector<int> tokens;
    std::vector<float> y;
    random_batch(c, 4, rng, tokens, y);
    CHECK_THROWS_AS(model_backward(model, 4), std::logic_error);  // no forward pass yet
    model_forward(model, tokens.data(), y.data(), 4);
    CHECK_THROWS_AS(model_backward(model, 3), std::logic_error);  // the loss is of 4 rows
    model_forward(model, tokens.data(), nullptr, 4);              // outputs only: the loss is gone
    CHECK_THROWS_WITH_AS(model_backward(model, 4), doctest::Contains("had no targets"), std::logic_error);
    model_forward(model, tokens.data(), y.data(), 4);
    CHECK_NOTHROW(model_backward(model, 4));
    CHECK_THROWS_AS(model_forward(model, tokens.data(), y.data(), 5), std::logic_error);  // the buffers hold 4
    model_forward(model, tokens.data(), y.data(), 4, nullptr, true);  // the last block on the readout's row
    CHECK_THROWS_WITH_AS(model_backward(model, 4), doctest::Contains("readout's row only"), std::logic_error);
    model_free(model);
}

TEST_CASE("the readout-row forward (evaluation) gives the full forward's outputs, loss and attention, bit for bit") {
    for (bool causal : {false, true}) {
        for (ReadoutType readout : {READOUT_REGRESSION, READOUT_CLASS}) {
            CAPTURE(causal); CAPTURE(readout);
            Config c = tiny_config(1, causal, readout);
            Model model;
            model_build(model, c, DEVICE_CPU, 5);
            init_model(model, 8, 2.0f);
            Rng rng(9);
            std::vector<int> tokens;
            std::vector<float> y;
            random_batch(c, 5, rng, tokens, y);
            auto outputs = [&](bool readout_row_only, float* loss) {
                *loss = model_forward(model, tokens.data(), y.data(), 5, nullptr, readout_row_only);
                const Activations a = model_activations(model, 5);
                std::vector<float> out((size_t)5 * c.OUT), att((size_t)c.L * 5 * c.NH * c.T * c.T);
                buffer_copy(out.data(), DEVICE_CPU, a.logits, DEVICE_CPU, out.size());
                buffer_copy(att.data(), DEVICE_CPU, a.att, DEVICE_CPU, att.size());
                out.insert(out.end(), att.begin(), att.end());
                return out;
            };
            float loss_full = 0, loss_head = 0;
            const std::vector<float> full = outputs(false, &loss_full), head_only = outputs(true, &loss_head);
            CHECK(std::memcmp(&loss_full, &loss_head, sizeof(float)) == 0);
            REQUIRE(full.size() == head_only.size());
            CHECK(std::memcmp(full.data(), head_only.data(), full.size() * sizeof(float)) == 0);
            model_free(model);
        }
    }
}

TEST_CASE("weight decay: every weight but the mask (GOTU's), or the weight matrices alone (timm, nanoGPT)") {
    Config c;
    c.V = 0; c.C = 8; c.L = 2; c.NH = 2; c.HS = 4; c.MLP = 16; c.OUT = 3; c.readout = READOUT_CLASS;
    c.channels = 1; c.height = 4; c.width = 4; c.patch = 2; c.T = 1 + 4; c.mask_heads = 1;
    Model model;
    ModelOwner owner{model};
    model_build(model, c, DEVICE_CPU, 2);
    model.weight_decay = 0.05f;
    model.mask_weight_decay = 0.25f;
    const std::set<std::string> matrices = {"patch.weight", "h.%d.attn.qkv.weight", "h.%d.attn.proj.weight",
                                            "h.%d.mlp.fc.weight", "h.%d.mlp.proj.weight", "head.weight"};
    for (bool matrices_only : {false, true}) {
        CAPTURE(matrices_only);
        model.decay_matrices_only = matrices_only;
        const AdamWGroups groups = model_adamw_groups(model);
        for (const TensorInfo& info : model.layout) {
            if (info.numel == 0) continue;
            CAPTURE(info.name);
            const size_t at = (size_t)(model.params.*info.field - model.params_mem);
            float decay = -1;
            for (int g = 0; g < groups.count; g++)
                if (at >= groups.group[g].begin && at < groups.group[g].end) decay = groups.group[g].weight_decay;
            const bool mask = info.field == &ParamTensors::mask;
            CHECK(decay == (mask ? 0.25f : !matrices_only || matrices.count(info.name) ? 0.05f : 0.0f));
        }
    }
}
