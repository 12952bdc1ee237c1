// CUDA graphs (gpu/graph.cuh, --cuda-graph) and the step without a host round trip
// (gpu/device_step.cuh, run/step.cuh): the emulation's graph API itself; and a replayed graph
// gives the same bits as the same work launched call by call, in training (a token model with
// clipping under both kernel sets, an image classifier whose hits the step log counts, a
// next-token model whose loss mask changes from batch to batch), in evaluation (forward passes
// at two row counts), for the divergence the step log names, and across a killed and resumed
// run. Included after test_gpu.cu, whose helpers it uses; make test runs it on the emulation.
#include "run/step.cuh"

// x (4 floats) += bias: add_bias_kernel1 on one row
static void add_row(GpuBuffer& x, const GpuBuffer& bias) {
    launch_kernel<add_bias_kernel1>(1, 4, 0, x.ptr, (const float*)bias.ptr, 1, 4);
}

TEST_CASE("the emulation's stream capture records work without running it, a graph replays it in order, and what "
          "CUDA refuses during a capture invalidates it" * doctest::skip(NO_GPU || !GPU_EMULATED)) {
    GpuBuffer x(std::vector<float>{5, 5, 5, 5}), bias(std::vector<float>{1, 2, 3, 4});
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal) == cudaSuccess);
    buffer_zero(DEVICE_GPU, x.ptr, 4);
    add_row(x, bias);
    add_row(x, bias);
    REQUIRE(cudaStreamEndCapture(gpu_stream(), &graph) == cudaSuccess);
    CHECK(x.get() == std::vector<float>{5, 5, 5, 5});  // recorded, not run
    size_t nodes = 0;
    REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
    CHECK(nodes == 3);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int replay = 0; replay < 2; replay++) {  // the memset first, then the two additions, each time
        REQUIRE(cudaGraphLaunch(exec, gpu_stream()) == cudaSuccess);
        CHECK(x.get() == std::vector<float>{2, 4, 6, 8});
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    // a synchronous copy (a read of a result) during a capture: refused, and the capture fails
    float host[4];
    REQUIRE(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaMemcpy(host, x.ptr, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorStreamCaptureUnsupported);
    void* more = nullptr;
    CHECK(cudaMalloc(&more, 64) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(gpu_stream(), &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
    cudaGetLastError();  // the errors the emulation reported
    CHECK(cudaMemcpy(host, x.ptr, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);  // no capture: allowed
}

// A model of config c on the GPU from the weights init, with `kernels` (graph or not)
static void build_on_gpu(Model& model, const Config& c, int B, const Kernels& kernels, const std::vector<float>& init) {
    model_build(model, c, DEVICE_GPU, B);
    model.kernels = kernels;
    buffer_copy(model.params_mem, DEVICE_GPU, init.data(), DEVICE_CPU, model.num_params);
}

// What a run of training steps leaves: the parameters, both moments, and the step log
struct Trained {
    std::vector<float> params, m, v;
    StepLog log;
};

// Four training steps (numbered 10 to 13) of config c from the weights init, step k on batch k
// (tokens or pixels, targets, loss masks or none), the learning rate changing every step,
// clipping at `clip`; and the step log as the host reads it at the end.
static Trained four_steps(const Config& c, const Kernels& kernels, const std::vector<float>& init, int B,
                          const std::vector<std::vector<int>>& tokens, const std::vector<std::vector<float>>& pixels,
                          const std::vector<std::vector<float>>& targets, const std::vector<std::vector<float>>& masks,
                          float clip, float smoothing = 0.0f) {
    Model model;
    build_on_gpu(model, c, B, kernels, init);
    model.label_smoothing = smoothing;
    for (int k = 0; k < 4; k++) {
        const ModelInput input = pixels.empty() ? ModelInput(tokens[k].data()) : ModelInput(pixels[k].data());
        training_step(model, input, targets[k].data(), masks.empty() ? nullptr : masks[k].data(), 1e-3f * (k + 1),
                      clip, 10 + k);
    }
    Trained t{model_download(model, model.params_mem), model_download(model, model.m_mem),
              model_download(model, model.v_mem), model_read_step_log(model)};
    CHECK(model.graphs.by_shape.size() == (kernels.graph ? 1u : 0u));  // one capture, replayed
    model_free(model);
    return t;
}

static void expect_same_bits(const Trained& a, const Trained& b) {
    CHECK(memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)) == 0);
    CHECK(memcmp(a.m.data(), b.m.data(), a.m.size() * sizeof(float)) == 0);
    CHECK(memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)) == 0);
    CHECK(memcmp(&a.log.loss, &b.log.loss, sizeof(float)) == 0);
    CHECK(a.log.first_bad_step == b.log.first_bad_step);
    CHECK(a.log.correct == b.log.correct);
    CHECK(a.log.seen == b.log.seen);
}

