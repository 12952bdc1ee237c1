// A wrong prior and the mask's learning rate (prior/wrong_prior.h, --prior-noise, --prior-drop,
// --prior-seed, --mask-lr-scale): the wrong G is a function of its seed alone, flips only entries
// that can matter, in pairs where G is symmetric, and drops only the edges the target needs; the
// mask's AdamW step is the one at S x lr and every other weight's is unchanged, on the CPU and
// the GPU; through the program, the flags are recorded in the checkpoint, a resume with other
// values is refused, the inits of one seed share G, and a wrong prior's runs log the prior mass
// on the true G where the others log exactly what they logged before. The CPU and command-line
// cases use test_model.cu's and test_cli.cu's helpers, so they run in tests/unit_tests alone.
#include <set>
#include "test_util.h"
#include "prior/wrong_prior.h"  // make_prior_wrong, seeded_picks, wrong_entries
#include "run/step.cuh"         // model_adamw_groups, model_update
#include "tasks/boolean.h"      // BooleanTask: G and the edges its target needs

// GPU: AdamW over ranges of different learning-rate factors matches the CPU's
TEST_CASE("GPU AdamW: each range steps at its lr_scale x lr, as on the CPU" * doctest::skip(NO_GPU)) {
    Rng rng(12);
    const size_t n = 5000;
    const std::vector<float> p = random_vector<float>(n, rng), g = random_vector<float>(n, rng);
    AdamWGroups groups;
    groups.add(0, 1000, 0.01f);
    groups.add(1000, 3000, 0.0f, 10.0f);  // a mask-like range: no decay, ten times the rate
    groups.add(3000, n, 0.01f, 0.5f);
    for (bool decoupled : {true, false}) {
        CAPTURE(decoupled);
        AdamWSettings s;
        s.decoupled = decoupled;
        std::vector<float> cpu_p = p, cpu_m(n, 0.1f), cpu_v(n, 0.2f);
        GpuBuffer gpu_p(cpu_p), gpu_m(cpu_m), gpu_v(cpu_v), gpu_g(g);
        adamw_update_groups(DEVICE_CPU, cpu_p.data(), cpu_m.data(), cpu_v.data(), g.data(), groups, s, 3);
        adamw_update_groups(DEVICE_GPU, gpu_p.ptr, gpu_m.ptr, gpu_v.ptr, gpu_g.ptr, groups, s, 3);
        expect_close("adamw params by range", gpu_p.get(), cpu_p, ELEMENTWISE);
        expect_close("adamw m by range", gpu_m.get(), cpu_m, ELEMENTWISE);
    }
}

#ifndef MASKPRIOR_CUDA_EMULATION
// maj3's G made wrong with noise P, drop K, seed s
static Structure wrong_maj3(double P, int K, uint64_t seed, const char* task = "maj3") {
    const BooleanTask t(task);
    return make_prior_wrong({1, t.seq_len, t.structure()}, {P, K, seed}, t.needed_edges(), false);
}

TEST_CASE("a wrong G: one seed one G, another seed another; a smaller P flips a subset; the truth carried") {
    const BooleanTask task("maj3");
    const Structure a = wrong_maj3(0.3, 0, 1), b = wrong_maj3(0.3, 0, 1), other = wrong_maj3(0.3, 0, 2);
    CHECK(a.g == b.g);
    CHECK(a.g != other.g);
    CHECK(a.truth == task.structure());
    CHECK(a.made_wrong());
    CHECK(a.true_structure().g == task.structure());
    // 16 tokens: 120 pairs off the diagonal, round(0.3 · 120) = 36 of them flipped, both ways
    CHECK(wrong_entries(a) == 72);
    CHECK(wrong_entries(wrong_maj3(0.1, 0, 1)) == 24);
    const Structure small = wrong_maj3(0.1, 0, 1);
    for (size_t k = 0; k < small.g.size(); k++)
        if (small.g[k] != small.truth[k]) CHECK(a.g[k] != a.truth[k]);  // flipped at P = 0.1: flipped at 0.3
    const Structure none = make_prior_wrong({1, 16, task.structure()}, {0, 0, 1}, task.needed_edges(), false);
    CHECK(none.g == task.structure());
    CHECK(wrong_entries(none) == 0);
    for (uint64_t seed = 1; seed <= 20; seed++)  // 0.7 x 120 pairs: every draw distinct (k distinct picks)
        CHECK(wrong_entries(wrong_maj3(0.7, 0, seed)) == 2 * 84);
}

