// Mixup and cutmix (recipe/mix.h) and the soft-target cross-entropy they train with (layers/loss.cuh):
// the pixels and targets of a 4-row batch by hand, cutmix's box and corrected λ, the Gamma and
// Beta samplers' moments over many keys, the coins' frequencies, the mixed loss by hand and its
// gradient by finite differences in double, the training batch of a vision task mixed as drawn;
// and on the command line: the flags' checks, a short mixed run that learns, and resumes (--resume,
// and a run killed and continued) that end bit-identical to the uninterrupted run. Uses
// test_cli.cu's and test_cli_vision.cu's helpers (one translation unit).
#include "test_util.h"
#include "layers/loss.cuh"
#include "run/safetensors.h"
#include "tasks/batch.h"
#include "recipe/mix.h"
#include "tasks/vision.h"

TEST_CASE("mixup: a 4-row batch with λ = 0.25 mixes each row with its mirror row, pixels and targets") {
    const ImageShape shape{1, 2, 1};  // one channel of 2x1 pixels
    std::vector<float> pixels = {1, 2, 10, 20, 100, 200, 1000, 2000}, targets = {0, 1, 2, 3}, mix(8, -1.0f);
    MixDraw d;
    d.mixed = true;
    d.lambda = 0.25f;
    mix_batch(d, shape, 4, pixels.data(), targets.data(), mix.data());
    // row 0 with row 3: 0.25 x0 + 0.75 x3; row 3 with row 0: 0.25 x3 + 0.75 x0; rows 1 and 2 alike
    const std::vector<float> want = {750.25f, 1500.5f, 77.5f, 155.0f, 32.5f, 65.0f, 250.75f, 501.5f};
    for (int k = 0; k < 8; k++) CHECK(pixels[k] == want[k]);
    const std::vector<float> want_mix = {3, 0.25f, 2, 0.25f, 1, 0.25f, 0, 0.25f};  // (the mirror's class, λ)
    CHECK(mix == want_mix);
    CHECK(targets == std::vector<float>({0, 1, 2, 3}));  // a row's own class stays its target
}

TEST_CASE("cutmix: rows trade the box, an odd batch's middle row keeps its own, and the box follows timm's rule") {
    const ImageShape shape{2, 3, 4};  // 2 channels of 3x4
    const int rows = 3, floats = shape.floats();
    std::vector<float> pixels(rows * floats), targets = {4, 5, 6}, mix(6);
    for (int i = 0; i < rows * floats; i++) pixels[i] = (float)i;
    const std::vector<float> before = pixels;
    MixDraw d;
    d.mixed = d.cutmix = true;
    d.top = 1, d.bottom = 3, d.left = 0, d.right = 2;  // rows 1-2, columns 0-1
    d.lambda = 1 - 4.0f / 12;
    mix_batch(d, shape, rows, pixels.data(), targets.data(), mix.data());
    for (int b = 0; b < rows; b++)
        for (int c = 0; c < 2; c++)
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 4; x++) {
                    const bool in_box = y >= 1 && y < 3 && x < 2;
                    const int source = in_box ? rows - 1 - b : b, at = (c * 3 + y) * 4 + x;
                    CHECK(pixels[b * floats + at] == before[source * floats + at]);
                }
    CHECK(mix == std::vector<float>({6, d.lambda, 5, d.lambda, 4, d.lambda}));

    // the box of a draw λ on an 8x8 image: sides floor(8 sqrt(1 - λ)) = 4 about a uniform centre,
    // clipped; λ corrected to the image's share outside the box
    std::vector<int> centre_count(64, 0);
    for (uint64_t key = 0; key < 6400; key++) {
        MixDraw box;
        cutmix_box(box, 0.75, 8, 8, key);
        REQUIRE((box.top >= 0 && box.top <= box.bottom && box.bottom <= 8));
        REQUIRE((box.left >= 0 && box.left <= box.right && box.right <= 8));
        // unclipped sides are 4; a clipped one ends at the border
        CHECK((box.bottom - box.top == 4 || box.top == 0 || box.bottom == 8));
        CHECK((box.right - box.left == 4 || box.left == 0 || box.right == 8));
        const double area = (double)(box.bottom - box.top) * (box.right - box.left);
        CHECK(box.lambda == (float)(1 - area / 64));
        const int cy = box.top > 0 ? box.top + 2 : box.bottom - 2, cx = box.left > 0 ? box.left + 2 : box.right - 2;
        centre_count[cy * 8 + cx]++;
    }
    for (int n : centre_count) CHECK((n > 50 && n < 150));  // 100 each if the centre is uniform
    MixDraw whole;  // λ = 0: sides of 8 about the centre, at least 4 x 4 of them inside the image
    cutmix_box(whole, 0.0, 8, 8, 3);
    CHECK(whole.lambda >= 0.0f);
    CHECK(whole.lambda <= 0.75f);
}

