// --profile's record of a GPU training step (gpu/profile.h, gpu/profile_report.cuh): every launch,
// copy and synchronisation of a step; the serial walks of the first kernel versions marked, and
// none left with the second versions; one AdamW launch a step; every launcher's stated cost.
// Included after test_gpu.cu, whose helpers it uses; make test runs it on the emulation, make
// gpu-check on a GPU.
#include <set>
#include "gpu/profile_report.cuh"
#include "run/step.cuh"

// `steps` recorded training steps (as main.cu runs them: training_step, run/step.cuh, clipping on) of
// a small Boolean-task model, after the warm-up step, with `kernels`; by default two at the paper's
// batch (B 256, T 16: 4096 rows), for the marks count a launch's threads against an H200's lanes
static const Profiler& profile_small_model(const Kernels& kernels, bool scalar_encoding, int B = 256, int steps = 2) {
    Config c;
    c.V = 3; c.T = 16; c.C = 16; c.L = 1; c.NH = 2; c.HS = 8; c.MLP = 16; c.mask_heads = 2;
    if (scalar_encoding) {
        c.encoding = ENCODING_SCALAR;
        c.token_value = {-1, 1, 0};  // token 2 (CLS) has no value
    }
    Rng rng(5);
    std::vector<int> tokens((size_t)B * c.T);
    for (auto& t : tokens) t = rng.below(c.V);
    std::vector<float> y(B), init = random_vector<float>(param_count(c), rng, 0.1f);
    for (auto& v : y) v = rng.uniform(-1, 1);
    Model model;
    model_build(model, c, DEVICE_GPU, B);
    model.kernels = kernels;
    buffer_copy(model.params_mem, DEVICE_GPU, init.data(), DEVICE_CPU, model.num_params);
    record_profile(DEVICE_GPU, steps,
                   [&](int64_t i) { training_step(model, tokens.data(), y.data(), nullptr, 1e-3f, 1.0f, i); });
    model_free(model);
    return profiler();
}

// the names of the recorded calls that --profile marks serial
static std::set<std::string> serial_calls(const Profiler& p) {
    std::set<std::string> names;
    for (const ProfiledCall& call : p.calls)
        if (is_serial_launch(call, H200)) names.insert(call.name);
    return names;
}

TEST_CASE("--profile records a step's launches, copies and synchronisations; kernel 1's batch walks are marked "
          "serial, and none is left with the second versions" * doctest::skip(NO_GPU)) {
    for (bool scalar : {false, true}) {
        CAPTURE(scalar);
        const Profiler& first = profile_small_model(Kernels{}, scalar);
        REQUIRE(first.steps.size() == 2);
        const size_t calls_per_step = first.steps[1].first_call;
        CHECK(calls_per_step > 20);
        CHECK(first.calls.size() == 2 * calls_per_step);  // the same calls each step
        for (const ProfiledStep& s : first.steps) {  // the batch goes up in one copy, and nothing comes back
            CHECK(s.copies_to_device == 1);
            CHECK(s.async_copies == 1);
            CHECK(s.bytes_to_device >= 256 * 16 * 4 + 256 * 4);  // the tokens, the targets, the step's scalars
            CHECK(s.copies_to_host == 0);
            CHECK(s.synchronisations == 0);
        }
        size_t adamw = 0;
        for (const ProfiledCall& call : first.calls) {
            CHECK(call.name.find("a kernel") == std::string::npos);
            adamw += call.name == "adamw_kernel1";
        }
        CHECK(adamw == 2);  // one AdamW launch a step, over the flat buffers
        const std::set<std::string> serial = serial_calls(first);
        CHECK(serial.count("bias_backward_kernel1"));
        CHECK(serial.count("layernorm_backward_params_kernel1"));
        CHECK(serial.count(scalar ? "scalar_embedding_backward_kernel1" : "embedding_backward_kernel1"));

        Kernels fastest;
        fastest.fast_layers = true;
        fastest.attention = 3;
        // one recorded step: the marks are a launch's, and a step's launches are the same every step (above)
        const Profiler& second = profile_small_model(fastest, scalar, 256, 1);
        CHECK(serial_calls(second).empty());
    }
}

TEST_CASE("every launch of a training step states its cost: the first versions, and every attention version with "
          "the others' second versions" * doctest::skip(NO_GPU)) {
    std::vector<Kernels> choices = {Kernels{}};
    for (int version = 1; version <= ATTENTION_KERNEL_COUNT; version++) {
        Kernels kernels;
        kernels.attention = version;
        kernels.fast_layers = true;
        choices.push_back(kernels);
    }
    for (const Kernels& kernels : choices) {
        CAPTURE(kernels.attention); CAPTURE(kernels.fast_layers);
        // One step at B 16 (256 rows: 8 row groups for the column sums, 2 batch groups for attention 3's
        // dM) makes the paper batch's launches, call for call: 57 to 70 a step, the same names in the
        // same order at B 1, 2, 4, ..., 64 as at 256 (seen when this size was chosen); at B 256 the
        // emulation takes about 15 times as long
        for (const ProfiledCall& call : profile_small_model(kernels, false, 16, 1).calls) {
            CAPTURE(call.name);
            CHECK(call.cost.bytes > 0);
        }
    }
}

TEST_CASE("--profile 1 prints the table and a line per step, and writes no run folder" * doctest::skip(NO_GPU)) {
    const std::string out = "/tmp/maskprior-profile-" + std::to_string(getpid());
    // one layer of maj3's model: the table and its lines do not depend on the depth, and a second layer
    // doubles the emulation's time; the paper's batch, so that no fast kernel is marked serial
    const std::string flags = " --device cuda --task maj3 --layers 1 --batch 256 --attention-kernel 3 --fast-kernels "
                              "--profile 1";
    CommandResult r = run_command(GPU_BINARY + flags + " --out " + out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("kernel / call") != std::string::npos);
    CHECK(r.out.find("column_partials_sum_kernel2") != std::string::npos);
    CHECK(r.out.find("0 launch configurations marked serial") != std::string::npos);
    CHECK(r.out.find("step 1: ") != std::string::npos);
    CHECK(r.out.find("step 2: ") == std::string::npos);
    CHECK(access(out.c_str(), F_OK) != 0);
}