TEST_CASE("a wrong G's noise: symmetric where G is, off the diagonal only; causal: below the diagonal only") {
    for (const char* name : {"maj3", "2parity", "cyclic3"}) {
        CAPTURE(name);
        const BooleanTask task(name);
        const int T = task.seq_len;
        const Structure truth = {1, T, task.structure()};
        const bool symmetric = head_is_symmetric(truth, 0);
        CHECK(symmetric == (std::string(name) != "cyclic3"));  // cyclic3's monomial links go one way
        for (uint64_t seed = 1; seed <= 5; seed++) {
            const Structure G = make_prior_wrong(truth, {0.4, 0, seed}, {}, false);
            CHECK(head_is_symmetric(G, 0) == symmetric);
            const int off_diagonal = T * (T - 1);
            CHECK(wrong_entries(G) == (symmetric ? 2 * (int)std::lround(0.4 * off_diagonal / 2)
                                                 : (int)std::lround(0.4 * off_diagonal)));
            for (int i = 0; i < T; i++) CHECK(G.g[i * T + i] == truth.g[i * T + i]);
        }
    }
    // causal: a band on and below the diagonal; the noise touches only the entries below it
    const int T = 9;
    Structure band = {1, T, std::vector<float>(T * T, 0.0f)};
    for (int i = 0; i < T; i++)
        for (int j = std::max(0, i - 2); j <= i; j++) band.g[i * T + j] = 1;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        const Structure G = make_prior_wrong(band, {0.5, 0, seed}, {}, true);
        CHECK(wrong_entries(G) == (int)std::lround(0.5 * T * (T - 1) / 2));
        for (int i = 0; i < T; i++)
            for (int j = i; j < T; j++) CHECK(G.g[i * T + j] == band.g[i * T + j]);
    }
    // one G per head: each head drawn on its own, from the one seed
    Structure two = {2, 16, BooleanTask("maj3").structure()};
    two.g.insert(two.g.end(), two.g.begin(), two.g.end());
    const Structure G = make_prior_wrong(two, {0.3, 0, 3}, {}, false);
    CHECK(wrong_entries(G) == 2 * 72);
    CHECK(!std::equal(G.g.begin(), G.g.begin() + 256, G.g.begin() + 256));
}

TEST_CASE("a wrong G's drop: K of the edges the target needs, both ways, nothing else; too many refused") {
    for (const char* name : {"maj3", "2parity", "cyclic3"}) {
        CAPTURE(name);
        const BooleanTask task(name);
        const std::vector<float> truth = task.structure();
        const std::vector<PriorEdge> needed = task.needed_edges();
        CHECK(needed.size() == (std::string(name) == "maj3" ? 3u : std::string(name) == "2parity" ? 2u : 30u));
        for (const PriorEdge& edge : needed)
            for (const auto& [query, key] : edge) CHECK(truth[query * 16 + key] == 1.0f);  // edges of G
        std::set<std::vector<float>> seen;
        for (uint64_t seed = 1; seed <= 12; seed++) {
            const Structure G = make_prior_wrong({1, 16, truth}, {0, 1, seed}, needed, false);
            int dropped = 0;
            for (const PriorEdge& edge : needed) {
                int gone = 0;
                for (const auto& [query, key] : edge) gone += G.g[query * 16 + key] == 0.0f;
                CHECK((gone == 0 || gone == (int)edge.size()));  // an edge goes whole
                dropped += gone > 0;
            }
            CHECK(dropped == 1);
            CHECK(wrong_entries(G) == (int)needed[0].size());
            seen.insert(G.g);
        }
        CHECK(seen.size() > 1);  // the seed picks which edge
        const Structure all = make_prior_wrong({1, 16, truth}, {0, (int)needed.size(), 1}, needed, false);
        CHECK(wrong_entries(all) == (int)(needed.size() * needed[0].size()));
        CHECK_THROWS_WITH_AS(make_prior_wrong({1, 16, truth}, {0, (int)needed.size() + 1, 1}, needed, false),
                             doctest::Contains("so at most"), InputError);
    }
}

