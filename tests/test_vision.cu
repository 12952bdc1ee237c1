// The image path on the CPU: the patch embedding's layers against finite differences in double
// and by hand, the whole image model's gradient (CLS and mean pooling, label smoothing), the
// vision task (2-D G by hand, normalisation, augmentation as a pure function of the draw), and
// the default init of an image model. Uses test_model.cu's helpers (one translation unit).
#include "test_util.h"
#include "thrown.h"
#include "layers/patch_embedding.cuh"
#include "tasks/vision.h"

TEST_CASE("patchify flattens each patch channel-first, as a Conv2d of stride P reads it") {
    // one image, 2 channels of 4x4, patch 2: pixel value = 100 ch + 10 y + x
    const int channels = 2, H = 4, W = 4, P = 2;
    std::vector<double> pixels(channels * H * W), patches(4 * channels * P * P);
    for (int ch = 0; ch < channels; ch++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) pixels[(ch * H + y) * W + x] = 100 * ch + 10 * y + x;
    patchify_forward_cpu(patches.data(), pixels.data(), 1, channels, H, W, P);
    // patch 1 is row 0, column 1 (pixels x = 2, 3): channel 0's 2x2, then channel 1's
    const std::vector<double> patch1 = {2, 3, 12, 13, 102, 103, 112, 113};
    for (int k = 0; k < 8; k++) CHECK(patches[1 * 8 + k] == patch1[k]);
    // patch 2 is row 1, column 0
    const std::vector<double> patch2 = {20, 21, 30, 31, 120, 121, 130, 131};
    for (int k = 0; k < 8; k++) CHECK(patches[2 * 8 + k] == patch2[k]);
}

TEST_CASE("assemble (CLS, patches, position embedding) backward matches finite differences") {
    const int B = 3, T = 5, C = 4;  // 4 patches
    Rng rng(21);
    auto embedded = random_vector<double>(B * (T - 1) * C, rng), cls = random_vector<double>(C, rng);
    auto wpe = random_vector<double>(T * C, rng), w = random_vector<double>(B * T * C, rng);
    std::vector<double> out(B * T * C), dembedded(embedded.size(), 0), dcls(C, 0), dwpe(T * C, 0);
    auto loss = [&] {
        assemble_forward_cpu(out.data(), embedded.data(), cls.data(), wpe.data(), B, T, C);
        return weighted_sum(out, w);
    };
    loss();
    CHECK(out[(1 * T + 0) * C + 2] == doctest::Approx(cls[2] + wpe[2]));                       // CLS of example 1
    CHECK(out[(2 * T + 3) * C + 1] == doctest::Approx(embedded[(2 * 4 + 2) * C + 1] + wpe[3 * C + 1]));
    assemble_backward_cpu(dembedded.data(), dcls.data(), dwpe.data(), w.data(), B, T, C);
    check_gradient("dembedded", embedded, dembedded, loss);
    check_gradient("dcls", cls, dcls, loss);
    check_gradient("dwpe", wpe, dwpe, loss);
}

TEST_CASE("mean pooling over the patch tokens: by hand, and its backward against finite differences") {
    const int B = 2, T = 4, C = 3;
    Rng rng(22);
    auto x = random_vector<double>(B * T * C, rng), w = random_vector<double>(B * C, rng);
    std::vector<double> out(B * C), dx(B * T * C, 0);
    auto loss = [&] {
        mean_pool_forward_cpu(out.data(), x.data(), B, T, C);
        return weighted_sum(out, w);
    };
    loss();
    CHECK(out[1 * C + 2] == doctest::Approx((x[(4 + 1) * C + 2] + x[(4 + 2) * C + 2] + x[(4 + 3) * C + 2]) / 3));
    mean_pool_backward_cpu(dx.data(), w.data(), B, T, C);
    check_gradient("dx", x, dx, loss);
    CHECK(dx[0] == 0.0);  // CLS is left out
}

// A small image model: 2 channels of 4x6 pixels in patches of 2, so 2x3 patches and T = 7
static Config tiny_image_config(int mask_heads, Pooling pool) {
    Config c;
    c.V = 0; c.T = 7; c.C = 8; c.L = 2; c.NH = 2; c.HS = 3; c.MLP = 10; c.OUT = 4;
    c.readout = READOUT_CLASS;
    c.channels = 2; c.height = 4; c.width = 6; c.patch = 2;
    c.pool = pool;
    c.mask_heads = mask_heads;
    return c;
}

TEST_CASE("whole image model gradient matches finite differences") {
    SUBCASE("CLS readout, shared mask") { check_model_gradient_of(tiny_image_config(1, POOL_CLS)); }
    SUBCASE("mean pooling, per-head mask, label smoothing 0.1") {
        check_model_gradient_of(tiny_image_config(2, POOL_MEAN), 0.1f);
    }
    SUBCASE("CLS readout, no mask, label smoothing 0.1") { check_model_gradient_of(tiny_image_config(0, POOL_CLS), 0.1f); }
}

TEST_CASE("image model default init: patch embedding U(±1/sqrt(channels·P·P)), positions N(0, 0.02²), CLS 0") {
    Config c = tiny_image_config(0, POOL_CLS);
    c.C = 64;
    std::vector<float> host(param_count(c));
    Rng rng(3);
    init_default(c, host.data(), rng);
    const ParamTensors p = param_bind(c, host.data());
    CHECK(p.wte == nullptr);
    const float bound = 1.0f / std::sqrt((float)c.patch_size());
    float biggest = 0;
    for (int i = 0; i < c.C * c.patch_size(); i++) biggest = std::max(biggest, std::fabs(p.patchw[i]));
    CHECK(biggest <= bound);
    CHECK(biggest > 0.8f * bound);
    double sum_sq = 0;
    for (int i = 0; i < c.T * c.C; i++) sum_sq += (double)p.wpe[i] * p.wpe[i];
    CHECK(std::sqrt(sum_sq / (c.T * c.C)) == doctest::Approx(0.02).epsilon(0.15));
    for (int i = 0; i < c.C; i++) CHECK(p.cls[i] == 0.0f);
}