static Kernels with_graph(Kernels k, bool graph) {
    k.graph = graph;
    return k;
}

TEST_CASE("training steps replayed from a captured graph give the bits of the same steps call by call" *
          doctest::skip(NO_GPU)) {
    Rng rng(61);
    SUBCASE("a token model, clipped, under the first kernel versions and the fastest") {
        Config c;
        c.V = 3; c.T = 16; c.C = 16; c.L = 2; c.NH = 2; c.HS = 8; c.MLP = 16; c.mask_heads = 2;
        const int B = 8;
        std::vector<float> init(param_count(c));
        init_default(c, init.data(), rng);
        std::vector<std::vector<int>> tokens(4, std::vector<int>((size_t)B * c.T));
        std::vector<std::vector<float>> targets(4, std::vector<float>(B));
        for (int k = 0; k < 4; k++) {  // a new batch every step: its token rows too
            for (int& t : tokens[k]) t = rng.below(c.V);
            for (float& y : targets[k]) y = rng.uniform(-1, 1);
        }
        Kernels fastest;
        fastest.fast_layers = true;
        fastest.attention = 3;
        for (const Kernels& kernels : {Kernels{}, fastest}) {
            CAPTURE(kernels.fast_layers);
            const Trained direct = four_steps(c, with_graph(kernels, false), init, B, tokens, {}, targets, {}, 0.05f);
            const Trained replayed = four_steps(c, with_graph(kernels, true), init, B, tokens, {}, targets, {}, 0.05f);
            CHECK(direct.log.first_bad_step == -1);
            CHECK(direct.log.seen == 0);  // a regression readout counts no hits
            expect_same_bits(direct, replayed);
        }
    }
    SUBCASE("an image classifier, smoothed and clipped: its hits counted on the device") {
        Config c;
        c.V = 0; c.C = 24; c.L = 1; c.NH = 3; c.HS = 8; c.MLP = 40; c.OUT = 10; c.readout = READOUT_CLASS;
        c.channels = 3; c.height = 8; c.width = 8; c.patch = 2; c.T = 1 + 16; c.mask_heads = 3;
        const int B = 16;
        std::vector<float> init(param_count(c));
        init_default(c, init.data(), rng);
        std::vector<std::vector<float>> pixels, targets(4, std::vector<float>(B));
        for (int k = 0; k < 4; k++) {
            pixels.push_back(random_vector<float>((size_t)B * c.image_size(), rng));
            for (float& y : targets[k]) y = (float)rng.below(c.OUT);
        }
        const Kernels graph = with_graph(Kernels{}, true);
        const Trained direct = four_steps(c, Kernels{}, init, B, {}, pixels, targets, {}, 0.5f, 0.1f);
        const Trained replayed = four_steps(c, graph, init, B, {}, pixels, targets, {}, 0.5f, 0.1f);
        CHECK(direct.log.seen == 4 * B);
        expect_same_bits(direct, replayed);
    }
    SUBCASE("a next-token model whose loss mask, and so the loss's denominator, changes with the batch") {
        Config c;
        c.V = 7; c.T = 8; c.C = 16; c.L = 1; c.NH = 2; c.HS = 8; c.MLP = 16; c.mask_heads = 2;
        c.OUT = c.V; c.readout = READOUT_NEXT_TOKEN; c.causal = true;
        const int B = 4;
        std::vector<float> init(param_count(c));
        init_default(c, init.data(), rng);
        std::vector<std::vector<int>> tokens(4, std::vector<int>((size_t)B * c.T));
        std::vector<std::vector<float>> targets(4, std::vector<float>((size_t)B * c.T)), masks = targets;
        for (int k = 0; k < 4; k++) {
            for (int& t : tokens[k]) t = rng.below(c.V);
            for (float& y : targets[k]) y = (float)rng.below(c.V);
            for (size_t i = 0; i < masks[k].size(); i++) masks[k][i] = i % (k + 2) == 0;  // 1 in k + 2
        }
        const Trained direct = four_steps(c, Kernels{}, init, B, tokens, {}, targets, masks, 0.0f);
        const Trained replayed = four_steps(c, with_graph(Kernels{}, true), init, B, tokens, {}, targets, masks, 0.0f);
        expect_same_bits(direct, replayed);
    }
}