TEST_CASE("the Gamma and Beta samplers: their means and variances over many keys") {
    const int n = 40000;
    for (double alpha : {0.3, 0.8, 1.0, 2.5}) {
        CAPTURE(alpha);
        double sum = 0, sum_sq = 0, beta_sum = 0, beta_sq = 0;
        for (int i = 0; i < n; i++) {
            const double x = std::exp(log_gamma_draw(alpha, splitmix64(1000 + i)));
            const double lambda = beta_draw(alpha, splitmix64(7 * i + 1));
            REQUIRE((lambda >= 0 && lambda <= 1));
            sum += x, sum_sq += x * x, beta_sum += lambda, beta_sq += lambda * lambda;
        }
        const double mean = sum / n, var = sum_sq / n - mean * mean;
        CHECK(mean == doctest::Approx(alpha).epsilon(0.03));  // Gamma(α, 1): mean α, variance α
        CHECK(var == doctest::Approx(alpha).epsilon(0.06));
        const double beta_mean = beta_sum / n, beta_var = beta_sq / n - beta_mean * beta_mean;
        CHECK(beta_mean == doctest::Approx(0.5).epsilon(0.02));  // Beta(α, α): mean 1/2, variance 1/(4(2α+1))
        CHECK(beta_var == doctest::Approx(1 / (4 * (2 * alpha + 1))).epsilon(0.04));
    }
}

TEST_CASE("the draw of a step: a pure function of (seed, step); the coins of --mix-switch and --mix-prob") {
    MixSettings both;
    both.mixup_alpha = 0.8f;
    both.cutmix_alpha = 1.0f;
    const MixDraw a = mix_draw(both, 5, 17, 8, 8), again = mix_draw(both, 5, 17, 8, 8);
    CHECK((a.lambda == again.lambda && a.cutmix == again.cutmix && a.top == again.top && a.left == again.left));
    int differ = 0;
    for (int64_t step = 0; step < 20; step++)
        differ += mix_draw(both, 5, step, 8, 8).lambda != mix_draw(both, 6, step, 8, 8).lambda;
    CHECK(differ == 20);
    auto fractions = [](const MixSettings& s) {  // of the steps: mixed, and cutmix among the mixed
        int mixed = 0, cutmix = 0;
        const int n = 20000;
        for (int64_t step = 0; step < n; step++) {
            const MixDraw d = mix_draw(s, 9, step, 32, 32);
            mixed += d.mixed;
            cutmix += d.mixed && d.cutmix;
            if (!d.cutmix) CHECK((d.top == 0 && d.bottom == 0));  // mixup has no box
        }
        return std::make_pair((double)mixed / n, (double)cutmix / std::max(mixed, 1));
    };
    // prob 1: every batch but those whose cutmix box has no area (λ > 1 - (2/32)^2: side 32 sqrt(1 - λ) < 2)
    CHECK(fractions(both).first > 0.99);
    CHECK(fractions(both).second == doctest::Approx(0.5).epsilon(0.03));
    MixSettings rare = both;
    rare.switch_prob = 0.2f;
    rare.prob = 0.6f;
    const auto [mixed, cutmix] = fractions(rare);
    CHECK(mixed == doctest::Approx(0.6).epsilon(0.03));
    CHECK(cutmix == doctest::Approx(0.2).epsilon(0.08));
    MixSettings mixup_only = both, cutmix_only = both;
    mixup_only.cutmix_alpha = 0;
    cutmix_only.mixup_alpha = 0;
    CHECK(fractions(mixup_only).second == 0.0);
    CHECK(fractions(cutmix_only).second == 1.0);
    CHECK(!mix_draw(MixSettings{}, 5, 17, 8, 8).mixed);  // off
}