// A vision task on made-up images: 3 classes of 2-channel 4x4 images, patch 2 (2x2 patches)
static ImageData tiny_images(int n_train, int n_test) {
    ImageData data;
    data.classes = 3;
    data.class_names = {"a", "b", "c"};
    for (ImageSet* set : {&data.train, &data.test}) {
        const int n = set == &data.train ? n_train : n_test;
        set->channels = 2;
        set->height = set->width = 4;
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 32; k++) set->pixels.push_back((uint8_t)((i * 37 + k * 11) % 256));
            set->labels.push_back(i % 3);
        }
    }
    return data;
}

TEST_CASE("vision task: 2-D locality G by hand, CLS to and from all") {
    VisionSettings s;
    s.patch = 1;  // 4x4 patches of one pixel: T = 17
    s.window = 3;
    VisionTask task("tiny", tiny_images(3, 3), s);
    REQUIRE(task.seq_len == 17);
    const std::vector<float> G = task.structure();
    auto allowed = [&](int i, int j) { return G[(size_t)i * 17 + j] != 0; };
    for (int t = 0; t < 17; t++) CHECK((allowed(0, t) && allowed(t, 0)));
    // patch (1,1) is token 1 + 5 = 6: it sees rows 0-2, columns 0-2, and nothing at distance 2
    for (int r = 0; r < 4; r++)
        for (int col = 0; col < 4; col++)
            CHECK(allowed(6, 1 + r * 4 + col) == (r <= 2 && col <= 2));
    // corner (3,3), token 16: only (2..3, 2..3)
    int seen = 0;
    for (int j = 1; j < 17; j++) seen += allowed(16, j);
    CHECK(seen == 4);
    s.window = 1;  // itself alone
    VisionTask self("tiny", tiny_images(3, 3), s);
    for (int i = 1; i < 17; i++)
        for (int j = 1; j < 17; j++) CHECK((self.structure()[(size_t)i * 17 + j] != 0) == (i == j));
}

TEST_CASE("vision task: normalised pixels, augmentation a pure function of the draw, evaluation unaugmented") {
    VisionSettings s;
    s.patch = 2;
    s.pad = 1;
    VisionTask task("tiny", tiny_images(30, 6), s);
    CHECK(task.seq_len == 5);
    CHECK(task.outputs == 3);
    // mean 0 and std 1 per channel over the (unaugmented) training set
    std::vector<float> px(32), sum(2, 0), sum_sq(2, 0);
    float y;
    for (int i = 0; i < 30; i++) {
        task.normalised(task.data.train, i, px.data());
        for (int k = 0; k < 32; k++) sum[k / 16] += px[k], sum_sq[k / 16] += px[k] * px[k];
    }
    for (int ch = 0; ch < 2; ch++) {
        CHECK(sum[ch] / 480 == doctest::Approx(0).epsilon(1e-5).scale(1));
        CHECK(sum_sq[ch] / 480 == doctest::Approx(1).epsilon(1e-4));
    }
    std::vector<float> a(32), b(32), c(32);
    task.train_example(7, 12345, {nullptr, a.data(), &y});
    task.train_example(7, 12345, {nullptr, b.data(), &y});
    CHECK(a == b);
    CHECK(y == 1.0f);  // image 7 is class 7 % 3
    int differs = 0;
    for (uint64_t draw = 1; draw < 20; draw++) {
        task.train_example(7, draw, {nullptr, c.data(), &y});
        differs += c != a;
    }
    CHECK(differs >= 10);  // 18 crops and a flip: most draws move the image
    task.eval_example(2, {nullptr, c.data(), &y});
    task.normalised(task.data.test, 2, a.data());
    CHECK(c == a);
}

TEST_CASE("vision task: the top-1 scorer counts as it goes; a patch that does not divide the image is refused, "
          "and so are test images of another shape") {
    VisionSettings s;
    s.patch = 2;
    VisionTask task("tiny", tiny_images(3, 4), s);  // test labels 0 1 2 0
    std::unique_ptr<Scorer> scorer = task.scorer();
    const float first[] = {5, 1, 1, 0, 0, 9};      // examples 0, 1: argmax 0 (right), 2 (wrong)
    const float second[] = {0, 0, 1, 2, 2, 1};     // examples 2, 3: argmax 2 (right), 0: first of equals (right)
    scorer->add(0, 2, first);
    scorer->add(2, 2, second);
    CHECK(scorer->metrics()[0].first == "acc");
    CHECK(scorer->metrics()[0].second == doctest::Approx(0.75));
    s.patch = 3;
    CHECK(message_of<std::runtime_error>([&] { VisionTask("tiny", tiny_images(3, 3), s); })
              .find("does not divide") != std::string::npos);
    ImageData other_sizes = tiny_images(3, 3);
    other_sizes.test.height = other_sizes.test.width = 2;  // 2x2x2 images, 4 of them in the same bytes
    s.patch = 2;
    CHECK(message_of<std::runtime_error>([&] { VisionTask("tiny", other_sizes, s); })
              .find("the test images are 2x2x2, the training images 2x4x4") != std::string::npos);
}