TEST_CASE("--mask-lr-scale: the mask steps as AdamW at S x lr, every other weight as at lr, bit for bit") {
    const Config c = tiny_config(1, false);
    for (bool decoupled : {true, false}) {
        CAPTURE(decoupled);
        Model at_one, at_s;
        ModelOwner owners[2] = {{at_one}, {at_s}};
        const float S = 10.0f;
        std::vector<float> grads;
        for (Model* m : {&at_one, &at_s}) {
            model_build(*m, c, DEVICE_CPU, 2);
            init_model(*m, 4, 2.0f);
            Rng rng(9);  // the same gradient in both
            grads = random_vector<float>(m->num_params, rng);
            model_upload(*m, m->grads_mem, grads);
            m->adam.decoupled = decoupled;
            m->mask_weight_decay = 0.01f;
        }
        at_s.mask_lr_scale = S;
        const std::vector<float> before = model_download(at_one, at_one.params_mem);
        for (int step = 0; step < 3; step++) {
            model_update(at_one);
            model_update(at_s);
        }
        const std::vector<float> one = model_download(at_one, at_one.params_mem);
        const std::vector<float> scaled = model_download(at_s, at_s.params_mem);
        // the mask by hand: three AdamW steps at S x lr with the mask's decay
        const size_t mask_at = (size_t)(at_one.params.mask - at_one.params_mem);
        const size_t mask_n = (size_t)c.prior_layer_count() * c.mask_heads * c.T * c.T;
        std::vector<float> p(before.begin() + mask_at, before.begin() + mask_at + mask_n);
        std::vector<float> m(mask_n, 0.0f), v(mask_n, 0.0f);
        AdamWSettings s = at_one.adam;
        s.lr *= S;
        for (int t = 1; t <= 3; t++)
            adamw_cpu(p.data(), m.data(), v.data(), grads.data() + mask_at, mask_n, s, 0.01f, t);
        for (size_t i = 0; i < scaled.size(); i++) {
            const bool mask = i >= mask_at && i < mask_at + mask_n;
            if (mask) REQUIRE(scaled[i] == p[i - mask_at]);
            else REQUIRE(scaled[i] == one[i]);
        }
        // and under AdamW the mask's step is S times the step at lr, to the rounding of the parameters and
        // the decay's share (wd·p, p a little elsewhere); under Adam with L2 the decay is inside the
        // gradient, whose sign a slightly other p may turn where the loss gradient is near 0
        for (size_t i = mask_at; decoupled && i < mask_at + mask_n; i++)
            CHECK((scaled[i] - before[i]) == doctest::Approx(S * (one[i] - before[i])).epsilon(2e-3));
        const AdamWGroups groups = model_adamw_groups(at_s);
        int mask_ranges = 0;
        for (int g = 0; g < groups.count; g++) {
            const bool mask = groups.group[g].begin == mask_at;
            mask_ranges += mask;
            CHECK(groups.group[g].lr_scale == (mask ? S : 1.0f));
        }
        CHECK(mask_ranges == 1);
    }
}

// ----------------------------------------------------------------------------
// through the program

TEST_CASE("the wrong-prior and mask-speed flags: bad values and combinations get one line") {
    expect_error("--init mask --prior-noise 1.5", "--prior-noise is a fraction of G's entries, at most 1, got 1.5");
    expect_error("--init mask --prior-noise -0.1", "--prior-noise must be at least 0");
    expect_error("--init mask --prior-drop -1", "--prior-drop must be at least 0");
    expect_error("--init mask --prior-drop x", "--prior-drop expects a whole number");
    expect_error("--prior-noise 0.3", "--prior-noise makes G wrong, and --init default reads no G: it needs --init "
                                      "qk-svd, qk-opt or mask");
    expect_error("--init mimetic --prior-drop 1", "--prior-drop makes G wrong, and --init mimetic reads no G");
    expect_error("--init mask --prior-seed 3", "--prior-seed needs --prior-noise or --prior-drop");
    // these two are refused once the task is loaded: after the run folder is made, so not in runs/
    const std::string out = "--out " + TMP_PREFIX + "wrong_prior_flags ";
    expect_error(out + "--init mask --prior-drop 4", "--prior-drop 4: the task's target needs 3 edges of G");
    expect_error(out + "--task add3 --init mask --prior-drop 1",
                 "--prior-drop: task add3 defines no edges that its target");
    expect_error("--init mask --prior-drop 1 --mask-structure experiments/structures/maj3-asym.txt",
                 "--prior-drop removes edges of the task's own G, not of a --mask-structure file");
    expect_error("--init mask --mask-lr-scale 0", "--mask-lr-scale must be greater than 0");
    expect_error("--init mask --mask-lr-scale nan", "--mask-lr-scale expects a number");
    expect_error("--init qk-opt --mask-lr-scale 10", "--mask-lr-scale needs --init mask");
    expect_error("--init mask --freeze-mask --mask-lr-scale 10", "--mask-lr-scale scales a mask that learns");
}

// The G that a run prints at its start (print_structure: a title, the keys' labels, then a row per
// query), from its stdout; "" when there is none
static std::string printed_structure(const std::string& out, int T) {
    size_t end = out.find("G on a sample row");
    const size_t start = end;
    for (int line = 0; line < T + 2 && end != std::string::npos; line++) end = out.find('\n', end + 1);
    return start == std::string::npos || end == std::string::npos ? "" : out.substr(start, end - start);
}