TEST_CASE("soft-target cross-entropy: a mixed 3-class row by hand, with label smoothing") {
    // logits 0, ln 2, ln 4: p = 1/7, 2/7, 4/7. Class 2 with λ = 0.25, class 0 with 0.75, ε = 0.3:
    // q(2) = (0.1, 0.1, 0.8), q(0) = (0.8, 0.1, 0.1), q = 0.25 q(2) + 0.75 q(0) = (0.625, 0.1, 0.275),
    // loss = -(0.625 ln(1/7) + 0.1 ln(2/7) + 0.275 ln(4/7)) = ln 7 - 0.65 ln 2, dlogits = p - q
    std::vector<double> logits = {0.0, std::log(2.0), std::log(4.0)}, losses(1), probs(3), dlogits(3, 0.0);
    std::vector<float> target = {2}, mix = {0, 0.25f};
    crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), target.data(), nullptr, 1, 3, 0.3f,
                             mix.data());
    CHECK(losses[0] == doctest::Approx(std::log(7.0) - 0.65 * std::log(2.0)).epsilon(1e-7));
    crossentropy_backward_cpu(dlogits.data(), probs.data(), target.data(), nullptr, 1.0f, 1, 3, 0.3f, mix.data());
    CHECK(dlogits[0] == doctest::Approx(1.0 / 7 - 0.625).epsilon(1e-7));
    CHECK(dlogits[1] == doctest::Approx(2.0 / 7 - 0.1).epsilon(1e-7));
    CHECK(dlogits[2] == doctest::Approx(4.0 / 7 - 0.275).epsilon(1e-7));
}

TEST_CASE("soft-target cross-entropy: backward matches finite differences; λ = 1 is the plain loss; a class of "
          "weight 0 adds 0 where its p underflows") {
    const int N = 5, V = 4;
    Rng rng(81);
    auto logits = random_vector<double>(N * V, rng, 3.0f);
    std::vector<float> targets(N), mix(2 * N), weights = {1, 0, 1, 1, 1};
    for (int n = 0; n < N; n++) {
        targets[n] = (float)rng.below(V);
        mix[2 * n] = (float)rng.below(V);
        mix[2 * n + 1] = rng.uniform(0, 1);
    }
    mix[2 * 4] = targets[4];  // a row mixed with its own class
    for (float smoothing : {0.0f, 0.1f})
        for (const float* row_weight : {(const float*)nullptr, (const float*)weights.data()}) {
            CAPTURE(smoothing);
            const float count = row_weight ? 4.0f : (float)N;
            std::vector<double> losses(N), probs(N * V), dlogits(N * V, 0);
            auto loss = [&] {
                crossentropy_forward_cpu(losses.data(), probs.data(), logits.data(), targets.data(), row_weight, N, V,
                                         smoothing, mix.data());
                double s = 0;
                for (double l : losses) s += l;
                return s / count;
            };
            loss();
            crossentropy_backward_cpu(dlogits.data(), probs.data(), targets.data(), row_weight, count, N, V, smoothing,
                                      mix.data());
            check_gradient("dlogits", logits, dlogits, loss);
        }
    // λ = 1: the plain smoothed loss and gradient, to rounding
    std::vector<float> own(2 * N);
    for (int n = 0; n < N; n++) own[2 * n] = (float)(((int)targets[n] + 1) % V), own[2 * n + 1] = 1.0f;
    std::vector<double> plain(N), mixed(N), probs(N * V), dplain(N * V, 0), dmixed(N * V, 0);
    crossentropy_forward_cpu(plain.data(), probs.data(), logits.data(), targets.data(), nullptr, N, V, 0.1f);
    crossentropy_backward_cpu(dplain.data(), probs.data(), targets.data(), nullptr, 1.0f, N, V, 0.1f);
    crossentropy_forward_cpu(mixed.data(), probs.data(), logits.data(), targets.data(), nullptr, N, V, 0.1f,
                             own.data());
    crossentropy_backward_cpu(dmixed.data(), probs.data(), targets.data(), nullptr, 1.0f, N, V, 0.1f, own.data());
    for (int n = 0; n < N; n++) CHECK(mixed[n] == doctest::Approx(plain[n]).epsilon(1e-12));
    for (int i = 0; i < N * V; i++) CHECK(dmixed[i] == doctest::Approx(dplain[i]).epsilon(1e-12));
    // the own class's p underflows in float (-log p = inf), but its weight is 0: a finite loss
    std::vector<float> z = {-200.0f, 1.0f, 0.5f}, y = {0}, other_only = {1, 0.0f}, loss(1), p(3), dz(3, 0.0f);
    crossentropy_forward_cpu(loss.data(), p.data(), z.data(), y.data(), nullptr, 1, 3, 0.0f, other_only.data());
    REQUIRE(p[0] == 0.0f);
    CHECK(loss[0] == doctest::Approx(std::log(std::exp(1.0) + std::exp(0.5)) - 1.0).epsilon(1e-5));
    crossentropy_backward_cpu(dz.data(), p.data(), y.data(), nullptr, 1.0f, 1, 3, 0.0f, other_only.data());
    for (float g : dz) CHECK(std::isfinite(g));
}