TEST_CASE("forward passes replayed from graphs give the bits of call by call, at two row counts, and the step log "
          "names the first step whose loss is not finite" * doctest::skip(NO_GPU)) {
    Config c;
    c.V = 3; c.T = 16; c.C = 16; c.L = 2; c.NH = 2; c.HS = 8; c.MLP = 16; c.mask_heads = 2;
    c.readout = READOUT_CLASS; c.OUT = 2;
    const int B = 8;
    Rng rng(62);
    std::vector<float> init(param_count(c));
    init_default(c, init.data(), rng);
    std::vector<int> tokens((size_t)B * c.T);
    std::vector<float> y(B);
    for (int& t : tokens) t = rng.below(c.V);
    for (float& v : y) v = (float)rng.below(c.OUT);
    Model direct, replayed;
    build_on_gpu(direct, c, B, Kernels{}, init);
    build_on_gpu(replayed, c, B, with_graph(Kernels{}, true), init);
    for (int pass = 0; pass < 2; pass++)  // the second pass replays the graphs the first captured
        for (int rows : {B, B - 3})
            for (bool row_only : {false, true}) {
                CAPTURE(rows); CAPTURE(row_only);
                const float a = model_forward(direct, tokens.data(), y.data(), rows, nullptr, row_only);
                const float b = model_forward(replayed, tokens.data(), y.data(), rows, nullptr, row_only);
                CHECK(memcmp(&a, &b, sizeof a) == 0);
                std::vector<float> la((size_t)rows * c.OUT), lb(la.size());
                buffer_copy(la.data(), DEVICE_CPU, model_activations(direct, rows).logits, DEVICE_GPU, la.size());
                buffer_copy(lb.data(), DEVICE_CPU, model_activations(replayed, rows).logits, DEVICE_GPU, lb.size());
                CHECK(memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
            }
    CHECK(replayed.graphs.by_shape.size() == 4);

    // a readout bias that is not a number from step 12 on makes its loss NaN, and every later one;
    // the log keeps the first
    for (Model* model : {&direct, &replayed})
        for (int step = 10; step < 15; step++) {
            if (step == 12) {
                std::vector<float> params = model_download(*model, model->params_mem);
                param_bind(c, params.data()).readoutb[0] = NAN;
                model_upload(*model, model->params_mem, params);
            }
            training_step(*model, tokens.data(), y.data(), nullptr, 1e-3f, 0.0f, step);
        }
    const StepLog a = model_read_step_log(direct), b = model_read_step_log(replayed);
    CHECK(a.first_bad_step == 12);
    CHECK(b.first_bad_step == 12);
    CHECK(std::isnan(b.first_bad_loss));
    CHECK(model_read_step_log(replayed).first_bad_step == -1);  // a read clears the log
    model_free(direct);
    model_free(replayed);
}

TEST_CASE("--cuda-graph: a run, and a run killed and continued, write the log and checkpoint of the call-by-call "
          "run" * doctest::skip(NO_GPU)) {
    // add3: a causal model with a loss mask, evaluated by greedy decoding (a forward pass per answer digit)
    const std::string run = GPU_BINARY + " --device cuda --task add3 --max-test 32 --init mask --width 16 --layers 2 "
                            "--heads 2 --head-size 8 --mlp 16 --batch 32 --steps 30 --eval-every 10 --log-every 5 "
                            "--checkpoint-every 10 ";
    const std::string dir = TMP_PREFIX + "graph-";
    REQUIRE(run_command(run + "--out " + dir + "direct").exit_code == 0);
    CommandResult graphed = run_command(run + "--cuda-graph --out " + dir + "graphed");
    REQUIRE_MESSAGE(graphed.exit_code == 0, graphed.out);
    CHECK(graphed.out.find("CUDA graph") != std::string::npos);
    CHECK(run_record(dir + "graphed") == run_record(dir + "direct"));
    // killed after step 15, continued from the checkpoint of step 10
    CommandResult killed = run_command("MASKPRIOR_KILL_AT=after-step:15 " + run + "--cuda-graph --out " + dir +
                                       "resumed");
    CHECK(killed.exit_code != 0);
    REQUIRE(run_command(run + "--cuda-graph --continue --out " + dir + "resumed").exit_code == 0);
    CHECK(run_record(dir + "resumed") == run_record(dir + "direct"));
    // diverging at lr 1e9: the same line, naming the same step, either way
    std::string lines[2];
    for (int graph = 0; graph < 2; graph++) {
        CommandResult r = run_command(run + "--lr 1e9 --out " + dir + "diverged" + std::to_string(graph) +
                                      (graph ? " --cuda-graph" : ""), true);
        CHECK(r.exit_code == 2);
        lines[graph] = r.out.substr(0, r.out.find(dir));
    }
    CHECK(lines[0].find("the loss became") != std::string::npos);
    CHECK(lines[1] == lines[0]);
}