TEST_CASE("a wrong prior and a faster mask: recorded in the checkpoint, resumed bit-exactly, other values refused, "
          "one G for every init of a seed, and prior_mass_true logged only then") {
    const std::string run = TINY + "--task maj3 --init mask --seed 3 --optimizer adam --eval-every 4 ";
    const std::string wrong = "--prior-noise 0.3 --prior-drop 1 --mask-lr-scale 10 ";
    StFile resumed = expect_resume_bit_exact(run + wrong, 4, 9, "wrong_prior");
    CHECK(resumed.metadata["prior_noise"] == "0.3");
    CHECK(resumed.metadata["prior_drop"] == "1");
    CHECK(resumed.metadata["prior_seed"] == "3");  // the run's seed, by default
    CHECK(resumed.metadata["mask_lr_scale"] == "10");
    const std::string checkpoint = "--steps 12 --out " + TMP_PREFIX + "wrong_prior_refused --resume " + TMP_PREFIX +
                                   "wrong_prior_half/model.safetensors";
    const std::string args = "--task maj3 --init mask --seed 3 --optimizer adam ";
    expect_error(args + "--prior-noise 0.1 --prior-drop 1 --mask-lr-scale 10 " + checkpoint,
                 "is a checkpoint of prior_noise=0.3; this run asks for prior_noise=0.1");
    expect_error(args + "--prior-noise 0.3 --prior-drop 1 --prior-seed 4 --mask-lr-scale 10 " + checkpoint,
                 "is a checkpoint of prior_seed=3; this run asks for prior_seed=4");
    expect_error(args + "--prior-noise 0.3 --prior-drop 1 " + checkpoint,
                 "is a checkpoint of mask_lr_scale=10; this run asks for mask_lr_scale=1");
    expect_error(args + "--mask-lr-scale 10 " + checkpoint,
                 "is a checkpoint of prior_drop=1; this run asks for prior_drop=0");
    // a run without the flags: no new keys, and its checkpoint refused by a run with them
    const std::string plain_dir = TMP_PREFIX + "right_prior";
    CommandResult plain = run_command(run + "--steps 4 --out " + plain_dir);
    REQUIRE(plain.exit_code == 0);
    StFile plain_file = safetensors_read(plain_dir + "/model.safetensors");
    for (const char* key : {"prior_noise", "prior_drop", "prior_seed", "mask_lr_scale"})
        CHECK(!plain_file.metadata.count(key));
    expect_error(args + "--mask-lr-scale 2 --steps 6 --out " + plain_dir + "_refused --resume " + plain_dir +
                     "/model.safetensors",
                 "is a checkpoint of mask_lr_scale=1; this run asks for mask_lr_scale=2");
    CHECK(read_file(plain_dir + "/log.jsonl").find("prior_mass_true") == std::string::npos);
    CHECK(read_file(plain_dir + "/metrics.json").find("prior_mass_true") == std::string::npos);
    // the wrong prior's run: prior_mass_true beside prior_mass, in every log row and in metrics.json
    const std::string whole = TMP_PREFIX + "wrong_prior_whole";
    const nlohmann::json metrics = nlohmann::json::parse(read_file(whole + "/metrics.json"));
    REQUIRE(metrics.contains("prior_mass_true"));
    REQUIRE(metrics["prior_mass_true"].size() == 1);
    CHECK(metrics["prior_mass_true"][0].get<double>() != metrics["prior_mass"][0].get<double>());
    std::ifstream log(whole + "/log.jsonl");
    int rows = 0;
    for (std::string row; std::getline(log, row); rows++)
        CHECK(nlohmann::json::parse(row).contains("prior_mass_true"));
    CHECK(rows == 4);  // steps 0, 4, 8, 9
    // the step-0 prior mass on the true G of a mask that starts on a wrong one is below the mass on its own G
    std::ifstream first_row(whole + "/log.jsonl");
    std::string line;
    std::getline(first_row, line);
    const nlohmann::json step0 = nlohmann::json::parse(line);
    CHECK(step0["prior_mass_true"][0].get<double>() < step0["prior_mass"][0].get<double>());
    // every init of one seed is given the same wrong G; another prior seed gives another
    const std::string flags = "--task maj3 --seed 5 --steps 1 --qk-opt-steps 2 --prior-noise 0.2 --out " + TMP_PREFIX;
    auto G_of = [&](const std::string& more) { return printed_structure(run_command(TINY + flags + more).out, 16); };
    const std::string mask_G = G_of("g_mask --init mask");
    REQUIRE(mask_G.size() > 16 * 32);
    CHECK(G_of("g_qk --init qk-opt") == mask_G);
    CHECK(G_of("g_frozen --init mask --freeze-mask") == mask_G);
    CHECK(G_of("g_other --init mask --prior-seed 6") != mask_G);
    CHECK(G_of("g_right --init mask --prior-noise 0") != mask_G);  // the task's own G
}
#endif