// 3 classes of 1-channel 4x4 images whose pixels are their index
static ImageData numbered_images(int n) {
    ImageData data;
    data.classes = 3;
    data.class_names = {"a", "b", "c"};
    for (ImageSet* set : {&data.train, &data.test}) {
        set->channels = 1;
        set->height = set->width = 4;
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 16; k++) set->pixels.push_back((uint8_t)((i * 16 + k) % 256));
            set->labels.push_back(i % 3);
        }
    }
    return data;
}

TEST_CASE("the training batch of a step, mixed: its augmented pixels mixed as the step's draw says, targets kept") {
    VisionSettings s;
    s.patch = 2;
    const VisionTask task("numbered", numbered_images(12), s);
    Batch plain, mixed;
    plain.shape(task, 6, {});
    mixed.shape(task, 6, {});
    mixed.mixing.mixup_alpha = 0.8f;
    mixed.mixing.cutmix_alpha = 1.0f;
    int mixups = 0, cutmixes = 0;
    for (int64_t step = 0; step < 12; step++) {
        EpochOrder order_a(3, task.train_size()), order_b(3, task.train_size());
        training_batch(task, order_a, step, plain);
        training_batch(task, order_b, step, mixed);
        CHECK(plain.mix_targets() == nullptr);
        const MixDraw d = mix_draw(mixed.mixing, 3, step, 4, 4);
        CHECK(mixed.targets == plain.targets);
        if (!d.mixed) {  // a cutmix box of no area (on 4 x 4 images, where λ > 3/4): the batch as it was
            CHECK(mixed.mix_targets() == nullptr);
            CHECK(mixed.pixels == plain.pixels);
            continue;
        }
        REQUIRE(mixed.mix_targets() != nullptr);
        (d.cutmix ? cutmixes : mixups)++;
        for (int b = 0; b < 6; b++) {
            CHECK(mixed.mix[2 * b] == plain.targets[5 - b]);
            CHECK(mixed.mix[2 * b + 1] == d.lambda);
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 4; x++) {
                    const float own = plain.pixels[b * 16 + y * 4 + x], other = plain.pixels[(5 - b) * 16 + y * 4 + x];
                    const bool in_box = y >= d.top && y < d.bottom && x >= d.left && x < d.right;
                    const float want = d.cutmix ? (in_box ? other : own) : d.lambda * own + (1 - d.lambda) * other;
                    CHECK(mixed.pixels[b * 16 + y * 4 + x] == want);
                }
        }
    }
    CHECK(mixups > 0);
    CHECK(cutmixes > 0);
}

// ----------------------------------------------------------------------------
// the command line

TEST_CASE("mixing flags: bad values and misplaced flags get one clear line and exit code 2") {
    const std::string images = "--task images --data-dir " + tiny_image_folder() + " --patch 2 ";
    expect_error("--task maj3 --mixup 0.8", "--mixup is for the image tasks");
    expect_error("--task maj3 --cutmix 1", "--cutmix is for the image tasks");
    expect_error(images + "--mixup -1", "--mixup must be at least 0");
    expect_error(images + "--cutmix x", "--cutmix expects a number");
    expect_error(images + "--mixup 0.8 --mix-prob 1.5", "--mix-prob is a chance, at most 1");
    expect_error(images + "--mixup 0.8 --mix-switch 0.3", "--mix-switch picks between mixup and cutmix");
    expect_error(images + "--mix-prob 0.5", "--mix-prob needs --mixup or --cutmix");
    expect_error(images + "--cutmix 1 --dump-state " + TMP_PREFIX + "mix.safetensors", "--dump-state writes one");
    CommandResult help = run_command(MASKPRIOR + " --help");
    CHECK(help.out.find("--mixup A") != std::string::npos);
    CHECK(help.out.find("--mix-switch P") != std::string::npos);
}

// The eval_loss column of a run folder's log.jsonl, in order
static std::vector<double> eval_losses(const std::string& dir) {
    std::vector<double> losses;
    std::ifstream log(dir + "/log.jsonl");
    for (std::string line; std::getline(log, line);) losses.push_back(nlohmann::json::parse(line)["eval_loss"]);
    return losses;
}

TEST_CASE("mixing: a short CPU run with --mixup 0.8 --cutmix 1.0 learns, says so at start-up, and records it") {
    const std::string dir = TMP_PREFIX + "mix_learns";
    CommandResult r = run_command(MASKPRIOR + " --device cpu --task images --data-dir " + tiny_image_folder() +
                                  " --patch 4 --batch 12 --steps 60 --lr 3e-3 --eval-every 20 --mixup 0.8 --cutmix 1.0"
                                  " --out " + dir);
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    CHECK(r.out.find("mixup 0.8, cutmix 1, switch 0.5, prob 1") != std::string::npos);
    const std::vector<double> losses = eval_losses(dir);
    REQUIRE(losses.size() == 4);  // steps 0, 20, 40, 60
    for (double l : losses) CHECK(std::isfinite(l));
    CHECK(losses.back() < 0.8 * losses.front());
    StFile saved = safetensors_read(dir + "/model.safetensors");
    CHECK(saved.metadata["mixup"] == "0.8");
    CHECK(saved.metadata["cutmix"] == "1");
    CHECK(saved.metadata["mix_switch"] == "0.5");
    CHECK(saved.metadata["mix_prob"] == "1");
    // a run without mixing writes none of the keys, as before they existed
    REQUIRE(run_command(TINY + "--task images --data-dir " + tiny_image_folder() + " --patch 2 --steps 1 --out " +
                        dir + "_off").exit_code == 0);
    CHECK(safetensors_read(dir + "_off/model.safetensors").metadata.count("mixup") == 0);
}

TEST_CASE("mixing: --resume and a killed run continued end bit-identical to the uninterrupted run; other mixing "
          "is refused") {
    const std::string run = TINY + "--task images --data-dir " + tiny_image_folder() +
                            " --patch 2 --batch 6 --warmup 3 --eval-every 100 --mixup 0.8 --cutmix 1.0 --mix-prob 0.7 ";
    expect_resume_bit_exact(run, 3, 9, "mix");
    // killed after step 6, continued from the checkpoint of step 4: the uninterrupted run's log and tensors
    const std::string whole = TMP_PREFIX + "mix_whole", killed = TMP_PREFIX + "mix_killed";
    CommandResult k = run_command("MASKPRIOR_KILL_AT=after-step:6 " + run + "--steps 9 --checkpoint-every 4 --out " +
                                  killed);
    CHECK(k.exit_code != 0);
    REQUIRE(run_command(run + "--steps 9 --checkpoint-every 4 --continue --out " + killed).exit_code == 0);
    StFile a = safetensors_read(whole + "/model.safetensors"), b = safetensors_read(killed + "/model.safetensors");
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (const StTensor& t : a.tensors) {
        const StTensor* u = b.find(t.name);
        REQUIRE(u);
        CHECK_MESSAGE(memcmp(t.data.data(), u->data.data(), t.data.size() * sizeof(float)) == 0, t.name);
    }
    CHECK(read_file(whole + "/log.jsonl") == read_file(killed + "/log.jsonl"));
    // a resume with other mixing, or none, is refused
    const std::string checkpoint = " --steps 12 --resume " + TMP_PREFIX + "mix_half/model.safetensors";
    const std::string flags = "--task images --data-dir " + tiny_image_folder() + " --patch 2 --batch 6 --warmup 3 ";
    expect_error(flags + "--mixup 0.8 --cutmix 1.0" + checkpoint, "mix_prob=0.7; this run asks for mix_prob=1");
    expect_error(flags + checkpoint, "cutmix=1; this run asks for cutmix=0");
    expect_error(flags + "--mixup 0.5 --cutmix 1.0 --mix-prob 0.7" + checkpoint, "mixup=0.8");
}
